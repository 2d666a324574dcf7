"""Native amqp091 driver vs the aio-pika reference: throughput, latency, client CPU.

One producer and one consumer on one connection, 12-byte persistent messages to a
durable classic queue, confirm window 192, prefetch 200, multi-ack every 200.
Modes: ``confirm`` (publisher confirms, manual multi-acks), ``noconfirm`` (no
confirms, manual multi-acks), ``autoack`` (no confirms, auto-ack).

The body is 12 bytes: seq u32 | t_sent_ns i64 (little-endian) -- a compact form of
rbench's 24-byte stamp, so the message size matches PerfTest's minimum. The bench
drives the Driver interface directly (no runtime, no recorder) so the numbers are
the drivers' own cost. Each (driver, mode) runs in its own subprocess, so
``resource.getrusage`` attributes CPU to exactly one driver; CPU per message is
that process's user+system seconds over the messages published *and* consumed.
In ``noconfirm``/``autoack`` the producer pauses while more than 20 000 messages are
in flight, for both drivers, so neither floods the broker.

    .venv/bin/python bench/bench_amqp091.py [--messages N] [--modes confirm,noconfirm,autoack]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import struct
import subprocess
import sys
import time
import uuid
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BODY = struct.Struct("<Iq")        # 12 bytes
MAX_IN_FLIGHT = 20_000             # producer pause threshold without confirms
DRIVERS = ("amqp091", "aiopika")
MODES = ("confirm", "noconfirm", "autoack")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _cpu_split() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


class _Sink:
    __slots__ = ("confirmed", "nacked", "returned", "done", "target")

    def __init__(self, target: int, done: asyncio.Event) -> None:
        self.confirmed = self.nacked = self.returned = 0
        self.target = target
        self.done = done

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        if acked:
            self.confirmed += 1
        else:
            self.nacked += 1
        if self.confirmed + self.nacked >= self.target:
            self.done.set()

    def on_return(self, body: object, t_ns: int) -> None:
        self.returned += 1


async def child(driver_name: str, mode: str, n: int, url: str, profile: str | None) -> dict[str, object]:
    from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, QueueDecl, Topology
    from rbench.drivers.base import load_driver

    confirm = mode == "confirm"
    auto_ack = mode == "autoack"
    queue = f"rbench-bench-{driver_name}-{mode}-{uuid.uuid4().hex[:8]}"
    driver = load_driver(driver_name)
    await driver.open(ClusterTarget("bench", (url,)))
    await driver.declare(Topology(queues=(QueueDecl(queue, durable=True),)))
    latencies = array("q", bytes(8 * n))
    received = 0
    seen = bytearray(n)
    duplicates = 0
    first_rx = last_rx = 0
    all_in = asyncio.Event()
    unpack = BODY.unpack_from

    def on_message(body: object, redelivered: bool, t_ns: int) -> None:
        nonlocal received, first_rx, last_rx, duplicates
        seq, t_sent = unpack(body)          # type: ignore[arg-type]
        if seen[seq]:
            duplicates += 1
            return
        seen[seq] = 1
        latencies[received] = t_ns - t_sent
        received += 1
        if received == 1:
            first_rx = t_ns
        if received == n:
            last_rx = t_ns
            all_in.set()

    try:
        consumer = await driver.consumer(ConsumerSpec(0, queue, prefetch=200, auto_ack=auto_ack,
                                                      multi_ack_every=200), on_message)
        confirmed = asyncio.Event()
        sink = _Sink(n, confirmed)
        pub = await driver.publisher(PublisherSpec(0, queue, routing_key=queue, confirm=confirm, confirm_window=192,
                                                   persistent=True), sink)
        buf = bytearray(BODY.size)
        prof = None
        if profile:
            import cProfile
            prof = cProfile.Profile()
            prof.enable()
        split0 = _cpu_split()
        cpu0, t0 = _cpu(), time.time_ns()
        for seq in range(n):
            await pub.ready()
            BODY.pack_into(buf, 0, seq, time.time_ns())
            pub.publish(buf, seq)
            if not confirm and seq & 63 == 63:
                await asyncio.sleep(0)
                while seq - received > MAX_IN_FLIGHT:
                    await asyncio.sleep(0.001)
        t_written = time.time_ns()
        if confirm:
            await asyncio.wait_for(confirmed.wait(), 120)
        else:
            await pub.drain(30)
        t_published = time.time_ns()
        await asyncio.wait_for(all_in.wait(), 120)
        cpu1, t1 = _cpu(), time.time_ns()
        split1 = _cpu_split()
        if prof is not None:
            prof.disable()
            prof.dump_stats(profile)
        await consumer.aclose()
        await pub.aclose()
    finally:
        await driver.delete_queues([queue])  # type: ignore[attr-defined]
        await driver.aclose()
    lat = sorted(latencies[:received])
    return {
        "driver": driver_name, "mode": mode, "messages": n,
        "publish_rate": n / ((t_published - t0) / 1e9),
        "write_rate": n / ((t_written - t0) / 1e9),
        "consume_rate": n / ((last_rx - first_rx) / 1e9) if last_rx > first_rx else 0.0,
        "end_to_end_rate": n / ((t1 - t0) / 1e9),
        "p50_ms": lat[len(lat) // 2] / 1e6, "p99_ms": lat[int(len(lat) * 0.99)] / 1e6,
        "cpu_s": cpu1 - cpu0, "cpu_user_s": split1[0] - split0[0], "cpu_sys_s": split1[1] - split0[1], "cpu_us_per_msg": (cpu1 - cpu0) / n * 1e6,
        "confirmed": sink.confirmed, "nacked": sink.nacked, "duplicates": duplicates, "received": received,
    }


def run_child(driver: str, mode: str, n: int, url: str, profile: str | None) -> dict[str, object]:
    cmd = [sys.executable, __file__, "--child", driver, mode, "--messages", str(n), "--url", url]
    if profile:
        cmd += ["--profile", profile]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{driver}/{mode} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(results: list[dict[str, object]], n: int) -> str:
    by = {(r["driver"], r["mode"]): r for r in results}
    lines = [f"messages per run: {n}, body 12 bytes (seq u32 + t_sent i64), persistent, durable classic queue, "
             "confirm window 192, prefetch 200, multi-ack every 200", "",
             "| mode | driver | publish msg/s | consume msg/s | e2e p50 ms | e2e p99 ms | client CPU µs/msg |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for mode in MODES:
        for drv in DRIVERS:
            r = by.get((drv, mode))
            if r is None:
                continue
            lines.append(f"| {mode} | {drv} | {r['publish_rate']:,.0f} | {r['consume_rate']:,.0f} | "
                         f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['cpu_us_per_msg']:.1f} |")
    lines += ["", "| mode | publish ×aiopika | consume ×aiopika | CPU/msg aiopika ÷ amqp091 |", "|---|---:|---:|---:|"]
    for mode in MODES:
        a, b = by.get(("amqp091", mode)), by.get(("aiopika", mode))
        if a and b:
            lines.append(f"| {mode} | {a['publish_rate'] / b['publish_rate']:.1f}× | "
                         f"{a['consume_rate'] / b['consume_rate']:.1f}× | "
                         f"{b['cpu_us_per_msg'] / a['cpu_us_per_msg']:.1f}× |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--url", default=os.environ.get("RBENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--drivers", default=",".join(DRIVERS))
    ap.add_argument("--child", nargs=2, metavar=("DRIVER", "MODE"))
    ap.add_argument("--profile", help="write cProfile stats of the measured section (child) to this path")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "amqp091.md"))
    args = ap.parse_args()
    if args.child:
        import uvloop
        result = uvloop.run(child(args.child[0], args.child[1], args.messages, args.url, args.profile))
        print(json.dumps(result))
        return
    results = []
    for mode in args.modes.split(","):
        for drv in args.drivers.split(","):
            r = run_child(drv, mode, args.messages, args.url, None)
            print(f"{drv:8s} {mode:9s} publish {r['publish_rate']:9,.0f}/s consume {r['consume_rate']:9,.0f}/s "
                  f"p50 {r['p50_ms']:7.2f} ms p99 {r['p99_ms']:7.2f} ms cpu {r['cpu_us_per_msg']:6.1f} µs/msg "
                  f"(user {r['cpu_user_s']:.2f} s, sys {r['cpu_sys_s']:.2f} s) "
                  f"(received {r['received']}, dup {r['duplicates']}, nacked {r['nacked']})", flush=True)
            results.append(r)
    text = table(results, args.messages)
    print()
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(f"# bench_amqp091 ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n\n"
                   f"command: `{' '.join([Path(sys.executable).name, *sys.argv])}`\n\n{text}")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
