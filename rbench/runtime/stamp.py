"""The 24-byte stamp every rbench message carries at the start of its body.

Layout (little-endian): producer u32 | seq u32 | t_intended i64 | t_sent i64.
It lets a consumer count lost, duplicated and reordered messages per producer and
compute end-to-end latency from the intended send time (coordinated-omission
corrected) as well as from the actual send time, without any header parsing.
A body smaller than the stamp is raised to STAMP_SIZE (PerfTest does the same with
its 12-byte minimum); the Parquet ``size`` column records the real body size.

The runtime's hot path packs and unpacks this same layout in C (ext/runtime/recorder.pyx:
``Stamper``, ``RecorderCore.consumed``); these helpers are for tests and drivers.
"""
from __future__ import annotations

import struct

STAMP = struct.Struct("<IIqq")
STAMP_SIZE: int = STAMP.size  # 24
_SENT = struct.Struct("<q")
_SENT_OFFSET = 16


def new_payload(size: int) -> bytearray:
    """A zero-filled body of ``max(size, STAMP_SIZE)`` bytes, reused for every message of a producer."""
    return bytearray(max(size, STAMP_SIZE))


def write_stamp(buf: bytearray, producer: int, seq: int, t_intended_ns: int, t_sent_ns: int) -> None:
    STAMP.pack_into(buf, 0, producer, seq, t_intended_ns, t_sent_ns)


def write_sent(buf: bytearray, t_sent_ns: int) -> None:
    _SENT.pack_into(buf, _SENT_OFFSET, t_sent_ns)


def read_stamp(body: bytes | bytearray | memoryview) -> tuple[int, int, int, int]:
    """(producer, seq, t_intended_ns, t_sent_ns); raises struct.error on a short body."""
    return STAMP.unpack_from(body, 0)
