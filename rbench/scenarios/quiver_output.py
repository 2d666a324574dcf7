"""`rbench amqp10`'s outputs: quiver's 2-second status table, and summary.json and samples.parquet at the end."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rbench.scenarios.quiver import QuiverResult


def header() -> str:
    return (f"{'':>8} {'Sender':-^33}  {'Receiver':-^45}\n"
            f"{'Time [s]':>8} {'Count [m]':>10} {'Rate [m/s]':>10} {'CPU [%]':>7} {'RSS [M]':>7}"
            f"  {'Count [m]':>10} {'Rate [m/s]':>10} {'CPU [%]':>7} {'RSS [M]':>7} {'Latency [ms]':>12}")


def _rates(t_start: int, h: list[Any]) -> tuple[int, float, float, float]:
    """(count, rate, CPU %, RSS MiB) over the last status interval of one side."""
    t, n, cpu, rss = h[1][:4]
    p_t, p_n, p_cpu = (h[0][0], h[0][1], h[0][2]) if h[0] is not None else (t_start, 0, 0.0)
    dt = max(1e-9, (t - p_t) / 1e9)
    return n, (n - p_n) / dt, (cpu - p_cpu) / dt * 100, rss / 1024


class StatusTable:
    """quiver's 2-second table: one row per receiver status, with the sender's latest interval beside it.

    A side that has finished shows "-", as before it started, rather than its last 2-second figures:
    a sender that ended between two statuses would otherwise stay on a count it had long passed."""

    def __init__(self, t_start: int) -> None:
        self.t_start = t_start
        self.hist: dict[str, list[Any]] = {"sender": [None, None], "receiver": [None, None]}   # [previous, last]

    def status(self, role: str, data: Any) -> str | None:
        """Take one side's status (time ns, count, CPU s, RSS KiB[, median latency ms]); a row when it is the receiver's."""
        h = self.hist[role]
        h[0], h[1] = h[1], data
        return _row(self.t_start, self.hist["sender"], h) if role == "receiver" else None

    def done(self, role: str) -> None:
        self.hist[role] = [None, None]


def _row(t_start: int, snd: list[Any], rcv: list[Any]) -> str:
    secs = (rcv[1][0] - t_start) / 1e9
    left = f"{'-':>10} {'-':>10} {'-':>7} {'-':>7}"
    if snd[1] is not None:
        n, rate, cpu, rss = _rates(t_start, snd)
        left = f"{n:>10,} {rate:>10,.0f} {cpu:>7.0f} {rss:>7.1f}"
    n, rate, cpu, rss = _rates(t_start, rcv)
    return f"{secs:>8.1f} {left}  {n:>10,} {rate:>10,.0f} {cpu:>7.0f} {rss:>7.1f} {rcv[1][4]:>12.3f}"


def write_outputs(result: QuiverResult, directory: Any) -> tuple[Any, Any]:
    """summary.json (quiver's keys plus rbench's) and samples.parquet; their paths."""
    import json
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    summary = d / "summary.json"
    summary.write_text(json.dumps(result.summary(), indent=2))
    samples = d / "samples.parquet"
    cols = result.columns
    table = pa.table({k: pa.array(cols.get(k, []), type=pa.int64())
                      for k in ("seq", "t_intended", "t_sent", "t_received")})
    pq.write_table(table, samples)
    return summary, samples
