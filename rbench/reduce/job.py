"""`rbench reduce`: from run directories to steps.parquet, leaderboard.md and report.html.

Orchestration only: the figures come from stats (Spark scans of the samples, ending in
small Arrow tables on the driver) and leaderboard (plain Python over the step rows),
prices from costs; rbench.report renders them and needs no Spark.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from rbench.errors import ConfigError, SinkError
from rbench.reduce import broker as brokermod
from rbench.reduce import churn as churnmod
from rbench.reduce import connections as connmod
from rbench.reduce import costs as costmod
from rbench.reduce import leaderboard as lb
from rbench.reduce import rereads, unroutable
from rbench.reduce.load import RunMeta, check_same_workload, load_samples, read_run
from rbench.reduce.metrics import LATENCIES, PERCENTILE_METHOD
from rbench.reduce.stats import reduce_samples
from rbench.samples.connections import CONNECT_METHOD
from rbench.samples.conventions import STALE_MEANING, STEP_NUMBERING, shown_step, stale_note
from rbench.samples.generator import judge

RATE_METHOD = ("achieved rate = rows whose t_sent (publish) / t_confirmed with outcome ack (confirm) / t_received (consume, "
               "stale deliveries excluded) falls inside the step's measurement window (its start less the warm-up and the "
               "producers' start delays; with a message count, its end at the first producer's last send), any step tag, "
               "÷ window length in s")
MEASURED_SET = ("latencies and counts are over the step's measured messages: rows tagged with the step whose t_intended "
                "is inside the measurement window")
# clusters.csv and leaderboard.json "clusters": one row per (run, cluster) with what the reduce used and skipped
CLUSTERS_SCHEMA = pa.schema([("run_id", pa.string()), ("cluster", pa.string()), ("t0_ns", pa.int64()), ("stale", pa.int64()),
                             *[(name, pa.int64()) for name in rereads.WHOLE_RUN], *brokermod.CLUSTER_COLUMNS,
                             *connmod.COLUMN_TYPES])


@dataclass
class ReduceResult:
    """What a reduce produced; ``report`` is the HTML path."""

    out_dir: Path
    report: Path
    steps: list[dict[str, Any]]
    leaderboard: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    clusters: list[dict[str, Any]] = field(default_factory=list)   # per (run, cluster): t0_ns, stale, unroutable_…
    phases: list[dict[str, Any]] = field(default_factory=list)     # consumer.pause runs: per phase (reduce/phases.py)
    broker: list[dict[str, Any]] = field(default_factory=list)     # broker samples on the client's time axis
    faults: list[dict[str, Any]] = field(default_factory=list)     # per fault of run.json (reduce/faults.py)

    def __str__(self) -> str:
        return str(self.report)


def reduce_runs(run_dirs: list[str | Path], session: Any = None, out: str | Path | None = None, tolerance: float = 0.02,
                latency_limit_s: float = 1.0, target_rate: float | None = None, force: bool = False,
                costs_path: str | Path | None = None, master: str | None = None, render: bool = True,
                search: dict[str, Any] | None = None, mark: Callable[[str], None] | None = None,
                figures: Callable[[ReduceResult], None] | None = None) -> ReduceResult:
    """Reduce one or more runs into one report; see docs/reduce.md for every definition.

    ``search``: the search.json of a rate search whose probes these runs are; it is kept in
    leaderboard.json (``search``) and gives each cluster's verdict and the report's probe plot.
    ``mark``: told the end of each part of the reduce (`rbench run --timings` prints them).
    ``figures``: given the result as soon as the tables are written, before the report's plots are drawn (seconds),
    so `rbench run` prints its summary then; ``report`` is the path the HTML is written to next."""
    mark = mark or _no_mark
    if not run_dirs:
        raise ConfigError("reduce: give at least one run directory")
    if len(run_dirs) > 1 and out is None:
        raise ConfigError("reduce: several run directories need --out DIR for the combined report")
    if not 0 <= tolerance < 1:
        raise ConfigError(f"--tolerance: expected a fraction in [0, 1), got {tolerance}")
    if latency_limit_s <= 0:
        raise ConfigError(f"--latency-limit: expected a duration > 0, got {latency_limit_s}")
    prices = costmod.load_prices(costs_path)
    runs = [read_run(d) for d in run_dirs]
    check_same_workload(runs, force)   # bad input fails before a JVM starts
    faulted = [r for r in runs if _check_faults(r)]
    out_dir = Path(out) if out is not None else Path(run_dirs[0]) / "report"
    if session is None:          # started only when a pass needs Spark: small samples reduce on the driver
        from functools import partial

        from rbench.spark import local_session
        session = partial(local_session, master, app_name="rbench-reduce")
    samples = load_samples(session, list(run_dirs), force=force)
    mark("samples listed, footers checked")
    cluster_entries = [c.to_json() for r in samples.runs for c in r.clusters]    # costs also price workload clusters
    costs, cost_notes = costmod.cluster_costs(cluster_entries, prices)
    notes = list(samples.notes) + cost_notes
    try:
        steps_tbl, tl_tbl, clusters, fault_counts = reduce_samples(samples, mark)
    except Exception as exc:   # Spark (pyarrow on the driver) wraps file problems (vanished or unreadable part)
        if exc.__class__.__module__.startswith(("pyspark", "py4j", "pyarrow")):
            first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
            raise SinkError(f"reading samples failed: {first[:300]}") from None
        raise
    latency_limit_ms = latency_limit_s * 1000.0
    steps = steps_tbl.to_pylist()
    for s in steps:
        s["matched"] = lb.is_matched(s, tolerance, latency_limit_ms)
    steps_tbl = steps_tbl.append_column("matched", pa.array([s["matched"] for s in steps], pa.bool_()))
    steps_tbl = _self_check(steps_tbl, steps, samples.runs)
    steps_tbl = _with_broker(steps_tbl, samples.runs)
    series = brokermod.load_series(samples.runs)
    steps_tbl = brokermod.add_step_figures(steps_tbl, series)
    clusters = brokermod.add_cluster_figures(clusters, series)
    steps_tbl = connmod.add_figures(steps_tbl, clusters, samples.runs, series)
    steps_tbl = churnmod.add_figures(steps_tbl, samples.runs)
    steps = steps_tbl.to_pylist()
    broker_tbl = brokermod.series_table(series)
    phases = _phases(samples, series)
    tl = tl_tbl.to_pylist()
    fault_rows: list[dict[str, Any]] = []
    if faulted:
        from rbench.reduce.faults import fault_figures
        fault_rows, fault_notes = fault_figures(samples.runs, steps, tl, fault_counts)
        notes += fault_notes
    board = lb.board(steps, costs, prices, tolerance, latency_limit_ms, target_rate, search)
    notes += _step_notes(steps)
    notes += [stale_note(c["run_id"], c["cluster"], c["stale"]) for c in clusters if c["stale"]]
    notes += unroutable.notes(clusters, steps)
    notes += rereads.notes(clusters, steps)
    meta = _meta(samples.runs, board)
    notes += [f"{r}: cluster {c}: no broker samples (broker/ missing or empty)" for r, c in _unsampled(samples.runs, series)]
    meta["broker_method"] = BROKER_METHOD
    meta["unroutable_method"] = unroutable.METHOD
    meta["delivered_again_method"] = rereads.METHOD
    meta["connect_method"] = CONNECT_METHOD + "; " + connmod.MEM_METHOD
    if any(s.get("churn_target_per_s") is not None for s in steps):
        meta["churn_method"] = churnmod.METHOD
    mark("broker figures, verdicts and leaderboards")
    out_dir = _write_outputs(out_dir, steps_tbl, tl_tbl, board, notes, meta, clusters, search)
    broker = broker_tbl.to_pylist()
    _write_broker_outputs(out_dir, broker_tbl, phases)
    faults_doc = None
    if faulted:
        from rbench.reduce.faults import write_faults
        faults_doc = write_faults(out_dir, fault_rows)
    report = out_dir / "report.html"
    mark("tables written")
    if figures is not None:
        figures(ReduceResult(out_dir, report, steps, board, notes, clusters, phases, broker, fault_rows))
    if render:
        from rbench.report.render import render_report
        report = render_report(out_dir, steps, tl, board, notes, meta, broker=broker, phases=phases, faults=faults_doc,
                               search=search)
        mark("report rendered (plots, HTML)")
    return ReduceResult(out_dir, report, steps, board, notes, clusters, phases, broker, fault_rows)


def warm_up_summary() -> None:
    """Import, on a daemon thread, what the reduce on the driver and the summary first use: pyarrow (and the
    pandas it loads on its first array from numpy) and the driver passes, ~0.7 s of CPU here. `rbench run`
    calls it while the JVM starts (the coordinator's thread only waits then), so those first imports are
    neither between the last message and the summary nor on the way to the first send (docs/reduce.md)."""
    def imports() -> None:
        import numpy as np
        import pyarrow as pa

        import rbench.reduce.small  # noqa: F401
        pa.array(np.zeros(1, dtype=np.int64))

    _once("rbench-reduce-imports", imports)


def warm_up_report() -> None:
    """Import, on a daemon thread, the report's plotting (matplotlib, ~0.8 s of CPU here). `rbench run`
    calls it once the load has started: before, it would hold the GIL the coordinator's start gate needs."""
    def imports() -> None:
        import rbench.report.render  # noqa: F401

    _once("rbench-report-imports", imports)


_WARMED: set[str] = set()


def _once(name: str, imports: Callable[[], None]) -> None:
    """``imports`` on a daemon thread called ``name``, once per process."""
    import threading

    if name not in _WARMED:
        _WARMED.add(name)
        threading.Thread(target=imports, name=name, daemon=True).start()


def _no_mark(what: str) -> None:
    """The default ``mark``: nobody asked where the seconds went."""


def _check_faults(run: RunMeta) -> bool:
    """Whether run.json lists faults (read_run parsed them, with the reconnects: a malformed entry was one
    error line before a JVM starts)."""
    return bool(run.record.faults)


BROKER_METHOD = ("broker samples (broker/ Parquet, docs/broker.md) on the client's time axis (s since the cluster's t0): "
                 "depth = ready (+ unacked where the source has it) summed over the workload's queues, from AMQP passive "
                 "declares, else the management API, else Prometheus; memory = management mem_used, else Prometheus "
                 "resident memory, else the beam RSS; CPU = the beam process's CPU seconds from /proc, else the Erlang "
                 "runtime from Prometheus. Per step: broker CPU seconds over the measurement window (counter rise over "
                 "the samples inside, scaled to the window) ÷ messages delivered in it, the largest memory sample, and "
                 "messages dropped as unroutable (" + unroutable.STEP_METHOD + ")")


def _phases(samples: Any, series: list[brokermod.BrokerSeries]) -> list[dict[str, Any]]:
    if not any(c.pause is not None and c.pause.phases for r in samples.runs for c in r.clusters):
        return []
    from rbench.reduce.phases import phase_figures
    return phase_figures(samples, series)


def _unsampled(runs: list[RunMeta], series: list[brokermod.BrokerSeries]) -> list[tuple[str, str]]:
    have = {(s.run_id, s.cluster) for s in series}
    return [(r.run_id, c.name) for r in runs for c in r.clusters if c.t0_ns is not None and (r.run_id, c.name) not in have]


def _write_broker_outputs(out_dir: Path, broker: pa.Table, phases: list[dict[str, Any]]) -> None:
    from rbench.reduce.phases import PHASE_COLUMNS

    try:
        if broker.num_rows:
            pq.write_table(broker, out_dir / "broker_timeline.parquet")
            pacsv.write_csv(broker, out_dir / "broker_timeline.csv")
        if phases:
            pacsv.write_csv(pa.Table.from_pylist([{k: p.get(k) for k in PHASE_COLUMNS} for p in phases]),
                            out_dir / "phases.csv")
            board_path = out_dir / "leaderboard.json"
            doc = json.loads(board_path.read_text())
            doc["phases"] = phases
            board_path.write_text(json.dumps(doc, indent=2, default=str))
    except OSError as exc:
        raise SinkError(f"{out_dir}: cannot write the broker figures ({exc.strerror})") from None


SELF_CHECK_COLUMNS = (("gen_cpu_max", pa.float64()), ("gen_loop_lag_p99_ms", pa.float64()),
                      ("gen_window_full_min", pa.float64()), ("generator_bound", pa.bool_()), ("generator_note", pa.string()))


def _self_check(table: pa.Table, steps: list[dict[str, Any]], runs: list[RunMeta]) -> pa.Table:
    """Each step's generator self-check (what the tasks measured, in run.json) and its verdict.

    The verdict (rbench.samples.generator.judge) needs the step's exact send lag, which only the
    reduce has; runs written before the self-check existed get nulls, not a false "fine"."""
    figures: dict[tuple[str, str, int], list[Mapping[str, float]]] = {}
    for run in runs:
        for c in run.clusters:
            for result in c.task_results:
                for step, f in result.self_check.items():
                    figures.setdefault((run.run_id, c.name, step), []).append(f)
    for s in steps:
        tasks = figures.get((s["run_id"], s["cluster"], int(s["step"])))
        if not tasks:
            s.update({name: None for name, _ in SELF_CHECK_COLUMNS})
            continue
        note = judge(tasks, s.get("send_lag_p99_ms"))
        s.update({"gen_cpu_max": max(t.get("cpu", 0.0) for t in tasks),
                  "gen_loop_lag_p99_ms": max(t.get("loop_lag_p99_ms", 0.0) for t in tasks),
                  "gen_window_full_min": min(t.get("window_full", 0.0) for t in tasks),
                  "generator_bound": note is not None, "generator_note": note})
    for name, kind in SELF_CHECK_COLUMNS:
        table = table.append_column(name, pa.array([s[name] for s in steps], kind))
    return table


def _with_broker(table: pa.Table, runs: list[RunMeta]) -> pa.Table:
    """Each step's broker ("RabbitMQ 4.0.5", run.json clusters[].broker; null for a run that did not record it), so
    steps from runs on different brokers say so side by side."""
    brokers = {(r.run_id, c.name): c.broker.short() for r in runs for c in r.clusters if c.broker is not None}
    keys = zip(table.column("run_id").to_pylist(), table.column("cluster").to_pylist())
    return table.append_column("broker", pa.array([brokers.get(k) for k in keys], pa.string()))


def _step_notes(steps: list[dict[str, Any]]) -> list[str]:
    notes = []
    for s in steps:
        where = f"{s['run_id']}: cluster {s['cluster']} step {shown_step(s['step'])}"
        if s.get("generator_note"):
            notes.append(f"{where}: {s['generator_note']}")
        if s["published"] == 0 and s["deliveries"] == 0:
            notes.append(f"{where}: no messages in the measurement window (no figures)")
        elif s["deliveries"] == 0:
            notes.append(f"{where}: {s['published']:,} messages published, none consumed (no latency; all counted lost)")
    return notes


def _meta(runs: list[RunMeta], board: dict[str, Any]) -> dict[str, Any]:
    return {
        "runs": [{"run_id": r.run_id, "status": r.status, "workload_name": r.record.workload_name,
                  "workload_hash": r.workload_hash, "warmup_s": r.warmup_s, "driver": r.record.driver,
                  "started_at": r.record.started_at, "ended_at": r.record.ended_at, "clock": r.record.clock,
                  "dir": str(r.run_dir),
                  # the broker read before the run, and the variant's settings asked for (run.json clusters[])
                  "brokers": {c.name: "; ".join(x.line() for x in (c.broker, c.variant) if x is not None)
                              for c in r.record.clusters if c.broker is not None or c.variant is not None},
                  "broker_versions": {c.name: c.broker.short() for c in r.record.clusters if c.broker is not None}}
                 for r in runs],
        "percentile_method": PERCENTILE_METHOD,
        "rate_method": RATE_METHOD,
        "measured_set": MEASURED_SET,
        "latencies": LATENCIES,
        "match_rule": (f"matched: consume_rate >= (1 - {board['tolerance']:g}) × target_rate and e2e p99 <= "
                       f"{board['latency_limit_ms']:g} ms"),
        "timeline_method": "per-second buckets since the cluster's t0; publish by t_sent, consume and latency by t_received; "
                           "per-second p50/p99 exact (two-pass bucketed selection, rbench.reduce.percentiles), max exact",
        "stale_method": STALE_MEANING,
        "step_numbering": STEP_NUMBERING,
    }


def _for_people(steps: pa.Table) -> pa.Table:
    """steps.csv is opened by people next to the report, so its ``step`` counts from 1 like the report;
    steps.parquet keeps the 0-based index of the samples for programs (rbench.samples.conventions)."""
    i = steps.schema.get_field_index("step")
    shown = pa.array([shown_step(s) for s in steps.column("step").to_pylist()], pa.int32())
    return steps.set_column(i, "step", shown)


def _write_outputs(out_dir: Path, steps: pa.Table, tl: pa.Table, board: dict[str, Any], notes: list[str],
                   meta: dict[str, Any], clusters: list[dict[str, Any]], search: dict[str, Any] | None = None) -> Path:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        pq.write_table(steps, out_dir / "steps.parquet")
        pacsv.write_csv(_for_people(steps), out_dir / "steps.csv")
        pq.write_table(tl, out_dir / "timeline.parquet")
        pacsv.write_csv(pa.Table.from_pylist(clusters, CLUSTERS_SCHEMA), out_dir / "clusters.csv")
        doc = {"leaderboard": board, "notes": notes, "meta": meta, "clusters": clusters}
        if search is not None:
            doc["search"] = search
        (out_dir / "leaderboard.json").write_text(json.dumps(doc, indent=2, default=str))
    except OSError as exc:
        raise SinkError(f"{out_dir}: cannot write the report ({exc.strerror})") from None
    return out_dir
