"""The history: one Parquet file per (night, run) of a reduce's per-step table and leaderboard.

Layout (hive-style partitions, readable by Spark, DuckDB or pyarrow.dataset):

    HISTORY/steps/workload=<name>/date=<YYYY-MM-DD>/<run_id>.parquet
    HISTORY/leaderboard/workload=<name>/date=<YYYY-MM-DD>/<run_id>.parquet

A file holds the reduce's rows for that run (steps.parquet's columns, unchanged) plus the
run's metadata as columns, so a night can be explained without its run directory. The
partition values are in the path only (not in the files), as hive readers expect. Adding the
same run for the same night again replaces its file: a re-run of ``history add`` never
counts a night twice. Nothing is recomputed: the figures are the reduce's. A rate search is
filed as one night whose rows carry the search's answer (``add_search``).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rbench.errors import ConfigError, SinkError
from rbench.samples.record import RunRecord, read_run_record

META_COLUMNS = ("run_id", "night", "started_at", "added_at", "workload_hash", "rbench_version", "broker_version",
                "commit", "driver", "run_status", "nodes", "instance_type", "volume_type", "volume_gb", "tasks", "regress")
BOARDS = ("top_throughput", "highest_matched", "cost_at_top", "cost_at_target")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Added:
    run_id: str
    workload: str
    night: str
    steps: int
    path: Path
    replaced: bool


def history_dir(value: str | None) -> Path:
    """--history DIR, else $RBENCH_HISTORY; one clear line when neither is given."""
    value = value or os.environ.get("RBENCH_HISTORY")
    if not value:
        raise ConfigError("--history: expected a history directory (or set RBENCH_HISTORY)")
    return Path(value)


def parse_night(value: str) -> str:
    if not _DATE.match(value):
        raise ConfigError(f"--night: expected a date YYYY-MM-DD, got {value!r}")
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"--night: expected a real date YYYY-MM-DD, got {value!r}") from None
    return value


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no {what}") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable {what} ({exc})") from None


def _read_run(run_dir: Path) -> RunRecord:
    """The run's record; a missing or unreadable run.json is a ConfigError here (a bad argument to `history add`)."""
    if not (run_dir / "run.json").is_file():
        raise ConfigError(f"{run_dir / 'run.json'}: no run.json (is it a run directory?)")
    try:
        return read_run_record(run_dir / "run.json")
    except SinkError as exc:
        raise ConfigError(str(exc)) from None


def run_metadata(run: RunRecord, commit: str | None, broker_version: str | None) -> dict[str, dict[str, Any]]:
    """Per cluster: the metadata columns a history row carries."""
    regress = run.workload.get("regress")
    out = {}
    for c in run.clusters:
        out[c.name] = {
            "started_at": run.started_at, "workload_hash": run.workload_hash,
            "rbench_version": None if run.host is None else run.host.rbench,
            "broker_version": run.broker_version(c) or broker_version,     # what the run read from the broker wins
            "commit": commit, "driver": run.driver, "run_status": run.status,
            "nodes": c.nodes, "instance_type": c.instance_type, "volume_type": c.volume_type,
            "volume_gb": None if c.volume_gb is None else float(c.volume_gb), "tasks": c.tasks,
            "regress": None if regress is None else json.dumps(regress, sort_keys=True),
        }
    return out


def _with_meta(table: pa.Table, run_id: str, night: str, meta: dict[str, dict[str, Any]], added_at: str) -> pa.Table:
    rows = table.to_pylist()
    for r in rows:
        m = meta.get(r.get("cluster", ""), next(iter(meta.values()), {}))
        r.update({"run_id": run_id, "night": dt.date.fromisoformat(night), "added_at": added_at, **m})
    fields = list(table.schema) + [f for f in _META_SCHEMA if f.name not in table.schema.names]
    return pa.Table.from_pylist(rows, pa.schema(fields))


_META_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("night", pa.date32()), ("started_at", pa.string()), ("added_at", pa.string()),
    ("workload_hash", pa.string()), ("rbench_version", pa.string()), ("broker_version", pa.string()),
    ("commit", pa.string()), ("driver", pa.string()), ("run_status", pa.string()), ("nodes", pa.int64()),
    ("instance_type", pa.string()), ("volume_type", pa.string()), ("volume_gb", pa.float64()), ("tasks", pa.int64()),
    ("regress", pa.string()),
])


def _board_table(board: dict[str, Any], run_id: str, single_run: bool) -> pa.Table | None:
    rows = []
    for name in BOARDS:
        for r in board.get(name) or []:
            if r.get("run_id", run_id if single_run else None) == run_id:
                rows.append({"board": name, **{k: v for k, v in r.items() if k != "run_id"}})
    if not rows:
        return None
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    return pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])


def _write(table: pa.Table, path: Path) -> bool:
    replaced = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        raise SinkError(f"{path}: cannot write the history ({exc.strerror})") from None
    return replaced


def add_run(history: Path, run_dir: str | Path, report_dir: str | Path | None = None, night: str | None = None,
            commit: str | None = None, broker_version: str | None = None, force: bool = False) -> Added:
    """Append one run's reduce output (steps and leaderboard) to the history; see the module docstring."""
    run_dir = Path(run_dir)
    if night is not None:
        night = parse_night(night)
    if (run_dir / "search.json").exists():
        return add_search(history, run_dir, report_dir, night, commit, broker_version, force)
    run = _read_run(run_dir)
    run_id, workload = run.run_id or run_dir.name, run.workload_name or "unnamed"
    if run.status != "complete" and not force:
        raise ConfigError(f"{run_dir}: run status is {run.status!r}, not 'complete': a partial night would read "
                          f"as a regression (--force adds it anyway)")
    report = Path(report_dir) if report_dir is not None else run_dir / "report"
    steps, board = _read_reduce(report, run_dir)
    runs_in_reduce = set(steps.column("run_id").to_pylist()) if "run_id" in steps.schema.names else {run_id}
    if run_id not in runs_in_reduce:
        raise ConfigError(f"{report}: this reduce has no rows of run {run_id} (it has {', '.join(sorted(runs_in_reduce))})")
    if "run_id" in steps.schema.names:
        steps = steps.filter(pc.equal(steps.column("run_id"), run_id)).drop_columns(["run_id"])
    night = parse_night(night or _night_of(run, run_dir))
    meta = run_metadata(run, commit, broker_version)
    added_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    part = f"workload={workload}/date={night}/{run_id}.parquet"
    replaced = _write(_with_meta(steps, run_id, night, meta, added_at), history / "steps" / part)
    lb = _board_table(board, run_id, len(runs_in_reduce) == 1)
    if lb is not None:
        _write(_with_meta(lb, run_id, night, meta, added_at), history / "leaderboard" / part)
    return Added(run_id, workload, night, steps.num_rows, history / "steps" / part, replaced)


def _read_reduce(report: Path, run_dir: Path) -> tuple[pa.Table, dict[str, Any]]:
    """The reduce's steps.parquet and leaderboard.json board in ``report``, or a ConfigError saying what to run."""
    steps_path = report / "steps.parquet"
    if not steps_path.exists():
        raise ConfigError(f"{steps_path}: no reduce output; run `rbench reduce {run_dir}` first (or give --report DIR)")
    try:
        steps = pq.read_table(steps_path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise ConfigError(f"{steps_path}: unreadable Parquet ({exc})") from None
    return steps, _read_json(report / "leaderboard.json", "leaderboard.json").get("leaderboard") or {}


def _night_of(run: RunRecord, run_dir: Path) -> str:
    """The UTC date the run started: the night it is filed under unless --night says otherwise."""
    started = run.started_at or ""
    try:
        return dt.datetime.fromisoformat(started).astimezone(dt.timezone.utc).date().isoformat()
    except ValueError:
        raise ConfigError(f"{run_dir}/run.json: started_at {started!r} is not a timestamp; give --night YYYY-MM-DD") from None


# what a rate search adds to its row: the search's answer, and how it got there
_SEARCH_SCHEMA = pa.schema([
    ("highest_met_rate", pa.float64()), ("first_failed_rate", pa.float64()), ("search_ended_by", pa.string()),
    ("search_probes", pa.int64()), ("probe_run_id", pa.string()),
])


def add_search(history: Path, folder: Path, report_dir: str | Path | None = None, night: str | None = None,
               commit: str | None = None, broker_version: str | None = None, force: bool = False) -> Added:
    """File a rate search (OUT/<run_id>-search: search.json, its probes, report/) as one night of its workload.

    The night's answer is the search's: per cluster one row, ``highest_met_rate`` the highest rate
    (msg/s in all) that met the SLO, 0 when no probe did, so that a night that found no capacity reads
    as the drop it is; the row's other figures are those of the probe at that rate (the first probe
    when none met it), so `rbench regress` judges capacity and latency at capacity. The probes' rates
    change from night to night (bisection), so filing every probe would make no series. The run id is
    the folder's name; ``workload_hash`` the searching workload's (search.json), not a probe's."""
    doc = _read_json(folder / "search.json", "search.json")
    run_id, workload = folder.name, str(doc.get("workload_name") or "unnamed")
    status = str(doc.get("status") or "complete")
    if status != "complete" and not force:
        raise ConfigError(f"{folder}: rate search status is {status!r}, not 'complete': a partial night would read "
                          f"as a regression (--force adds it anyway)")
    steps, board = _read_reduce(Path(report_dir) if report_dir is not None else folder / "report", folder)
    if "run_id" not in steps.schema.names:
        raise ConfigError(f"{folder}: its reduce has no run_id column: reduce the probes together (rbench run does)")
    by_probe = {(r["run_id"], r["cluster"]): r for r in steps.to_pylist()}
    clusters = [c for c in doc.get("clusters") or [] if c.get("probes")]
    if not clusters:
        raise ConfigError(f"{folder}/search.json: no probe ran")
    first = _read_run(folder / clusters[0]["probes"][0]["run_id"])
    started = first.started_at
    night = parse_night(night or _night_of(first, folder))
    rows, meta = [], {}
    for c in clusters:
        probes = c["probes"]
        best = next((p for p in probes if p.get("passed") and p.get("target") == c.get("highest_pass")), probes[0])
        row = by_probe.get((best["run_id"], c["cluster"]))
        if row is None:
            raise ConfigError(f"{folder}: the reduce has no row of probe {best['run_id']} (cluster {c['cluster']}); "
                              f"reduce the search's probes again")
        probe = _read_run(folder / best["run_id"])
        meta.update({name: {**m, "started_at": started, "workload_hash": doc.get("workload_hash"), "run_status": status}
                     for name, m in run_metadata(probe, commit, broker_version).items()})
        row.pop("run_id")
        row.update({"highest_met_rate": float(c.get("highest_pass") or 0.0), "first_failed_rate": c.get("first_fail"),
                    "search_ended_by": c.get("ended_by"), "search_probes": len(probes), "probe_run_id": best["run_id"]})
        rows.append(row)
    schema = pa.schema([f for f in steps.schema if f.name != "run_id"] + list(_SEARCH_SCHEMA))
    added_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    part = f"workload={workload}/date={night}/{run_id}.parquet"
    replaced = _write(_with_meta(pa.Table.from_pylist(rows, schema), run_id, night, meta, added_at), history / "steps" / part)
    verdicts = [{"board": "verdict", **{k: x for k, x in v.items() if x is None or isinstance(x, (str, int, float))}}
                for v in board.get("verdicts") or []]
    if verdicts:
        keys: list[str] = []
        for r in verdicts:
            keys += [k for k in r if k not in keys]
        table = pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in verdicts])
        _write(_with_meta(table, run_id, night, meta, added_at), history / "leaderboard" / part)
    return Added(run_id, workload, night, len(rows), history / "steps" / part, replaced)


def _read_kind(history: Path, kind: str, workload: str | None) -> pa.Table:
    root = history / kind
    if not root.is_dir():
        raise ConfigError(f"{history}: not a history (no {kind}/ folder); add runs with `rbench history add`")
    pattern = f"workload={workload}/date=*/*.parquet" if workload else "workload=*/date=*/*.parquet"
    tables = []
    for f in sorted(root.glob(pattern)):
        try:
            t = pq.read_table(f)
        except (OSError, pa.ArrowInvalid) as exc:
            raise ConfigError(f"{f}: unreadable Parquet ({exc})") from None
        w = f.parent.parent.name.split("=", 1)[1]
        t = t.append_column("workload", pa.array([w] * t.num_rows, pa.string()))
        tables.append(t)
    if not tables:
        which = f"workload {workload!r}" if workload else "any workload"
        raise ConfigError(f"{history}: no {kind} of {which} in the history")
    return pa.concat_tables(tables, promote_options="permissive")


def read_steps(history: str | Path, workload: str | None = None) -> pa.Table:
    """Every per-step row of the history (optionally one workload), metadata columns included."""
    return _read_kind(Path(history), "steps", workload)


def workloads(history: str | Path) -> list[str]:
    return sorted(p.name.split("=", 1)[1] for p in (Path(history) / "steps").glob("workload=*") if p.is_dir())


def pick_workload(history: Path, workload: str | None) -> str:
    """The workload to look at: the one given, or the only one in the history."""
    names = workloads(history)
    if workload is not None:
        if workload not in names:
            raise ConfigError(f"--workload: {workload!r} is not in {history} (it has: {', '.join(names) or 'nothing'})")
        return workload
    if not names:
        raise ConfigError(f"{history}: the history is empty; add runs with `rbench history add RUN_DIR --history {history}`")
    if len(names) > 1:
        raise ConfigError(f"--workload: the history holds several workloads ({', '.join(names)}); name one")
    return names[0]
