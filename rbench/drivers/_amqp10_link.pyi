"""Type stubs for the AMQP 1.0 link hot path (ext/amqp10_link.pyx); see docs/amqp10.md."""
from __future__ import annotations

import asyncio
from typing import Any

FLOW: int
TRANSFER: int
DISPOSITION: int
ACCEPTED: int
REJECTED: int
RELEASED: int
MODIFIED: int

BytesLike = bytes | bytearray | memoryview

class Sender:
    channel: int
    handle: int
    settled: bool
    durable: bool
    max_frame: int
    producer: int
    sink: Any
    on_change: Any
    credit: int
    delivery_count: int
    next_id: int
    transfers: int
    outstanding: int
    accepted: int
    rejected: int
    released: int
    def __init__(self, channel: int, handle: int, settled: bool, durable: bool, max_frame: int,
                 producer: int, sink: Any, first_id: int = 0) -> None: ...
    def write(self, out: bytearray, payload: BytesLike, seq: int) -> int: ...
    def send_batch(self, out: bytearray, payload: BytesLike, first_seq: int, n: int, window: int,
                   t_intended: int = 0, max_bytes: int = 262144) -> int: ...
    def settle(self, first: int, last: int, outcome: int = ...) -> None: ...
    def flow(self, delivery_count: int, link_credit: int) -> None: ...

class Receiver:
    channel: int
    handle: int
    on_message: Any
    window: int
    refill: int
    awaiting: bool
    ack_every: int
    settle: bool
    credit: int
    delivery_count: int
    next_incoming_id: int
    next_outgoing_id: int
    received: int
    stopped: bool
    pending: int
    dispositions: int
    manual: bool
    on_delivery: Any
    def __init__(self, channel: int, handle: int, on_message: Any, window: int, ack_every: int,
                 settle: bool, next_incoming_id: int, manual: bool = False) -> None: ...
    def write_flow(self, out: bytearray, credit: int, drain: bool = False) -> None: ...
    def accept(self, out: bytearray, first: int, last: int) -> None: ...
    def flush_dispositions(self, out: bytearray) -> bool: ...

class FrameReader(asyncio.Protocol):
    """Also the connection's asyncio protocol: the rare frames and events go to ``owner``."""
    out: bytearray
    dirty: bool
    frames: int
    reads: int
    owner: Any
    transport: Any
    wrote: bool
    def __init__(self, owner: Any = None) -> None: ...
    def flush(self) -> None: ...
    def add_sender(self, channel: int, s: Sender) -> None: ...
    def add_receiver(self, channel: int, r: Receiver) -> None: ...
    def remove(self, channel: int) -> None: ...
    def feed(self, data: BytesLike) -> list[tuple[int, int, bytes]]: ...

class LatencyTap:
    count: int
    short_bodies: int
    def __init__(self) -> None: ...
    def __call__(self, body: BytesLike, redelivered: bool, t_ns: int) -> None: ...
    def publish_count(self, target: Any, wake_fd: int = -1) -> None: ...
    def columns(self, start: int = 0) -> tuple[bytes, bytes, bytes, bytes]: ...

def empty_frame() -> bytes: ...
