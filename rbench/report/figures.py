"""How a figure is printed, in every table of the report, leaderboard.md and `rbench history`."""
from __future__ import annotations

from typing import Any

from rbench.samples.conventions import shown_step


def fmt(value: Any, key: str = "") -> str:
    """Human figure: rates with thousands separators, ms with 3 significant decimals."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("_ms"):
        return f"{value:.3f} ms" if value < 10 else f"{value:,.1f} ms"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def cell(row: dict[str, Any], key: str) -> str:
    """One figure of a per-step row as printed: ``fmt``, except that steps count from 1 (rbench.samples.conventions)."""
    if key in ("step", "churn_baseline_step") and row.get(key) is not None:
        return str(shown_step(row[key]))
    return fmt(row.get(key), key)


def money(v: Any, currency: str) -> str:
    return "–" if v is None else f"{v:,.2f} {currency}"


def rank_cell(row: dict[str, Any], place: int) -> str:
    """A rank as printed: "2", "2 (tie)" when another row has the same figure, "–" without a figure.
    Rows of a leaderboard.json older than the ranks fall back to their place in the list."""
    if "rank" not in row:
        return str(place)
    if row["rank"] is None:
        return "–"
    return f"{row['rank']} (tie)" if row.get("tie") else str(row["rank"])
