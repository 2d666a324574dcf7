"""Ranks that do not invent differences: equal figures share a rank and say "tie".

Ranks are standard competition ranks ("1, 1, 3") on the figure as the report prints it: two
clusters whose figures read the same are equal to the reader, so they share a rank, are marked
``tie``, and are listed by name — the order never suggests a difference the figures do not show.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

Row = dict[str, Any]


def shown_rate(rate: float | None) -> float | None:
    """A rate as the report prints it (one decimal): the figure ties are judged on."""
    return None if rate is None else round(float(rate), 1)


def shown_money(amount: float | None) -> float | None:
    """An amount as the report prints it (cents)."""
    return None if amount is None else round(float(amount), 2)


def rank(rows: list[Row], figure: Callable[[Row], Any]) -> list[Row]:
    """Add ``rank`` and ``tie`` to ``rows`` (sorted best first, ties by name): equal figures share a rank.

    Standard competition ranking: 1, 1, 3. A row whose figure is None (no price, nothing matched)
    has rank None. Returns ``rows``."""
    counts: dict[Any, int] = {}
    for r in rows:
        f = figure(r)
        if f is not None:
            counts[f] = counts.get(f, 0) + 1
    held: Any = None
    place = 0
    for i, r in enumerate(rows, 1):
        f = figure(r)
        if f is None:
            r["rank"], r["tie"] = None, False
            continue
        if place == 0 or f != held:
            place, held = i, f
        r["rank"], r["tie"] = place, counts[f] > 1
    return rows
