"""How fast one rbench task runs, whether its memory stays flat, and how punctual its sends are.

One task (no Spark: the executor code path itself) publishes with confirms at an
unlimited rate to one queue and consumes it, for --seconds, with each driver in its
own subprocess so getrusage CPU is attributable. Every 10 s the task's RSS is read
from /proc. Prints msg/s, client CPU µs per message (publish + consume) and RSS at
start and end, and writes bench/out/runtime.md.

    .venv/bin/python bench/bench_runtime.py --seconds 300 --drivers aiopika,amqp091

Punctuality (``--lateness``, what ``make bench-runtime`` also runs): one task, 10 producers sharing one
queue and one consumer, confirms on (window 64), rate-limited at 2,000 and 20,000 msg/s in all, with
the producers' phases aligned (all on the same instant) and spread (evenly over the interval). Send
lateness = t_sent − t_intended of every message after a 2 s warm-up, read from the task's own Parquet;
CPU = the whole client process (getrusage) over the steady state (warm-up end to the last due time) ÷ the messages sent and received in it. ``--root DIR`` runs another checkout's rbench
(e.g. the commit before a change) in the same table, as the peer to compare with.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(driver: str, seconds: float, url: str) -> None:
    sys.path.insert(0, str(ROOT))
    from rbench.config.load import workload_from_dict
    from rbench.plan import plan
    from rbench.runtime.task import run_task

    queue = f"rbench-bench-runtime-{uuid.uuid4().hex[:8]}"
    w = workload_from_dict({
        "name": "bench-runtime", "driver": driver, "clusters": [{"name": "local", "uris": [url]}],
        "producers": 1, "consumers": 1, "size": 24, "duration": seconds,
        "queues": {"name": queue, "durable": False, "auto_delete": True},
        "publisher": {"confirm": True, "confirm_window": 192},
        "consumer": {"prefetch": 200, "multi_ack_every": 100}, "drain_timeout": 10})
    out = tempfile.mkdtemp(prefix="rbench-bench-")
    (p,) = plan(w, "local", 1, "bench", out)
    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        start = time.monotonic()
        while not stop.wait(10):
            samples.append((time.monotonic() - start, rss_mib()))

    rss_start = rss_mib()
    threading.Thread(target=sample, daemon=True).start()
    t = time.monotonic()
    result = run_task(p)
    elapsed = time.monotonic() - t
    stop.set()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"driver": driver, "published": result["published"], "consumed": result["consumed"],
                      "elapsed": elapsed, "cpu_s": ru.ru_utime + ru.ru_stime, "rss_start": rss_start,
                      "rss_samples": samples, "rss_end": rss_mib(), "maxrss": ru.ru_maxrss / 1024}))


def lateness_child(rate: float, phase: str, seconds: float, url: str, root: str) -> None:
    sys.path.insert(0, root)
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rbench.config.load import workload_from_dict
    from rbench.plan import plan
    from rbench.runtime.task import run_task

    producers = 10
    queue = f"rbench-bench-lateness-{uuid.uuid4().hex[:8]}"
    data = {
        "name": "bench-lateness", "driver": "amqp091", "clusters": [{"name": "local", "uris": [url]}],
        "producers": producers, "consumers": 1, "size": 24, "duration": seconds, "rate": rate / producers,
        "queues": {"name": queue, "durable": False, "auto_delete": True},
        # amq.direct exists on every broker and is never declared: an older checkout (--root) that
        # declares its own exchange differently cannot collide with this one
        "exchange": {"name": "amq.direct"},
        "publisher": {"confirm": True, "confirm_window": 64},
        "consumer": {"prefetch": 500, "multi_ack_every": 50}, "drain_timeout": 10}
    if phase == "old-random-start":
        # an older checkout has no phases; a random start delay of up to one send interval spreads its
        # producers over the interval at random, the load shape of `random` (and close to `spread`)
        data["publisher"]["random_start_delay"] = producers / rate
    elif phase != "old":
        data["schedule"] = {"phase": phase}
    w = workload_from_dict(data)
    out = tempfile.mkdtemp(prefix="rbench-bench-")
    (p,) = plan(w, "local", 1, "bench", out)
    cpu = CpuTrace()
    result = run_task(p)
    cpu.stop()
    task_dir = Path(out) / "bench"
    pub = pa.concat_tables([pq.read_table(f, columns=["t_intended", "t_sent"])
                            for f in sorted(task_dir.glob("published/local/task-*/attempt-*/part-*.parquet"))])
    got = pa.concat_tables([pq.read_table(f, columns=["t_received"])
                            for f in sorted(task_dir.glob("consumed/local/task-*/attempt-*/part-*.parquet"))])
    ti, ts = pub["t_intended"].to_numpy(), pub["t_sent"].to_numpy()
    start = int(ti.min()) + 2_000_000_000          # warm-up: connections settle, pages fault in
    end = int(ti.max())
    keep = ti >= start
    lag = (ts - ti)[keep]
    # CPU of the steady state only: the process's CPU between the window's ends (start-up, imports,
    # connecting and the drain are not the scheduler's), per message sent and received in that window
    tr = got["t_received"].to_numpy()
    sent = int(((ts >= start) & (ts < end)).sum())
    received = int(((tr >= start) & (tr < end)).sum())
    cpu_window_s = cpu.between(start, end)
    print(json.dumps({"rate": rate, "phase": phase, "published": result["published"], "consumed": result["consumed"],
                      "cpu_s": cpu_window_s, "cpu_us": cpu_window_s / max(sent + received, 1) * 2e6,
                      "p50_us": float(np.percentile(lag, 50)) / 1e3,
                      "p99_us": float(np.percentile(lag, 99)) / 1e3, "max_us": float(lag.max()) / 1e3}))


class CpuTrace:
    """The process's CPU time (getrusage, all threads) sampled every 50 ms against the wall clock, so the
    CPU of a window inside a run can be read afterwards (linear between samples)."""

    def __init__(self, every_s: float = 0.05) -> None:
        self.samples: list[tuple[int, float]] = []
        self._stop = threading.Event()
        self._every = every_s
        self._sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        self.samples.append((time.time_ns(), ru.ru_utime + ru.ru_stime))

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            self._sample()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def at(self, t_ns: int) -> float:
        s = self.samples
        for (t1, c1), (t2, c2) in zip(s, s[1:]):
            if t1 <= t_ns <= t2:
                return c1 + (c2 - c1) * (t_ns - t1) / max(t2 - t1, 1)
        return s[0][1] if t_ns < s[0][0] else s[-1][1]

    def between(self, start_ns: int, end_ns: int) -> float:
        return self.at(end_ns) - self.at(start_ns)


def lateness_table(args: argparse.Namespace) -> str:
    roots = [("this checkout", str(ROOT), ["aligned", "spread"])]
    if args.root:
        roots.insert(0, (f"peer {args.root}", args.root, ["old", "old-random-start"]))
    rows = []
    for rnd in range(args.rounds):
        for rate in (2000.0, 20000.0):
            for label, root, phases in roots:
                for phase in phases:
                    proc = subprocess.run([sys.executable, __file__, "--lateness-child", f"{rate}:{phase}", "--seconds",
                                           str(args.seconds), "--url", args.url, "--root", root],
                                          capture_output=True, text=True)
                    if proc.returncode != 0:
                        tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode
                        print(f"{label} {rate:g} {phase}: failed: {tail}")
                        continue
                    r = json.loads(proc.stdout.strip().splitlines()[-1])
                    r["code"], r["round"] = label, rnd
                    rows.append(r)
    import statistics

    lines = [f"send lateness (t_sent − t_intended, after 2 s) and client CPU per message (publish + consume; getrusage "
             f"of the whole process between the end of the 2 s warm-up and the last due time, ÷ messages sent and received then): "
             f"one task, 10 producers → 1 queue → 1 consumer, confirms (window 64), {args.seconds:g} s, rate-limited; "
             f"medians over {args.rounds} round(s)", "",
             "| code | msg/s (task) | phase | lateness p50 µs | lateness p99 µs | max µs | CPU µs/msg |", "|---|--:|---|--:|--:|--:|--:|"]
    keys = sorted({(r["code"], r["rate"], r["phase"]) for r in rows}, key=lambda k: (k[1], k[0] != "this checkout", k[2]))
    for code, rate, phase in keys:
        rs = [r for r in rows if (r["code"], r["rate"], r["phase"]) == (code, rate, phase)]
        med = {k: statistics.median(r[k] for r in rs) for k in ("p50_us", "p99_us", "max_us", "cpu_us")}
        shown = {"old": "aligned", "old-random-start": "random start within one interval"}.get(phase, phase)
        lines.append(f"| {code} | {rate:,.0f} | {shown} | {med['p50_us']:.0f} | {med['p99_us']:.0f} | {med['max_us']:,.0f} | "
                     f"{med['cpu_us']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--drivers", default="aiopika,amqp091")
    parser.add_argument("--url", default=os.environ.get("RBENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"))
    parser.add_argument("--lateness", action="store_true", help="measure send lateness and CPU (see above)")
    parser.add_argument("--root", default=None, help="with --lateness: another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=1, help="with --lateness: rounds (medians are reported)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--lateness-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.seconds, args.url)
        return
    if args.lateness_child:
        rate, phase = args.lateness_child.split(":")
        lateness_child(float(rate), phase, args.seconds, args.url, args.root or str(ROOT))
        return
    if args.lateness:
        text = lateness_table(args)
        print(text)
        (HERE / "out").mkdir(exist_ok=True)
        (HERE / "out" / "lateness.md").write_text(text + "\n")
        return
    rows = []
    for driver in args.drivers.split(","):
        proc = subprocess.run([sys.executable, __file__, "--child", driver, "--seconds", str(args.seconds), "--url", args.url],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{driver}: failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        window = args.seconds
        r["rate"] = r["published"] / window
        r["cpu_us"] = r["cpu_s"] / max(r["published"] + r["consumed"], 1) * 1e6 * 2   # per message: publish + consume
        rows.append(r)
    lines = [f"one task, 1 producer + 1 consumer, confirms (window 192), prefetch 200, 24-byte bodies, {args.seconds:g} s, "
             f"unlimited rate; CPU = whole client process (getrusage) ÷ messages, publish and consume together",
             "", "| driver | published msg/s | consumed | CPU µs/msg | RSS start MiB | RSS end MiB | RSS samples (s: MiB) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        samples = ", ".join(f"{t:.0f}: {m:.0f}" for t, m in r["rss_samples"][:: max(1, len(r["rss_samples"]) // 6)])
        lines.append(f"| {r['driver']} | {r['rate']:,.0f} | {r['consumed']:,} | {r['cpu_us']:.1f} | {r['rss_start']:.0f} | "
                     f"{r['rss_end']:.0f} | {samples} |")
    if len(rows) == 2:
        a, b = rows
        lines.append("")
        lines.append(f"ratio {b['driver']}/{a['driver']}: rate {b['rate'] / a['rate']:.2f}×, CPU per message {b['cpu_us'] / a['cpu_us']:.2f}×")
    text = "\n".join(lines)
    print(text)
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / "runtime.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
