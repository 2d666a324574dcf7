"""AMQP 1.0 codec benchmark: rbench vs RbFly, rstream and qpid-proton in the same run.

Each library encodes its own pre-built message object, and every library decodes the same
wire bytes (rbench's encoding, which carries every section all four can read), 10,000
times per round; a round's rate is msgs/s and the table reports the median of ROUNDS
rounds. Libraries are interleaved within each round so background load on a shared machine
hits them alike. Before timing, every library's encoding is decoded by rbench and every
library's decode result is checked against the expected body, so nobody is timed producing
something else. (RbFly's encoder does not write a properties section at all, so its "full"
encoding is shorter — the wire-bytes column shows it.)

Cases:
  seed  amqp-value body {'large-int': 2**31-1, 'small-list': [1, 2, 3], 'bin-string': b'abc'}
  full  the same body plus properties (message-id, to, subject, content-type, creation-time,
        …) and application-properties

RbFly is GPL and benchmark-only (the `bench` extra); rbench itself never imports it.
Run: `make bench-codec` or `.venv/bin/python bench/bench_codec.py [--rounds 7] [--n 10000]`.
Writes the table to stdout and to bench/out/codec.md.
"""
from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rbench.codec import amqp10 as rb  # noqa: E402

SEED = {"large-int": 2**31 - 1, "small-list": [1, 2, 3], "bin-string": b"abc"}
CREATED = dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc)
PROPS = dict(message_id="msg-000001", to="/queues/bench", subject="load",
             reply_to="/queues/replies", correlation_id="corr-1",
             content_type="application/octet-stream", creation_time=CREATED, group_id="g1")
APP = {"producer": "p-0001", "seq": 123456, "sent": 1700000000123456789, "kind": "steady"}

Case = dict[str, Callable[[], tuple[Callable[[], Any], Callable[[], Any], bytes]]]


def rbench_case(full: bool):
    msg = rb.Message(SEED, properties=rb.Properties(**PROPS) if full else None,
                     application_properties=APP if full else None)
    wire = rb.encode_message(msg)
    enc, dec = rb.encode_message, rb.decode_message
    return (lambda: enc(msg)), (lambda w: (lambda: dec(w)), lambda w: dec(w).body), wire


def rbfly_case(full: bool):
    from rbfly.amqp import MessageCtx, decode_amqp, encode_amqp
    from rbfly.amqp._message import AMQPProperties
    from rbfly.types import Symbol

    props = None
    if full:
        props = AMQPProperties([PROPS["message_id"], None, PROPS["to"], PROPS["subject"],
                                PROPS["reply_to"], PROPS["correlation_id"],
                                Symbol(PROPS["content_type"]), None, None, CREATED,
                                PROPS["group_id"]])
    ctx = MessageCtx(SEED, None, None, None, props, APP if full else None, None)
    buf = bytearray(4096)
    size = encode_amqp(buf, ctx)
    wire = bytes(buf[:size])
    # RbFly's native API writes into a caller's buffer and returns the size (no bytes object)
    return ((lambda: encode_amqp(buf, ctx)), (lambda w: (lambda: decode_amqp(w)),
            lambda w: decode_amqp(w).body), wire)


def rstream_case(full: bool):
    from rstream._pyamqp.message import Properties
    from rstream.amqp import AMQPMessage, amqp_decoder

    kw: dict[str, Any] = {}
    if full:
        ms = int(CREATED.timestamp() * 1000)
        kw["properties"] = Properties(
            message_id=PROPS["message_id"], to=PROPS["to"], subject=PROPS["subject"],
            reply_to=PROPS["reply_to"], correlation_id=PROPS["correlation_id"],
            content_type=PROPS["content_type"], creation_time=ms, group_id=PROPS["group_id"])
        kw["application_properties"] = APP
    msg = AMQPMessage(value=SEED, **kw)
    wire = bytes(msg)
    return ((lambda: bytes(msg)), (lambda w: (lambda: amqp_decoder(w)),
            # rstream returns AMQP strings as bytes
            lambda w: {k.decode(): v for k, v in amqp_decoder(w).value.items()}), wire)


def proton_case(full: bool):
    import proton

    msg = proton.Message(body=SEED)
    if full:
        msg.id, msg.address, msg.subject = PROPS["message_id"], PROPS["to"], PROPS["subject"]
        msg.reply_to, msg.correlation_id = PROPS["reply_to"], PROPS["correlation_id"]
        msg.content_type, msg.group_id = PROPS["content_type"], PROPS["group_id"]
        msg.creation_time = CREATED.timestamp()
        msg.properties = APP
    wire = msg.encode()
    out = proton.Message()

    def body(w: bytes) -> Any:
        out.decode(w)
        return out.body

    return (lambda: msg.encode()), (lambda w: (lambda: out.decode(w)), body), wire


LIBS = {"rbench": rbench_case, "RbFly": rbfly_case, "rstream": rstream_case,
        "qpid-proton": proton_case}


def check(name: str, wire: bytes, full: bool) -> None:
    """The encoding must be a valid message carrying the benchmark body (decoded by rbench)."""
    m = rb.decode_message(wire)
    assert m.body == SEED, (name, m.body)
    if full:
        assert m.application_properties == APP, (name, m.application_properties)
        assert m.properties.to == PROPS["to"], (name, m.properties)


def rate(fn: Callable[[], Any], n: int) -> float:
    rng = range(n)
    t0 = time.perf_counter()
    for _ in rng:
        fn()
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--out", type=Path, default=HERE / "out" / "codec.md")
    args = ap.parse_args()

    results: dict[tuple[str, str, str], list[float]] = {}
    fns = {}
    for case in ("seed", "full"):
        made = {lib: make(case == "full") for lib, make in LIBS.items()}
        common = made["rbench"][2]
        for lib, (enc, (dec_of, body_of), wire) in made.items():
            check(lib, wire, case == "full" and lib != "RbFly")
            got = body_of(common)
            assert got == SEED, (lib, got)
            dec = dec_of(common)
            fns[(case, lib)] = (enc, dec, len(wire))
            rate(enc, 2000)  # warm-up
            rate(dec, 2000)
    for _ in range(args.rounds):
        for (case, lib), (enc, dec, _size) in fns.items():
            results.setdefault((case, "encode", lib), []).append(rate(enc, args.n))
            results.setdefault((case, "decode", lib), []).append(rate(dec, args.n))

    lines = [
        "# AMQP 1.0 codec benchmark",
        "",
        f"`{' '.join([Path(sys.executable).name, *sys.argv])}` — {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, "
        f"Python {platform.python_version()}, {platform.machine()}; {args.n:,} messages per "
        f"round, median of {args.rounds} rounds (msgs/s); ratio = rate / RbFly's rate.",
        "",
        "| case | op | library | wire bytes | msgs/s (median) | min–max | vs RbFly |",
        "|------|----|---------|-----------:|----------------:|--------:|---------:|",
    ]
    for case in ("seed", "full"):
        for op in ("encode", "decode"):
            ref = statistics.median(results[(case, op, "RbFly")])
            for lib in LIBS:
                xs = results[(case, op, lib)]
                med = statistics.median(xs)
                size = fns[(case, lib)][2] if op == "encode" else fns[(case, "rbench")][2]
                lines.append(f"| {case} | {op} | {lib} | {size} | {med:,.0f} | "
                             f"{min(xs):,.0f}–{max(xs):,.0f} | {med / ref:.2f}× |")
    lines += ["", "Encode: each library encodes its own message object; wire bytes is its "
              "encoding's size. RbFly encodes into a reused bytearray (its native API, no bytes "
              "object) and writes no properties section (hence its shorter *full* encoding); "
              "rbench, rstream and proton return a new bytes object. Decode: every library "
              "decodes the same bytes (rbench's encoding); proton decodes into a reused "
              "proton.Message."]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
