"""How fast one rbench task runs, and whether its memory stays flat.

One task (no Spark: the executor code path itself) publishes with confirms at an
unlimited rate to one queue and consumes it, for --seconds, with each driver in its
own subprocess so getrusage CPU is attributable. Every 10 s the task's RSS is read
from /proc. Prints msg/s, client CPU µs per message (publish + consume) and RSS at
start and end, and writes bench/out/runtime.md.

    .venv/bin/python bench/bench_runtime.py --seconds 300 --drivers aiopika,amqp091
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--drivers", default="aiopika,amqp091")
    parser.add_argument("--url", default=os.environ.get("RBENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.seconds, args.url)
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
