"""Scale by simulation: what the coordinator pays per task, 8 to 64 tasks on one machine (`make bench-scale`).

A run on 1,000 executors cannot be had here; its coordinator can be approached. Each point is a separate
`rbench run` process on ``local[N]`` (N task slots, one Spark task per slot) with N queues, one producer and one
consumer per queue, a few msg/s per producer, one AMQP connection per task (``connections: per_task``) and the
broker sampler off (its cost does not grow with tasks, and it would blur the coordinator's). Measured per point:

* start gate spread: each task's first send (its smallest ``t_sent`` in the Parquet) − the agreed t0; the
  spread is the largest minus the smallest over the tasks, with the largest itself (how late the last one was);
* coordinator CPU per task-second: the `rbench run` Python process's own utime+stime (/proc/PID/stat, not its
  children's) and, apart, its JVM's (which hosts Spark's scheduler and, on a local master, the executors' JVM
  side), sampled every 0.5 s from outside, over the load [t0, the last task's load end], ÷ (N × load seconds);
* coordinator memory: the peak RSS (/proc/PID/statm) of the Python process and of its JVM over the run; the
  workers' (Spark's Python daemon and the task workers it forks) summed RSS, shared pages counted in each;
* control lines per second: what run.json's ``control_traffic`` says the coordinator read over the run (lines,
  bytes) ÷ the load's seconds, and per task; the coordinator's CPU per line is its CPU over the load ÷ (tasks ×
  load seconds) lines, a task sending one progress line a second (rbench.runtime.progress);
* the gate's answer: each task's "t0 agreed" instant (run.json task_results[].instants, the task's clock) − t0;
  the largest over the tasks > 0 means the last task heard t0 after it had passed, so its first send was late;
* run.json's size, the reduce's input files (Parquet parts under published/, consumed/, broker/) and the time
  `rbench reduce RUN_DIR` takes (wall clock of a fresh process: Python start, the passes, the report);
* the counts check: run.json's published_rows/consumed_rows summed over tasks against the rows of the committed
  Parquet parts; a point whose counts differ fails the bench.

Writes bench/out/scale.md (the table, with a line fit of each figure over N) and docs/scale.png.

    .venv/bin/python bench/bench_scale.py --tasks 8,16,32,64 --rate 5 --seconds 30
    .venv/bin/python bench/bench_scale.py --reanalyse          # the table and plots again from bench/out/scale.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proctree import cmdline, tree

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")
URL = os.environ.get("RBENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")


@dataclass(frozen=True)
class Point:
    tasks: int
    run_id: str
    load_s: float
    gate_spread_ms: float
    gate_last_ms: float
    gate_first_ms: float
    coord_cpu_s: float
    jvm_cpu_s: float
    coord_cpu_ms_per_task_s: float
    jvm_cpu_ms_per_task_s: float
    coord_rss_mib: float
    jvm_rss_mib: float
    workers_rss_mib: float
    control_lines: int
    control_bytes: int
    run_json_kib: float
    reduce_files: int
    reduce_s: float
    published: int
    consumed: int
    counts_equal: bool
    wall_s: float
    control_lines_per_s: float = float("nan")     # lines over the run ÷ the load's seconds
    control_lines_per_task_s: float = float("nan")
    gate_answer_late_ms: float = float("nan")   # the latest task's "t0 agreed" instant − t0 (> 0: answered after t0)
    start_span_s: float = float("nan")          # the first task's start to the last one's (Spark launching workers)
    lines_per_task: float = float("nan")
    bytes_per_line: float = float("nan")
    coord_cpu_us_per_line: float = float("nan")  # coordinator CPU over the load ÷ the lines of the load's seconds


def _stat(pid: int) -> tuple[float, float] | None:
    """(CPU seconds of the process itself, RSS MiB); None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20
    except (OSError, IndexError, ValueError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS, rss


class Sampler:
    """The coordinator's and its JVM's CPU and RSS every ``every`` s, and the workers' summed RSS, from outside."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        self.pid, self.every = pid, every
        self.rows: list[tuple[float, float, float, float, float, float]] = []   # t, py cpu, py rss, jvm cpu, rss, workers
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            py = _stat(self.pid)
            if py is None:
                return
            procs = tree(self.pid)
            jvm = [p for p in procs if p != self.pid and "java" in cmdline(p).split(" ", 1)[0]]
            j = _stat(jvm[0]) if jvm else None
            workers = [p for p in procs if p != self.pid and p not in jvm and "python" in cmdline(p).split(" ", 1)[0]]
            wrss = sum((s[1] for s in map(_stat, workers) if s is not None), 0.0)
            self.rows.append((time.time(), py[0], py[1], j[0] if j else float("nan"), j[1] if j else float("nan"), wrss))
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def cpu_between(self, column: int, start: float, end: float) -> float:
        """CPU seconds of column 1 (Python) or 3 (JVM) between two wall-clock instants, interpolated."""
        t = np.array([r[0] for r in self.rows])
        v = np.array([r[column] for r in self.rows])
        keep = ~np.isnan(v)
        return float(np.interp(end, t[keep], v[keep]) - np.interp(start, t[keep], v[keep]))

    def peak(self, column: int) -> float:
        return float(np.nanmax([r[column] for r in self.rows])) if self.rows else float("nan")


def workload(n: int, rate: float, seconds: float, tag: str) -> dict[str, object]:
    return {
        "name": f"scale-{n}", "driver": "amqp091",
        "clusters": [{"name": "local", "uris": [URL]}],
        "tasks": n, "producers": n, "consumers": n, "connections": "per_task",
        "rate": rate, "duration": seconds, "warmup": 5, "drain_timeout": 10,
        "queues": {"pattern": f"rbench-scale-{tag}-%d", "from": 1, "to": n, "durable": False, "auto_delete": True},
        "publisher": {"confirm": True, "confirm_window": 64},
        "consumer": {"prefetch": 50},
        "broker_metrics": {"enabled": False},
    }


def parquet_rows(run_dir: Path, record: object) -> dict[str, int]:
    import pyarrow.parquet as pq

    from rbench.samples.layout import committed_parts
    from rbench.samples.record import RunRecord

    assert isinstance(record, RunRecord)
    out = {}
    for kind in ("published", "consumed"):
        files, _ = committed_parts(run_dir, record.run_id or "", kind, [c.name for c in record.clusters],
                                   record.counted_attempts())
        out[kind] = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    return out


def first_sends(run_dir: Path, record: object) -> dict[int, int]:
    """Each task's first t_sent (ns) in its committed published parts."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from rbench.samples.layout import committed_parts
    from rbench.samples.record import RunRecord

    assert isinstance(record, RunRecord)
    files, _ = committed_parts(run_dir, record.run_id or "", "published", [c.name for c in record.clusters],
                               record.counted_attempts())
    first: dict[int, int] = {}
    for f in files:
        t = pq.read_table(f, columns=["task", "t_sent"])
        for task in pc.unique(t["task"]).to_pylist():
            sel = t.filter(pc.equal(t["task"], task))["t_sent"]
            m = pc.min(sel).as_py()
            if m is not None:
                first[task] = min(first.get(task, m), m)
    return first


def run_point(n: int, args: argparse.Namespace, work: Path) -> Point:
    from rbench.samples.record import read_run_record

    tag = f"{os.getpid()}-{n}"
    wl = work / f"scale-{n}.yaml"
    wl.write_text(json.dumps(workload(n, args.rate, args.seconds, tag)))
    runs = work / f"runs-{n}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    cmd = [sys.executable, "-m", "rbench.cli", "run", str(wl), "--master", f"local[{n}]", "--out", str(runs),
           "--quiet", "--no-reduce", "--stage-attempts", "1"]
    log = (work / f"run-{n}.log").open("w")
    started = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    sampler = Sampler(proc.pid)
    rc = proc.wait()
    wall = time.time() - started
    sampler.stop()
    if rc != 0:
        raise SystemExit(f"bench-scale: {n} tasks: rbench run exited {rc}; see {work / f'run-{n}.log'}")
    run_dir = next(runs.glob("*/run.json")).parent
    record = read_run_record(run_dir)
    (cluster,) = record.clusters
    t0 = cluster.t0_ns
    results = cluster.task_results
    assert t0 is not None and results, f"{run_dir}: no t0 or task results"
    load_end = max(r.load_end_ns or t0 for r in results)
    load_s = (load_end - t0) / 1e9
    firsts = first_sends(run_dir, record)
    late = np.array([(firsts[t] - t0) / 1e6 for t in sorted(firsts)])
    coord = sampler.cpu_between(1, t0 / 1e9, load_end / 1e9)
    jvm = sampler.cpu_between(3, t0 / 1e9, load_end / 1e9)
    traffic = record.control_traffic
    rows = parquet_rows(run_dir, record)
    published = sum(r.published_rows or 0 for r in results)
    consumed = sum(r.consumed_rows or 0 for r in results)
    files = sum(1 for kind in ("published", "consumed", "broker") for _ in (run_dir / kind).rglob("*.parquet"))
    r0 = time.time()
    red = subprocess.run([sys.executable, "-m", "rbench.cli", "reduce", str(run_dir)], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    reduce_s = time.time() - r0
    if red.returncode != 0:
        raise SystemExit(f"bench-scale: {n} tasks: rbench reduce exited {red.returncode}: {red.stderr[-500:]}")
    lines = traffic.lines if traffic else 0
    measured: dict[str, Any] = dict(
        tasks=n, run_id=run_dir.name, load_s=load_s, gate_spread_ms=float(late.max() - late.min()),
        gate_last_ms=float(late.max()), gate_first_ms=float(late.min()), coord_cpu_s=coord, jvm_cpu_s=jvm,
        coord_cpu_ms_per_task_s=coord / (n * load_s) * 1e3, jvm_cpu_ms_per_task_s=jvm / (n * load_s) * 1e3,
        coord_rss_mib=sampler.peak(2), jvm_rss_mib=sampler.peak(4), workers_rss_mib=sampler.peak(5),
        control_lines=lines, control_bytes=traffic.bytes if traffic else 0, run_json_kib=(run_dir / "run.json").stat().st_size / 1024,
        reduce_files=files, reduce_s=reduce_s, published=published, consumed=consumed,
        counts_equal=published == rows["published"] and consumed == rows["consumed"], wall_s=wall)
    return Point(**measured, **_from_record(run_dir, coord))


def _from_record(run_dir: Path, coord_cpu_s: float) -> dict[str, float]:
    """The figures run.json alone gives (also for --reanalyse of runs measured before they were added)."""
    from rbench.samples.record import read_run_record

    record = read_run_record(run_dir)
    (cluster,) = record.clusters
    results, t0 = cluster.task_results, cluster.t0_ns or 0
    n = len(results)
    load_s = (max(r.load_end_ns or t0 for r in results) - t0) / 1e9
    agreed = [r.instants["t0 agreed with the other tasks"] for r in results if "t0 agreed with the other tasks" in r.instants]
    started = [r.instants["task started"] for r in results if "task started" in r.instants]
    traffic = record.control_traffic
    lines = traffic.lines if traffic else 0
    return {"gate_answer_late_ms": (max(agreed) - t0 / 1e9) * 1e3 if agreed else float("nan"),
            "start_span_s": max(started) - min(started) if started else float("nan"),
            "control_lines_per_s": lines / load_s, "control_lines_per_task_s": lines / load_s / n,
            "lines_per_task": lines / n, "bytes_per_line": (traffic.bytes / lines) if traffic and lines else float("nan"),
            "coord_cpu_us_per_line": coord_cpu_s / (n * load_s) * 1e6}


COLUMNS = (("tasks", "tasks", "{:d}"), ("gate_spread_ms", "gate spread ms", "{:,.1f}"),
           ("gate_last_ms", "last first send − t0 ms", "{:,.1f}"),
           ("gate_answer_late_ms", "last gate answer − t0 ms", "{:,.1f}"), ("start_span_s", "task starts span s", "{:,.1f}"),
           ("coord_cpu_ms_per_task_s", "coordinator CPU ms per task-s", "{:,.2f}"),
           ("jvm_cpu_ms_per_task_s", "JVM CPU ms per task-s", "{:,.2f}"), ("coord_rss_mib", "coordinator RSS MiB", "{:,.0f}"),
           ("jvm_rss_mib", "JVM RSS MiB", "{:,.0f}"), ("workers_rss_mib", "workers RSS MiB", "{:,.0f}"),
           ("control_lines_per_s", "control lines per load s", "{:,.1f}"), ("lines_per_task", "lines per task", "{:,.0f}"),
           ("bytes_per_line", "bytes per line", "{:,.0f}"), ("coord_cpu_us_per_line", "coordinator CPU µs per line", "{:,.0f}"),
           ("run_json_kib", "run.json KiB", "{:,.1f}"), ("reduce_files", "reduce input files", "{:,d}"),
           ("reduce_s", "reduce s", "{:,.1f}"), ("published", "published", "{:,d}"), ("counts_equal", "counts = Parquet", "{}"),
           ("wall_s", "run wall s", "{:,.0f}"))
FITS = (("gate_spread_ms", "gate spread", "ms"), ("start_span_s", "task starts span", "s"), ("coord_cpu_s", "coordinator CPU over the load", "s"),
        ("coord_rss_mib", "coordinator RSS", "MiB"), ("jvm_rss_mib", "JVM RSS", "MiB"),
        ("workers_rss_mib", "workers RSS", "MiB"), ("control_lines_per_s", "control lines per load s", "lines/s"),
        ("run_json_kib", "run.json", "KiB"), ("reduce_files", "reduce input files", "files"),
        ("reduce_s", "reduce time", "s"))


def fit(points: list[Point], key: str) -> tuple[float, float]:
    """Least-squares line a + b·tasks of one figure over the points."""
    x = np.array([p.tasks for p in points], float)
    y = np.array([getattr(p, key) for p in points], float)
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b)


def report(points: list[Point], args: argparse.Namespace) -> str:
    points = sorted(points, key=lambda p: p.tasks)
    lines = [f"# bench-scale: {', '.join(str(p.tasks) for p in points)} tasks on local[N], this machine "
             f"({os.cpu_count()} cores)", "",
             f"Each point: a separate `rbench run` on local[N], N queues, 1 producer + 1 consumer each at {args.rate:g} "
             f"msg/s, confirms, one connection per task, {args.seconds:g} s of load (5 s warm-up), broker sampler off; "
             "then `rbench reduce RUN_DIR` in a fresh process. How each figure is measured: bench/bench_scale.py's "
             "docstring (gate spread: each task's first t_sent − t0, largest − smallest; CPU: /proc/PID/stat of the "
             "`rbench run` process and of its JVM over [t0, load end] ÷ (tasks × load s); RSS: peak /proc/PID/statm; "
             "control lines: run.json control_traffic ÷ the load's seconds; gate answer: each task's 't0 agreed' instant − t0, the "
             "largest).", "",
             "| " + " | ".join(h for _, h, _ in COLUMNS) + " |", "|" + "---:|" * len(COLUMNS)]
    for p in points:
        lines.append("| " + " | ".join(f.format(getattr(p, k)) for k, _, f in COLUMNS) + " |")
    if len(points) >= 2:
        lines += ["", "Line fit over the points (a + b × tasks) and what it gives at 1,000 tasks (an extrapolation "
                  f"from {points[0].tasks}-{points[-1].tasks} tasks on 2 shared cores; docs/scale.md reads it):", "",
                  "| figure | a | b per task | at 1,000 tasks |", "|---|---:|---:|---:|"]
        for key, name, unit in FITS:
            a, b = fit(points, key)
            lines.append(f"| {name} ({unit}) | {a:,.2f} | {b:,.4f} | {a + b * 1000:,.1f} |")
    lines += ["", "runs: " + ", ".join(p.run_id for p in points)]
    return "\n".join(lines) + "\n"


def plot(points: list[Point], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = sorted(points, key=lambda p: p.tasks)
    x = [p.tasks for p in points]
    panels = (("gate_spread_ms", "start gate spread (ms)"), ("coord_cpu_ms_per_task_s", "coordinator CPU ms per task-s"),
              ("coord_rss_mib", "coordinator / JVM RSS (MiB)"), ("control_lines_per_s", "control lines per load second"),
              ("run_json_kib", "run.json (KiB)"), ("reduce_s", "reduce (s) / input files"))
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5))
    for ax, (key, title) in zip(axes.flat, panels):
        ax.plot(x, [getattr(p, key) for p in points], "o-", label=key.split("_")[0])
        if key == "coord_rss_mib":
            ax.plot(x, [p.jvm_rss_mib for p in points], "s-", label="JVM")
            ax.legend(fontsize=8)
        if key == "coord_cpu_ms_per_task_s":
            ax.plot(x, [p.jvm_cpu_ms_per_task_s for p in points], "s-", label="JVM")
            ax.legend(fontsize=8)
        if key == "reduce_s":
            twin = ax.twinx()
            twin.plot(x, [p.reduce_files for p in points], "^--", color="grey")
            twin.set_ylabel("files", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [str(v) for v in x])
        ax.set_xlabel("tasks (local[N])", fontsize=8)
    fig.suptitle("rbench coordinator cost by task count (bench/bench_scale.py; one run per point, 2 shared cores)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="8,16,32,64", help="task counts, one run each (default 8,16,32,64)")
    ap.add_argument("--rate", type=float, default=5.0, help="msg/s per producer (one per task)")
    ap.add_argument("--seconds", type=float, default=30.0, help="load per run")
    ap.add_argument("--work", type=Path, default=OUT / "scale", help="runs and logs")
    ap.add_argument("--table", type=Path, default=OUT / "scale.md", help="the table (scale.json beside it)")
    ap.add_argument("--plot", type=Path, default=ROOT / "docs" / "scale.png")
    ap.add_argument("--reanalyse", action="store_true", help="only the table and plot again from scale.json")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))           # this checkout's rbench, whatever the venv has installed
    args.table.parent.mkdir(parents=True, exist_ok=True)
    data = args.table.with_suffix(".json")
    if args.reanalyse:
        saved = json.loads(data.read_text())
        points = [Point(**p) for p in saved["points"]]
        for i, p in enumerate(points):       # what run.json gives, again (older scale.json lack some of it)
            run = next(args.work.glob(f"runs-{p.tasks}/{p.run_id}/run.json"), None)
            if run is not None:
                points[i] = Point(**{**asdict(p), **_from_record(run.parent, p.coord_cpu_s)})
        args.rate, args.seconds = saved["rate"], saved["seconds"]
    else:
        args.work.mkdir(parents=True, exist_ok=True)
        points = []
        for n in sorted(int(v) for v in args.tasks.split(",")):
            p = run_point(n, args, args.work)
            print(f"bench-scale: {n} tasks: gate spread {p.gate_spread_ms:.1f} ms, coordinator CPU "
                  f"{p.coord_cpu_ms_per_task_s:.2f} ms per task-s, counts equal {p.counts_equal}", flush=True)
            points.append(p)
            data.write_text(json.dumps({"rate": args.rate, "seconds": args.seconds,
                                        "points": [asdict(x) for x in points]}, indent=1))
    text = report(points, args)
    args.table.write_text(text)
    plot(points, args.plot)
    print(text)
    bad = [p.tasks for p in points if not p.counts_equal]
    if bad:
        print(f"bench-scale: counts differ from the Parquet's at {bad} tasks", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
