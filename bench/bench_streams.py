"""Stream publishing: rbench's stream driver against RbFly and rstream, in one run.

`make bench-streams` (or `.venv/bin/python bench/bench_streams.py [--single N --batch N
--rounds R]`). Two variants, as in RbFly's performance report, all AMQP 1.0 encoded
10-byte messages (`'{:010d}'.format(n)` as a `data` section):

* single: N messages one at a time, each confirmed before the next;
* batch:  M messages in batches of 100, each batch confirmed before the next.

Every (client, variant, round) runs in its own subprocess that publishes to its own
fresh stream, so getrusage CPU (user+sys, taken around the publishing loop only) is
that client's alone. Rounds are interleaved across clients and the order rotates each
round, so broker drift, the clean-up of the previous round's stream and the other
tenants of this machine hit every client alike. Both variants wait on the broker for
most of each round trip, so a single run of each is mostly broker noise: the table
gives medians, the median of the per-round (paired) ratios and how many rounds rbench
won. Writes bench/out/streams.md.

RbFly is GPL: it is imported only inside this benchmark's worker, never by rbench/.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from rbench.scenarios.stream_publish import cpu_seconds, message  # noqa: E402  (after the path insert)

URI = os.environ.get("RBENCH_STREAM_URL", "rabbitmq-stream://guest:guest@127.0.0.1:5552/")
CLIENTS = ("rbench", "rbfly", "rstream")
VARIANTS = ("batch", "single")
BATCH = 100


# ------------------------------------------------------------------ workers (one per subprocess)

async def work_rbench(stream: str, variant: str, count: int) -> tuple[float, float]:
    from rbench.config.types import ClusterTarget
    from rbench.drivers.stream import StreamDriver
    from rbench.scenarios.stream_publish import open_publisher, publish_messages

    driver = StreamDriver()
    await driver.open(ClusterTarget("bench", (), stream_uris=(URI,)))
    pub, sink = await open_publisher(driver, stream, "amqp")
    c0, t0 = cpu_seconds(), time.perf_counter()
    await publish_messages(pub, count, 1 if variant == "single" else BATCH)
    t1, c1 = time.perf_counter(), cpu_seconds()
    assert sink.acked == count, (sink.acked, count)
    await pub.aclose()
    await driver.aclose()
    return t1 - t0, c1 - c0


async def work_rbfly(stream: str, variant: str, count: int) -> tuple[float, float]:
    import rbfly.streams as rbs

    client = rbs.streams_client(URI)
    try:
        if variant == "single":
            async with client.publisher(stream) as pub:
                c0, t0 = cpu_seconds(), time.perf_counter()
                for n in range(count):
                    await pub.send(message(n))           # bytes body → AMQP data section, confirmed
                t1, c1 = time.perf_counter(), cpu_seconds()
        else:
            async with client.publisher(stream, cls=rbs.PublisherBatchFast) as pub:
                c0, t0 = cpu_seconds(), time.perf_counter()
                for start in range(0, count, BATCH):
                    for n in range(start, min(start + BATCH, count)):
                        pub.batch(message(n))
                    await pub.flush()                 # sends the batch and waits for its confirms
                t1, c1 = time.perf_counter(), cpu_seconds()
    finally:
        await client.disconnect()
    return t1 - t0, c1 - c0


async def work_rstream(stream: str, variant: str, count: int) -> tuple[float, float]:
    from urllib.parse import urlsplit

    from rstream import AMQPMessage, ConfirmationStatus, Producer

    u = urlsplit(URI)
    async with Producer(u.hostname or "127.0.0.1", u.port or 5552, username=u.username or "guest",
                        password=u.password or "guest") as producer:
        await producer.send_wait(stream, AMQPMessage(body=b"warm-up..."))   # declares the publisher
        if variant == "single":
            c0, t0 = cpu_seconds(), time.perf_counter()
            for n in range(count):
                await producer.send_wait(stream, AMQPMessage(body=message(n)))
            t1, c1 = time.perf_counter(), cpu_seconds()
        else:
            loop = asyncio.get_running_loop()
            state: dict[str, object] = {"left": 0, "fut": None}

            def on_confirm(status: ConfirmationStatus) -> None:
                state["left"] = int(state["left"]) - 1      # type: ignore[call-overload]
                fut = state["fut"]
                if state["left"] == 0 and fut is not None and not fut.done():  # type: ignore[attr-defined]
                    fut.set_result(None)                    # type: ignore[attr-defined]

            c0, t0 = cpu_seconds(), time.perf_counter()
            for start in range(0, count, BATCH):
                batch = [AMQPMessage(body=message(n)) for n in range(start, min(start + BATCH, count))]
                state["left"], state["fut"] = len(batch), loop.create_future()
                await producer.send_batch(stream, batch, on_publish_confirm=on_confirm)
                await state["fut"]                           # type: ignore[misc]
            t1, c1 = time.perf_counter(), cpu_seconds()
    return t1 - t0, c1 - c0


WORKERS = {"rbench": work_rbench, "rbfly": work_rbfly, "rstream": work_rstream}


def worker_main(args: argparse.Namespace) -> None:
    import uvloop

    seconds, cpu = uvloop.run(WORKERS[args.worker](args.stream, args.variant, args.count))
    print(json.dumps({"seconds": seconds, "cpu": cpu, "count": args.count}))


# ------------------------------------------------------------------ parent

async def _streams(names: list[str], create: bool) -> None:
    from rbench.config.types import ClusterTarget, QueueDecl
    from rbench.drivers.stream import StreamDriver

    d = StreamDriver()
    await d.open(ClusterTarget("bench", (), stream_uris=(URI,)))
    try:
        if create:
            for n in names:
                await d.create_stream(QueueDecl(n, arguments=(("x-queue-type", "stream"),)))
        else:
            await d.delete_streams(names)
    finally:
        await d.aclose()


def run_one(client: str, variant: str, count: int) -> dict[str, float]:
    import uvloop

    stream = f"rbench-bench-{client}-{variant}-{uuid.uuid4().hex[:6]}"
    uvloop.run(_streams([stream], True))
    try:
        out = subprocess.run([sys.executable, __file__, "--worker", client, "--variant", variant,
                              "--count", str(count), "--stream", stream],
                             capture_output=True, text=True, timeout=900)
        if out.returncode != 0:
            raise RuntimeError(f"{client} {variant} failed:\n{out.stderr[-2000:]}")
        res = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        uvloop.run(_streams([stream], False))
    return {"rate": count / res["seconds"], "cpu_us": res["cpu"] / count * 1e6}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--single", type=int, default=200_000, help="messages in the single-message variant")
    p.add_argument("--batch", type=int, default=1_000_000, help="messages in the batch-of-100 variant")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--clients", default=",".join(CLIENTS), help=f"comma-separated subset of {', '.join(CLIENTS)}")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--out", type=Path, default=HERE / "out" / "streams.md")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, help=argparse.SUPPRESS)
    p.add_argument("--stream", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker_main(args)
        return 0

    clients = [c for c in args.clients.split(",") if c]
    unknown = sorted(set(clients) - set(CLIENTS))
    if unknown:
        p.error(f"--clients: unknown {', '.join(unknown)}")
    variants = [v for v in args.variants.split(",") if v]
    counts = {"single": args.single, "batch": args.batch}
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for v in variants:
            for c in clients[r % len(clients):] + clients[:r % len(clients)]:   # rotate the order
                res = run_one(c, v, counts[v])
                results.setdefault((c, v), []).append(res)
                print(f"round {r + 1}/{args.rounds} {v:<6} {c:<8} {res['rate']:>10,.0f} msg/s "
                      f"{res['cpu_us']:>7.2f} µs CPU/msg", flush=True)

    med = {k: (statistics.median(x["rate"] for x in v), statistics.median(x["cpu_us"] for x in v))
           for k, v in results.items()}
    lines = [
        "# Stream publishing: rbench vs RbFly vs rstream",
        "",
        f"`{' '.join([Path(sys.executable).name, 'bench/bench_streams.py'] + sys.argv[1:])}` — "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.rounds} rounds (median), "
        f"10-byte AMQP 1.0 messages, single = {args.single:,} msgs each confirmed, "
        f"batch = {args.batch:,} msgs in batches of {BATCH} each confirmed. "
        "rbench publishes through its stream driver (C frame builder, ext/codec/stream.pyx): publish() the "
        "batch, then await drain() for its confirms (rbench.scenarios.stream_publish.publish_messages). "
        "Client CPU = getrusage user+sys of the client's own process around its publishing loop.",
        "",
        "| variant | client | median msg/s | CPU µs/msg | rate ratio (of medians) | rate ratio (paired median) "
        "| rounds rbench won | CPU ratio |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for v in variants:
        base = med.get(("rbench", v))
        ours = results.get(("rbench", v), [])
        for c in clients:
            rate, cpu = med[(c, v)]
            if base and c != "rbench":
                theirs = results[(c, v)]
                paired = [a["rate"] / b["rate"] for a, b in zip(ours, theirs)]
                won = sum(1 for x in paired if x >= 1.0)
                cells = (f"{base[0] / rate:.2f}x", f"{statistics.median(paired):.2f}x", f"{won}/{len(paired)}",
                         f"{base[1] / cpu:.2f}x")
            else:
                cells = ("—", "—", "—", "—")
            lines.append(f"| {v} | {c} | {rate:,.0f} | {cpu:.2f} | " + " | ".join(cells) + " |")
    lines += ["", "rate ratio = rbench msg/s ÷ peer msg/s (> 1: rbench faster), of the medians and as the "
              "median of each round's own ratio; a round is won when rbench's rate ≥ the peer's in that round. "
              "CPU ratio = rbench CPU/msg ÷ peer CPU/msg of the medians (< 1: rbench cheaper)."]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
