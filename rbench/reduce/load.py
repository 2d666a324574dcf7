"""Find what a run committed and load it as DataFrames (docs/parquet.md).

The reduce must count a retried task once and must not trip over a run that was
killed: so for each (cluster, task) it reads only the attempt run.json counts (the one whose
results the restarted Spark stage returned; else the committed attempt with the highest id),
checks every part file's Parquet footer before Spark sees it (a truncated file becomes one
clear message instead of a JVM stack), and records everything it skipped as a note that ends
up in the report.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from rbench.errors import SinkError
from rbench.samples import layout, schema
from rbench.samples.attempts import restarted_stage_note
from rbench.samples.conventions import shown_step
from rbench.samples.record import ClusterRecord, RunRecord, read_run_record
from rbench.samples.runinfo import STEP_CUT
from rbench.samples.windows import cut_text

# the run's Parquet contract, as the recorder writes it (one definition, rbench.samples.schema)
PUBLISHED_SCHEMA = from_arrow_schema(schema.PUBLISHED_SCHEMA)
CONSUMED_SCHEMA = from_arrow_schema(schema.CONSUMED_SCHEMA)


@dataclass
class RunMeta:
    """run.json of one run (its typed record) plus where it lives."""

    run_dir: Path
    record: RunRecord

    @property
    def run_id(self) -> str:
        return self.record.run_id or self.run_dir.name

    @property
    def status(self) -> str:
        return self.record.status or "unknown"

    @property
    def warmup_s(self) -> float:
        return float(self.record.warmup_s)

    @property
    def workload_hash(self) -> str | None:
        return self.record.workload_hash

    @property
    def clusters(self) -> tuple[ClusterRecord, ...]:
        return self.record.clusters


@dataclass
class Samples:
    """The committed rows of one or more runs, the step windows, and what was skipped.

    The Spark DataFrames over the part files are built on first use: a reduce of small samples runs on
    the driver (rbench.reduce.small) and never needs them, and a cold session's first Parquet read costs
    seconds (docs/timing.md). ``session``: the SparkSession, or a function that starts one when first needed
    (`rbench reduce` of a small run then starts no JVM)."""

    session: SparkSession | Callable[[], SparkSession]
    runs: list[RunMeta]
    notes: list[str] = field(default_factory=list)
    published_files: list[str] = field(default_factory=list)
    consumed_files: list[str] = field(default_factory=list)
    window_rows: list[WindowRow] = field(default_factory=list)   # the step windows (window_rows)
    parts: list[tuple[str, str, str, list[str]]] = field(default_factory=list)   # (kind, run_id, cluster, part files)
    rows: int | None = None          # rows of every part file (their footers); None: not counted
    cluster_rows: dict[tuple[str, str], int] = field(default_factory=dict)   # (run_id, cluster) → rows, both sides

    @cached_property
    def spark(self) -> SparkSession:
        return self.session if isinstance(self.session, SparkSession) else self.session()

    def _branches(self, kind: str, schema_: T.StructType) -> list[tuple[str, str, DataFrame]]:
        return [(r, c, _read(self.spark, f, schema_, r, c)) for k, r, c, f in self.parts if k == kind]

    # per (run_id, cluster): the same rows as ``published`` / ``consumed``, run_id and cluster as literals
    @cached_property
    def pub_branches(self) -> list[tuple[str, str, DataFrame]]:
        return self._branches("published", PUBLISHED_SCHEMA)

    @cached_property
    def con_branches(self) -> list[tuple[str, str, DataFrame]]:
        return self._branches("consumed", CONSUMED_SCHEMA)

    @cached_property
    def published(self) -> DataFrame:
        return _union(self.spark, [b for *_, b in self.pub_branches], PUBLISHED_SCHEMA)

    @cached_property
    def consumed(self) -> DataFrame:
        return _union(self.spark, [b for *_, b in self.con_branches], CONSUMED_SCHEMA)


def read_run(run_dir: str | Path) -> RunMeta:
    """Parse ``run_dir/run.json``; SinkError (one line) when it is missing, not JSON, of an unknown schema
    version or malformed (rbench.samples.record.read_run_record)."""
    path = Path(run_dir)
    if not path.is_dir():
        raise SinkError(f"{path}: no such run directory")
    if not (path / "run.json").is_file():
        raise SinkError(f"{path}: no run.json (not a run directory, or the run never started)")
    return RunMeta(path, read_run_record(path / "run.json"))


def check_same_workload(runs: list[RunMeta], force: bool = False) -> list[str]:
    """Refuse to rank runs of different workloads together (unless forced, then note it).

    A leaderboard compares clusters under the same load; mixing workloads would rank
    the load, not the cluster. Also refuses the same run_id twice (its rows would count twice).
    """
    ids = [r.run_id for r in runs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise SinkError(f"run {dupes[0]} given twice; each run may be reduced once")
    hashes = {r.run_id: r.workload_hash for r in runs}
    if len(set(hashes.values())) > 1:
        desc = ", ".join(f"{k}={v}" for k, v in hashes.items())
        if not force:
            raise SinkError(f"runs have different workloads (workload_hash {desc}); use --force to rank them together anyway")
        return [f"runs of different workloads ranked together (--force): workload_hash {desc}"]
    return []


def committed_parts(run: RunMeta, kind: str) -> tuple[list[str], list[str]]:
    """Part files of the attempt that counts for every (cluster, task) (run.json's, else the last committed), and
    notes on the rest."""
    return layout.committed_parts(run.run_dir, run.run_id, kind, [c.name for c in run.clusters],
                                  run.record.counted_attempts())


def verify_parquet(files: list[str]) -> dict[str, int]:
    """Read each part's footer with pyarrow; a corrupt or truncated one is a SinkError naming it. Returns the
    rows each footer counts (the reduce picks where its passes run by them)."""
    import pyarrow.parquet as pq

    rows: dict[str, int] = {}
    for f in files:
        try:
            rows[f] = pq.read_metadata(f).num_rows
        except Exception as exc:  # pyarrow raises ArrowInvalid/OSError with long text
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SinkError(f"{f}: corrupt Parquet file ({first})") from None
    return rows


def window_notes(runs: list[RunMeta]) -> list[str]:
    """What the reduce says about the step windows of run.json: steps not run, cut, or without a measurement window.

    (No DataFrame of the windows: the reduce builds its expressions from window_rows; creating one cost
    seconds of a cold session for nothing, docs/timing.md.)"""
    notes: list[str] = []
    for run in runs:
        for c in run.clusters:
            for s in c.steps:
                where = f"{run.run_id}: cluster {c.name} step {shown_step(s.step)}"
                measured = s.measured(run.warmup_s)
                if s.window is None or measured is None:
                    why = f" (the load stopped before it: {s.cut_by})" if s.cut_by else " (no window in run.json)"
                    notes.append(f"{where} not run{why}")
                    continue
                start, end = s.window
                if s.status == STEP_CUT:
                    notes.append(f"{where} {cut_text(s.duration_s, (end - start) / 1e9, s.cut_by)}")
                if s.measure_note:
                    notes.append(f"{where}: measurement window {(measured[1] - measured[0]) / 1e9:.2f} s: {s.measure_note}")
                if measured[1] <= measured[0]:
                    notes.append(f"{where}: warm-up {run.warmup_s:g} s and the producers' start leave no measurement "
                                 f"window")
    return notes


class WindowRow(NamedTuple):
    """One step window of run.json, as the reduce's expressions use it (rbench.reduce.plan)."""

    run_id: str
    cluster: str
    step: int
    target_rate: float | None
    start_ns: int               # the step's real start
    end_ns: int                 # the measurement window's end (rbench.samples.windows)
    meas_start_ns: int          # the measurement window's start
    window_s: float             # the measurement window's length
    warmup_s: float
    t0_ns: int                  # the cluster's t0
    step_end_ns: int            # the step's real end (where the load stopped, for the last step)


def window_rows(runs: list[RunMeta]) -> list[WindowRow]:
    """One row per (run, cluster, step) with a window in run.json; the reduce builds its expressions from them."""
    rows: list[WindowRow] = []
    for run in runs:
        for c in run.clusters:
            for s in c.steps:
                measured = s.measured(run.warmup_s)
                if s.window is None or measured is None:
                    continue
                start, end = s.window
                meas, meas_end = measured
                target = s.target_rate
                rows.append(WindowRow(run.run_id, c.name, s.step, None if target is None else float(target),
                                      start, meas_end, meas, (meas_end - meas) / 1e9, run.warmup_s,
                                      c.t0_ns if c.t0_ns is not None else start, end))
    return rows


def load_samples(spark: SparkSession | Callable[[], SparkSession], run_dirs: list[str | Path], force: bool = False
                 ) -> Samples:
    """Everything the reduce needs from some run directories; SinkError when nothing can be read. ``spark``: the
    session, or a function starting one, called only when a pass needs Spark (Samples.spark)."""
    runs = [read_run(d) for d in run_dirs]
    notes = check_same_workload(runs, force)
    for run in runs:
        if run.status != "complete":
            notes.append(f"{run.run_id}: run status is '{run.status}' (not complete): later steps may be partial or empty")
        notes += [f"{run.run_id}: {line}" for c in run.clusters
                  if (line := restarted_stage_note(c.name, c.stage_attempts)) is not None]
    pub_files: list[str] = []
    con_files: list[str] = []
    pub_groups: list[tuple[str, str, list[str]]] = []
    con_groups: list[tuple[str, str, list[str]]] = []
    for run in runs:
        f, n = committed_parts(run, "published")
        pub_files += f
        pub_groups += _by_cluster(run.run_id, f)
        notes += n
        f, n = committed_parts(run, "consumed")
        con_files += f
        con_groups += _by_cluster(run.run_id, f)
        notes += n
    if not pub_files and not con_files:
        raise SinkError(f"{', '.join(str(r.run_dir) for r in runs)}: no committed Parquet samples "
                        f"(published/ and consumed/ are empty or missing)")
    per_file = {**verify_parquet(pub_files), **verify_parquet(con_files)}
    cluster_rows: dict[tuple[str, str], int] = {}
    for run_id, cluster, files in pub_groups + con_groups:
        cluster_rows[(run_id, cluster)] = cluster_rows.get((run_id, cluster), 0) + sum(per_file[f] for f in files)
    if not con_files:
        notes.append("no consumed samples at all: rates to consumers, latency, lost/duplicated/reordered cannot be measured")
    notes += window_notes(runs)
    parts = [("published", *g) for g in pub_groups] + [("consumed", *g) for g in con_groups]
    return Samples(spark, runs, notes, pub_files, con_files, window_rows(runs), parts, sum(per_file.values()), cluster_rows)


def _by_cluster(run_id: str, files: list[str]) -> list[tuple[str, str, list[str]]]:
    """Group part files by cluster: ``<kind>/<cluster>/task-T/attempt-A/part-N.parquet``."""
    groups: dict[str, list[str]] = {}
    for f in files:
        groups.setdefault(Path(f).parents[2].name, []).append(f)
    return [(run_id, c, fs) for c, fs in groups.items()]


def _union(spark: SparkSession, frames: list[DataFrame], schema: T.StructType) -> DataFrame:
    if not frames:
        return spark.createDataFrame([], schema)
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def _read(spark: SparkSession, files: list[str], schema: T.StructType, run_id: str, cluster: str) -> DataFrame:
    """One (run, cluster)'s part files. Every row of an attempt folder belongs to the folder's cluster and
    run, so run_id and cluster are literals from the path and run.json: the two string columns are never
    scanned, and every per-window expression of the reduce folds to the windows of that cluster."""
    # a run has hundreds of part files; above this threshold Spark lists them with a Spark job (seconds)
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", str(max(32, len(files) + 1)))
    df = spark.read.schema(schema).parquet(*files)
    cols = [F.lit(run_id).alias("run_id") if f.name == "run_id" else F.lit(cluster).alias("cluster") if f.name == "cluster"
            else F.col(f.name) for f in schema.fields]
    return df.select(*cols)
