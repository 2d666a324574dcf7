"""Long mutation fuzz of the AMQP 1.0 decoder (rbench.codec._amqp10).

Feeds N mutated inputs (default 1,000,000) built from a corpus of valid encodings to
decode_message, decode_value and decode_data_props. Anything other than a result or a
rbench.errors.CodecError is a crash (the input is saved under bench/out/fuzz_crashes/).
For inputs that decode, the result is re-encoded and decoded again and must be stable.
A segfault would kill the run (faulthandler prints the stack), so a completed run with
crashes=0 means none happened. Reports inputs, crashes, distinct error kinds, the slowest
single input (hangs) and peak RSS (unbounded memory).

Run: `.venv/bin/python bench/fuzz_amqp10.py [--inputs 1000000] [--seed 1]`
"""
from __future__ import annotations

import argparse
import collections
import datetime as dt
import faulthandler
import random
import re
import resource
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rbench.codec.amqp10 import (  # noqa: E402
    Array,
    Char,
    Decimal128,
    Described,
    Float,
    Header,
    Int,
    Message,
    Properties,
    Symbol,
    UByte,
    UInt,
    ULong,
    decode_data_props,
    decode_message,
    decode_value,
    encode_data,
    encode_message,
    encode_value,
)
from rbench.errors import CodecError  # noqa: E402

UTC = dt.timezone.utc
INTERESTING = [0x00, 0x01, 0x40, 0x45, 0x53, 0x55, 0x7F, 0x80, 0xA0, 0xA1, 0xA3, 0xB0, 0xB1,
               0xC0, 0xC1, 0xD0, 0xD1, 0xE0, 0xF0, 0xFE, 0xFF]
BIG = [b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x00", b"\x80\x00\x00\x00",
       b"\x00\x00\x01\x00"]


def corpus() -> list[bytes]:
    seed = {"large-int": 2**31 - 1, "small-list": [1, 2, 3], "bin-string": b"abc"}
    full = Message(
        seed, header=Header(True, 7, 1000, True, 2), delivery_annotations={"x-d": 1},
        message_annotations={"x-opt": Symbol("s"), 7: [1.5, None]},
        properties=Properties("id", b"u", "to", "subj", "rt", uuid.UUID(int=9), "text/plain",
                              "gzip", dt.datetime(2030, 1, 1, tzinfo=UTC),
                              dt.datetime(2020, 1, 1, tzinfo=UTC), "g", 4, "rg"),
        application_properties={"a": 1, "b": "two", "c": b"3"}, footer={"f": 0})
    values = [seed, [None, True, False, UByte(1), UInt(300), ULong(2**40), Int(-7), 2**62,
                     Float(1.5), 2.5, Char("é"), dt.datetime(2024, 1, 1, tzinfo=UTC),
                     uuid.UUID(int=1), Decimal128(bytes(16)), "x" * 300, b"y" * 300],
              {Symbol("k"): Described(Symbol("d"), {"n": [[], {}]})},
              Array(0x71, [1, 2, 3]), Array(0xA1, ["a", "b"]), Array(0xF0, [Array(0x50, [1])]),
              Array(0x40, [None] * 5), list(range(100)), {i: str(i) for i in range(60)}]
    out = [encode_value(v) for v in values]
    out += [encode_message(full), encode_message(Message(seed)),
            encode_message(Message([b"a", b"b"], body_kind="data")),
            encode_message(Message([[1], [2]], body_kind="sequence")),
            encode_data(b"z" * 40, {"producer": "p", "seq": 1}), encode_data(b"q" * 400)]
    return out


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    b = bytearray(rng.choice(seeds))
    for _ in range(rng.randint(1, 5)):
        op = rng.randrange(8)
        n = len(b)
        if op == 0 and n:
            b[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            b[rng.randrange(n)] = rng.choice(INTERESTING)
        elif op == 2 and n:
            b[rng.randrange(n)] = rng.randrange(256)
        elif op == 3 and n:
            del b[rng.randrange(n):]
        elif op == 4 and n:
            i = rng.randrange(n)
            del b[i:i + rng.randint(1, 16)]
        elif op == 5:
            i = rng.randrange(n + 1)
            b[i:i] = rng.randbytes(rng.randint(1, 8))
        elif op == 6 and n:
            i = rng.randrange(n)
            b[i:i + 4] = rng.choice(BIG)
        elif op == 7:
            other = rng.choice(seeds)
            i, j = rng.randrange(n + 1), rng.randrange(len(other))
            b[i:] = other[j:j + rng.randint(1, 64)]
    return bytes(b)


KIND = re.compile(r"0x[0-9a-f]+|-?\d+|'[^']*'|\"[^\"]*\"")


def kind(e: CodecError) -> str:
    """The error's template: numbers, quoted text, reprs and type names folded away."""
    msg = str(e.args[0]).split(" (at offset")[0]
    msg = re.sub(r"map key .* is not hashable", "map key K is not hashable", msg)
    msg = re.sub(r"got (?:constructor )?[A-Za-z_0-9]+$", "got T", msg)
    return KIND.sub("N", msg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    faulthandler.enable()
    rng = random.Random(args.seed)
    seeds = corpus()
    kinds: collections.Counter[str] = collections.Counter()
    crashes: list[tuple[bytes, str]] = []
    ok = unstable = not_reencodable = 0
    slowest = 0.0
    slowest_input = b""
    t_start = time.perf_counter()
    for i in range(args.inputs):
        data = mutate(rng, seeds)
        t0 = time.perf_counter()
        for fn in (decode_message, decode_value, decode_data_props):
            try:
                res = fn(data)
            except CodecError as e:
                kinds[kind(e)] += 1
                continue
            except Exception as e:
                crashes.append((data, f"{fn.__name__}: {type(e).__name__}: {e}"))
                continue
            ok += 1
            try:
                if fn is decode_value:
                    again = encode_value(res)
                    if encode_value(decode_value(again)) != again:
                        unstable += 1
                elif fn is decode_message:
                    again = encode_message(res)
                    if encode_message(decode_message(again)) != again:
                        unstable += 1
            except CodecError:
                not_reencodable += 1  # e.g. a negative int annotation key: valid to read only
            except Exception as e:
                crashes.append((data, f"re-encode after {fn.__name__}: {type(e).__name__}: {e}"))
        took = time.perf_counter() - t0
        if took > slowest:
            slowest, slowest_input = took, data
        if (i + 1) % 200_000 == 0:
            print(f"  {i + 1:,} inputs, {len(crashes)} crashes, {len(kinds)} error kinds, "
                  f"{time.perf_counter() - t_start:.0f} s", file=sys.stderr)
    elapsed = time.perf_counter() - t_start
    if crashes:
        out = HERE / "out" / "fuzz_crashes"
        out.mkdir(parents=True, exist_ok=True)
        for n, (data, why) in enumerate(crashes[:100]):
            (out / f"crash{n}.bin").write_bytes(data)
            (out / f"crash{n}.txt").write_text(why + "\n")
    # wall-clock outliers on a shared machine are mostly scheduling/GC: re-time the slowest
    # input alone (best of 5) to tell a real slow path from noise
    retimed = []
    for _ in range(5):
        t0 = time.perf_counter()
        for fn in (decode_message, decode_value, decode_data_props):
            try:
                fn(slowest_input)
            except CodecError:
                pass
        retimed.append(time.perf_counter() - t0)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"inputs={args.inputs:,} decoder_calls={3 * args.inputs:,} seed={args.seed} "
          f"time={elapsed:.1f}s crashes={len(crashes)} decoded_ok={ok:,} "
          f"unstable_roundtrips={unstable} not_reencodable={not_reencodable} "
          f"codec_errors={sum(kinds.values()):,} distinct_error_kinds={len(kinds)} "
          f"slowest_input={slowest * 1e3:.2f}ms (re-timed alone: {min(retimed) * 1e3:.3f}ms, "
          f"{len(slowest_input)} bytes: {slowest_input[:32].hex()}) peak_rss={rss_mb:.0f}MB")
    for k, n in kinds.most_common():
        print(f"  {n:>9,}  {k}")
    for data, why in crashes[:10]:
        print(f"CRASH {why} input={data.hex()}")
    sys.exit(1 if crashes else 0)


if __name__ == "__main__":
    main()
