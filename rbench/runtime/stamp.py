"""The 24-byte stamp every rbench message carries at the start of its body: the one source of its layout.

Layout (little-endian): producer u32 | seq u32 | t_intended i64 | t_sent i64.
It lets a consumer count lost, duplicated and reordered messages per producer and
compute end-to-end latency from the intended send time (coordinated-omission
corrected) as well as from the actual send time, without any header parsing.
A body smaller than the stamp is raised to STAMP_SIZE (PerfTest does the same with
its 12-byte minimum); the Parquet ``size`` column records the real body size.

The runtime's hot path packs and unpacks this same layout in C, from the constants in
ext/include/stamp.pxd (``Stamper``, ``RecorderCore.consumed``, the AMQP 1.0 link); the recorder
exports what it was compiled with as ``STAMP_LAYOUT`` and tests/unit/test_stamp.py holds that
equal to ``LAYOUT`` here. These helpers are for tests and drivers.
"""
from __future__ import annotations

import struct

FIELDS = ("producer", "seq", "t_intended", "t_sent")
_FORMATS = ("I", "I", "q", "q")
STAMP = struct.Struct("<" + "".join(_FORMATS))
STAMP_SIZE: int = STAMP.size  # 24
# field → byte offset in the body, and "size" → STAMP_SIZE: what the C side is checked against
LAYOUT: dict[str, int] = {"size": STAMP_SIZE, **{name: struct.calcsize("<" + "".join(_FORMATS[:i]))
                                                  for i, name in enumerate(FIELDS)}}


def new_payload(size: int) -> bytearray:
    """A zero-filled body of ``max(size, STAMP_SIZE)`` bytes, reused for every message of a producer."""
    return bytearray(max(size, STAMP_SIZE))


def write_stamp(buf: bytearray, producer: int, seq: int, t_intended_ns: int, t_sent_ns: int) -> None:
    STAMP.pack_into(buf, 0, producer, seq, t_intended_ns, t_sent_ns)


def read_stamp(body: bytes | bytearray | memoryview) -> tuple[int, int, int, int]:
    """(producer, seq, t_intended_ns, t_sent_ns); raises struct.error on a short body."""
    return STAMP.unpack_from(body, 0)
