"""Soak: one long run at a moderate rate, and whether anything grows (`make bench-soak`, docs/soak.md).

A capacity run of hours must not be bent by its own tool: a client whose RSS, open files or event-loop lag creep
up would show up as a broker getting slower. This runs `rbench run` for MINUTES (default 30) at a fixed rate with
the broker sampler and the run-wide /metrics on, and samples from outside every 10 s:

* coordinator RSS: the `rbench run` process (Python) and its JVM, apart;
* client RSS and open file descriptors: the executor side, i.e. rbench's Python worker daemon and the task
  worker it forks (local master: children of the JVM running ``rbench.runtime.daemon``);
* Parquet part files under the run directory (the recorder rolls parts; their number grows with time by design).

The workload is one-minute steps at the same rate, so run.json's per-step self-check gives the tasks' event-loop
lag (p99) and CPU per minute, and steps.csv the rates per minute. The table has one row per 5 minutes; the
slope of each series after the warm-up (the first 5 minutes) is a least-squares line, in MiB (or files) per
hour: "flat" means within the noise the table shows, and the doc says what grows, if anything, and why.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proctree import children, cmdline, tree

ROOT = Path(__file__).resolve().parent.parent
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Sample:
    t_s: float
    coordinator_mib: float
    jvm_mib: float
    client_mib: float
    client_fds: int
    parts: int


def _rss_mib(pid: int) -> float:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20
    except (OSError, IndexError, ValueError):
        return 0.0


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def sample(coordinator: int, out_dir: Path, started: float) -> Sample:
    kids = children()
    procs = tree(coordinator, kids)
    jvm = [p for p in procs if p != coordinator and "java" in cmdline(p).split(" ", 1)[0]]
    # the daemon and the workers it forks (the JVM's own command line names the daemon module too: not it)
    client = [p for p in procs if "rbench.runtime.daemon" in cmdline(p) and p not in jvm]
    parts = sum(1 for _ in out_dir.rglob("*.parquet"))
    return Sample(time.monotonic() - started, _rss_mib(coordinator), sum(_rss_mib(p) for p in jvm),
                  sum(_rss_mib(p) for p in client), sum(_fds(p) for p in client), parts)


def workload(minutes: int, rate: float, name: str) -> dict[str, object]:
    return {
        "name": "soak", "driver": "amqp091",
        "clusters": [{"name": "local", "uris": ["amqp://guest:guest@127.0.0.1:5672/"]}],
        "producers": 2, "consumers": 2, "tasks": 1,
        "rate_steps": [{"rate": rate / 2, "duration": 60} for _ in range(minutes)],
        "queues": {"pattern": f"{name}-%d", "from": 1, "to": 2, "durable": False, "auto_delete": True},
        "publisher": {"confirm": True, "confirm_window": 128},
        "consumer": {"prefetch": 200, "multi_ack_every": 50},
        "broker_metrics": {"enabled": True},
    }


def slope_per_hour(t_s: np.ndarray, v: np.ndarray, after_s: float) -> float:
    keep = t_s >= after_s
    if keep.sum() < 3:
        return float("nan")
    return float(np.polyfit(t_s[keep] / 3600.0, v[keep], 1)[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=int, default=30)
    ap.add_argument("--rate", type=float, default=1000.0, help="msg/s, all producers together")
    ap.add_argument("--out", type=Path, default=None, help="where the run, soak.csv, soak.md and soak.png go")
    ap.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--reanalyse", action="store_true", help="only rebuild the table and plot from OUT/soak.csv")
    args = ap.parse_args()
    if args.reanalyse:
        return report(*read_samples(args.out), args.out, args)
    out = args.out or Path(tempfile.mkdtemp(prefix="rbench-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    wl = out / "soak.yaml"
    wl.write_text(json.dumps(workload(args.minutes, args.rate, f"rbench-soak-{os.getpid()}")))
    cmd = [sys.executable, "-m", "rbench.cli", "run", str(wl), "--out", str(out / "runs"), "--quiet", "--metrics-port", "0"]
    log = (out / "run.log").open("w")
    started_epoch = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    started = time.monotonic()
    samples: list[Sample] = []
    while proc.poll() is None:
        samples.append(sample(proc.pid, out / "runs", started))
        time.sleep(args.every)
    if proc.returncode != 0 or not samples:
        print(f"soak: rbench run failed (exit {proc.returncode}); see {out / 'run.log'}", file=sys.stderr)
        return 1
    write_samples(samples, started_epoch, out / "soak.csv")
    return report(samples, started_epoch, out, args)


COLUMNS = ("coordinator RSS MiB", "JVM RSS MiB", "client RSS MiB", "client fds", "Parquet parts")


def write_samples(samples: list[Sample], started_epoch: float, path: Path) -> None:
    with path.open("w") as f:
        f.write(f"# started_epoch={started_epoch:.3f}\n")
        f.write("t_s," + ",".join(COLUMNS) + "\n")
        for x in samples:
            f.write(f"{x.t_s:.1f},{x.coordinator_mib:.2f},{x.jvm_mib:.2f},{x.client_mib:.2f},{x.client_fds},{x.parts}\n")


def read_samples(out: Path) -> tuple[list[Sample], float]:
    """soak.csv back (a run written before the start time was kept: soak.yaml's time, written just before)."""
    lines = (out / "soak.csv").read_text().splitlines()
    started = (out / "soak.yaml").stat().st_mtime
    if lines[0].startswith("# started_epoch="):
        started = float(lines.pop(0).split("=", 1)[1])
    rows = [ln.split(",") for ln in lines[1:]]
    return [Sample(float(r[0]), float(r[1]), float(r[2]), float(r[3]), int(float(r[4])), int(float(r[5])))
            for r in rows], started


def report(samples: list[Sample], started_epoch: float, out: Path, args: argparse.Namespace) -> int:
    """The table over the load (minutes since t0), the slopes from 5 minutes after t0 to the load's end, and the
    peaks of the reduce that follows (it runs in the same JVM and Python workers, on purpose apart)."""
    run_dir = next((out / "runs").glob("*/run.json")).parent
    record = json.loads((run_dir / "run.json").read_text())
    cluster = record["clusters"][0]
    tasks = cluster["task_results"]
    load_start = cluster["t0_ns"] / 1e9 - started_epoch
    load_end = max(s["end_ns"] for s in cluster["steps"] if s.get("end_ns")) / 1e9 - started_epoch
    minutes = round((load_end - load_start) / 60)
    lag = {int(step): max(t["self_check"].get(step, {}).get("loop_lag_p99_ms", 0.0) for t in tasks)
           for step in tasks[0]["self_check"]}
    cpu = {int(step): sum(t["self_check"].get(step, {}).get("cpu", 0.0) for t in tasks) for step in tasks[0]["self_check"]}
    every = samples[1].t_s - samples[0].t_s if len(samples) > 1 else float("nan")
    t_all = np.array([s.t_s for s in samples]) - load_start          # seconds since t0
    load = t_all <= load_end - load_start
    t = t_all[load]
    values = {name: np.array([getattr(s, f) for s in samples], dtype=float)
              for name, f in zip(COLUMNS, ("coordinator_mib", "jvm_mib", "client_mib", "client_fds", "parts"))}
    cols = {name: v[load] for name, v in values.items()}
    warm = 300.0
    lines = [f"soak: {minutes} min of load at {record['workload'].get('rate_steps', [{}])[0].get('rate', 0) * 2:g} "
             f"msg/s (2 producers, 2 consumers, 1 task, confirms), sampled every {every:.0f} s from outside; "
             f"run {run_dir.name}",
             "", "| minute of load | " + " | ".join(cols) + " | task loop lag p99 ms | task CPU |",
             "|---:|" + "---:|" * (len(cols) + 2)]
    for minute in range(0, minutes + 1, max(1, minutes // 6)):
        i = int(np.argmin(np.abs(t - minute * 60)))
        step = min(minute, minutes - 1)
        lines.append(f"| {minute} | " + " | ".join(f"{v[i]:,.0f}" for v in cols.values())
                     + f" | {lag.get(step, float('nan')):.1f} | {cpu.get(step, float('nan')):.0%} |")
    lines += ["", "slope from 5 minutes after t0 to the end of the load (least squares over every sample):", ""]
    for name, v in cols.items():
        lines.append(f"- {name}: {slope_per_hour(t, v, warm):+,.1f} per hour (from {v[t >= warm][0]:,.0f} "
                     f"to {v[-1]:,.0f})" if (t >= warm).any() else f"- {name}: load shorter than the warm-up")
    after = ~load
    if after.any():
        lines += ["", "after the load (the summary's reduce, in the same JVM and Python workers): peak "
                  + ", ".join(f"{name} {v[after].max():,.0f}" for name, v in values.items() if "RSS" in name)]
    text = "\n".join(lines) + "\n"
    (out / "soak.md").write_text(text)
    print(text)
    plot(t, cols, lag, out / "soak.png")
    print(f"soak: table {out / 'soak.md'}, plot {out / 'soak.png'}, samples {out / 'soak.csv'}")
    return 0


def plot(t: np.ndarray, cols: dict[str, np.ndarray], lag: dict[int, float], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for name in ("coordinator RSS MiB", "JVM RSS MiB", "client RSS MiB"):
        a.plot(t / 60, cols[name], label=name)
    a.set_ylabel("MiB")
    a.legend(loc="upper left", fontsize=8)
    b.plot(t / 60, cols["client fds"], label="client fds")
    b.plot([m + 0.5 for m in sorted(lag)], [lag[m] for m in sorted(lag)], "o-", ms=3, label="task loop lag p99 ms")
    b.set_xlabel("minutes since t0 (the load starts at 0)")
    b.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
