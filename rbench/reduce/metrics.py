"""What the reduce reports per step and per second: the latencies, their percentiles, the counted columns
and the Arrow schemas of steps.parquet and timeline.parquet (definitions in rbench.reduce.stats' docstring)."""
from __future__ import annotations

import pyarrow as pa

from rbench.samples.schema import ACK, NACK, OUTCOMES

PERCENTILES: tuple[float, ...] = (0.5, 0.75, 0.95, 0.99, 0.999)
PCT_NAMES: tuple[str, ...] = ("p50", "p75", "p95", "p99", "p999")
LATENCIES: dict[str, str] = {
    "e2e": "end-to-end latency from intended send time: t_received - t_intended",
    "e2e_sent": "end-to-end latency from actual send time: t_received - t_sent",
    "confirm": "publisher-confirm latency: t_confirmed - t_sent (outcomes with a confirm)",
    "send_lag": "send lateness of the generator: t_sent - t_intended (how much of the end-to-end latency is the "
                "load generator's own; 0 for unlimited rate, where t_intended = t_sent)",
}
PERCENTILE_METHOD = ("exact over every measured message: linear interpolation between the two closest ranks "
                     "(numpy 'linear', Spark percentile(), DuckDB quantile_cont), selected with numpy.partition in one "
                     "Spark task per cluster (rbench.reduce.step_latencies); rank error 0")
# steps columns, one per OUTCOMES entry, in its order: the outcome's name, ack and nack as participles
OUTCOME_COLS: tuple[str, ...] = tuple({OUTCOMES[ACK]: "acked", OUTCOMES[NACK]: "nacked"}.get(o, o) for o in OUTCOMES)
METRICS = tuple(LATENCIES)                     # e2e, e2e_sent, confirm, send_lag: index into ranks[(gid, index)]
TL_PCTS: tuple[float, ...] = (0.5, 0.99)       # the timeline's per-second percentiles

COUNTS = ["published_in_window", "confirmed_in_window", "consumed_in_window", "published", *OUTCOME_COLS,
          "deliveries", "redelivered", "reordered", "consumed_unique", "duplicated", "lost", "expected"]
# The per-step and per-second tables are small (one row per step or second): they are built as
# Arrow tables on the driver, not as DataFrames, so no Spark job runs after the sample scans.
STEPS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("cluster", pa.string()), ("step", pa.int32()),
    ("target_rate", pa.float64()), ("window_s", pa.float64()),
    ("warmup_s", pa.float64()), ("start_ns", pa.int64()), ("end_ns", pa.int64()),
    ("meas_start_ns", pa.int64()), ("meas_end_ns", pa.int64()),
    *[(c, pa.int64()) for c in COUNTS],
    *[(f"{m}_{n}_ms", pa.float64()) for m in METRICS for n in [*PCT_NAMES, "max"]],
    ("publish_rate", pa.float64()), ("confirm_rate", pa.float64()),
    ("consume_rate", pa.float64()),
])
TIMELINE_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("cluster", pa.string()), ("second", pa.int64()),
    ("published", pa.int64()), ("consumed", pa.int64()),
    ("e2e_p50_ms", pa.float64()), ("e2e_p99_ms", pa.float64()),
    ("e2e_max_ms", pa.float64()),
])
