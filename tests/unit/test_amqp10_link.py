"""The AMQP 1.0 link hot path (ext/amqp10_link.pyx) checked against the general codec, no broker.

Every frame the C links write is decoded with rbench.codec.amqp10 (an independent decoder
of the same type system), and the two halves talk to each other: a Sender's transfers fed
to a Receiver, the Receiver's dispositions fed back to the Sender's sink.
"""
from __future__ import annotations

import struct

import pytest

from rbench.codec.amqp10 import Described, decode_message, decode_value_at
from rbench.drivers._amqp10_link import FrameReader, LatencyTap, Receiver, Sender
from rbench.errors import CodecError
from rbench.runtime.stamp import read_stamp, write_stamp


class Sink:
    def __init__(self) -> None:
        self.confirms: list[tuple[int, bool]] = []
        self.returns: list[bytes] = []

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        self.confirms.append((seq, acked))

    def on_return(self, body: bytes | memoryview, t_ns: int) -> None:
        self.returns.append(bytes(body))


def frames(buf: bytes) -> list[tuple[int, Described, bytes]]:
    """(channel, performative, payload) of every frame in ``buf``."""
    out, i = [], 0
    while i < len(buf):
        size, doff, ftype, channel = struct.unpack_from(">IBBH", buf, i)
        assert ftype == 0 and doff == 2
        body = buf[i + 8:i + size]
        value, end = decode_value_at(body, 0)
        out.append((channel, value, body[end:]))
        i += size
    return out


def test_a_transfer_decodes_with_the_general_codec() -> None:
    out = bytearray()
    s = Sender(3, 7, False, True, 4096, 9, Sink())
    payload = bytes(range(40))
    assert s.write(out, payload, 100) == len(out)
    ((channel, perf, message),) = frames(bytes(out))
    assert channel == 3 and perf.descriptor == 0x14
    assert perf.value == [7, 0, b"\0\0\0\0", 0, False, False]
    msg = decode_message(message)
    assert msg.body == payload and msg.header is not None and msg.header.durable
    assert (s.outstanding, s.next_id, s.credit) == (1, 1, -1)


def test_a_large_body_is_split_into_frames_no_larger_than_max_frame() -> None:
    out = bytearray()
    s = Sender(0, 0, True, False, 512, 1, Sink())
    payload = bytes(i % 251 for i in range(5000))
    s.write(out, payload, 0)
    parts = frames(bytes(out))
    assert len(parts) == s.transfers > 9
    assert all(struct.unpack_from(">I", bytes(out), 0)[0] <= 512 for _ in parts)
    assert [p.value[5] for _, p, _ in parts] == [True] * (len(parts) - 1) + [False]      # more
    assert decode_message(b"".join(m for _, _, m in parts)).body == payload


@pytest.mark.parametrize("max_frame", [512, 131072])
def test_sender_to_receiver_and_dispositions_back(max_frame: int) -> None:
    """Transfers fed in odd-sized chunks reach on_message intact; the ranged disposition settles them all."""
    sink, got = Sink(), []
    sender = Sender(0, 0, False, False, max_frame, 5, sink)
    wire = bytearray()
    body = bytearray(3000)
    for seq in range(20):
        write_stamp(body, 5, seq, 1, 2)
        sender.write(wire, body, seq)
    rx = FrameReader()
    receiver = Receiver(1, 0, lambda b, r, t: got.append(bytes(b)), 100, 0, True, 0)
    receiver.write_flow(bytearray(), 100)                   # the credit granted at attach
    rx.add_receiver(0, receiver)
    for i in range(0, len(wire), 777):
        assert rx.feed(bytes(wire[i:i + 777])) == []
    assert [read_stamp(b)[1] for b in got] == list(range(20)) and all(len(b) == 3000 for b in got)
    written = frames(bytes(rx.out))
    dispositions = [f for f in written if f[1].descriptor == 0x15]
    assert all(p.descriptor in (0x13, 0x15) for _, p, _ in written)
    first, last = dispositions[0][1].value[1], dispositions[-1][1].value[2]
    assert (first, last) == (0, 19) and dispositions[0][1].value[4] == Described(0x24, [])
    tx = FrameReader()
    tx.add_sender(1, sender)
    assert tx.feed(bytes(rx.out)) == []
    assert sink.confirms == [(seq, True) for seq in range(20)] and sender.outstanding == 0


def test_outcomes_map_to_ack_nack_and_return() -> None:
    sink = Sink()
    s = Sender(0, 0, False, False, 4096, 5, sink)
    out = bytearray()
    for seq in range(10, 16):
        s.write(out, bytes(24), seq)
    s.settle(2, 3, 0x25)                 # rejected
    s.settle(4, 4, 0x26)                 # released
    s.settle(0, 1)                       # accepted
    s.settle(5, 5, 0x27)                 # modified
    s.settle(0, 5)                       # already settled: nothing twice
    assert sink.confirms == [(12, False), (13, False), (14, True), (10, True), (11, True), (15, True)]
    assert [read_stamp(b)[:2] for b in sink.returns] == [(5, 14), (5, 15)]


def test_credit_follows_flow_frames() -> None:
    s = Sender(0, 0, True, False, 4096, 1, Sink())
    s.flow(0, 3)
    out = bytearray()
    assert s.send_batch(out, bytearray(24), 0, 10, 0) == 3 and s.credit == 0
    s.flow(2, 5)                         # the broker saw 2 of our 3: 5 more from its count → 4 from ours
    assert s.credit == 4
    tap = LatencyTap()
    rx = FrameReader()
    rx.add_receiver(0, Receiver(0, 0, tap, 0, 0, False, 0))
    rx.feed(bytes(out))
    seqs, t_int, t_sent, t_recv = (list(struct.unpack(f"{tap.count}q", c)) for c in tap.columns())
    assert seqs == [0, 1, 2] and all(a == b for a, b in zip(t_int, t_sent)) and min(t_recv) >= max(t_sent)


def test_receiver_tops_credit_up_at_half_the_window() -> None:
    r = Receiver(2, 0, lambda *a: None, 10, 0, True, 0)
    out = bytearray()
    r.write_flow(out, 10)
    ((_, flow, _),) = frames(bytes(out))
    assert flow.descriptor == 0x13 and flow.value[4:7] == [0, 0, 10]
    s = Sender(0, 0, False, False, 4096, 1, Sink())
    wire = bytearray()
    for seq in range(5):
        s.write(wire, bytes(24), seq)
    rx = FrameReader()
    rx.add_receiver(0, r)
    rx.feed(bytes(wire))
    kinds = [(p.descriptor, p.value) for _, p, _ in frames(bytes(rx.out))]
    assert [k for k, _ in kinds] == [0x15, 0x13] and kinds[1][1][5:7] == [5, 10]
    assert kinds[0][1][1:3] == [0, 4]


def test_an_early_refill_tops_up_at_the_end_of_a_read_once_its_last_flow_is_answered() -> None:
    r = Receiver(2, 0, lambda *a: None, 16, 0, True, 0)
    r.write_flow(bytearray(), 16)
    assert r.refill == 8 and r.awaiting                       # the default: half the window
    r.refill = 14                                              # early top-ups: once an eighth is used
    s = Sender(0, 0, False, False, 4096, 1, Sink())
    rx = FrameReader()
    rx.add_receiver(0, r)
    seq = 0

    def read(n: int) -> list[tuple[int, list[object]]]:
        nonlocal seq
        wire = bytearray()
        for _ in range(n):
            s.write(wire, bytes(24), seq)
            seq += 1
        del rx.out[:]
        assert rx.feed(bytes(wire)) == []
        return [(p.descriptor, p.value) for _, p, _ in frames(bytes(rx.out))]

    def broker_answers() -> list[tuple[int, list[object]]]:
        answer = bytearray()
        Receiver(0, 0, lambda *a: None, 16, 0, True, 0).write_flow(answer, 16)    # a flow on the link's channel
        del rx.out[:]
        assert rx.feed(bytes(answer)) == []                                        # taken in C, not by Python
        return [(p.descriptor, p.value) for _, p, _ in frames(bytes(rx.out))]

    assert [k for k, _ in read(2)] == [0x15]                  # 2 of 16 used, but the attach's flow is unanswered
    kinds = broker_answers()                                   # answered, credit 14: back to the window at once
    assert [k for k, _ in kinds] == [0x13] and kinds[0][1][5:7] == [2, 16] and r.awaiting
    assert [k for k, _ in read(1)] == [0x15]
    assert broker_answers() == [] and not r.awaiting          # 15 left: nothing to top up yet
    kinds = read(1)                                            # 14 left, last flow answered: settle, top up
    assert [k for k, _ in kinds] == [0x15, 0x13] and kinds[1][1][5:7] == [4, 16]
    assert r.credit == 16 and r.awaiting
    assert [k for k, _ in read(4)] == [0x15]                  # unanswered: no early flow ...
    assert [k for k, _ in read(4)] == [0x15, 0x13]            # ... but half the window used tops up regardless


def test_garbage_is_a_codec_error() -> None:
    with pytest.raises(CodecError):
        FrameReader().feed(b"\x00\x00\x00\x10\x00\x00\x00\x00" + bytes(8))


def test_the_unsettled_ring_grows_and_settles_out_of_order() -> None:
    """Deliveries settled in shuffled ranges while more are written (the ring grows past 1024)."""
    import random

    sink = Sink()
    s = Sender(0, 0, False, False, 4096, 1, sink)
    rng = random.Random(7)
    out = bytearray()
    written = settled_to = 0
    while written < 12000:
        for _ in range(rng.randint(1, 3000)):
            s.write(out, bytes(24), 1000 + written)
            written += 1
        del out[:]
        ranges = []
        while settled_to < written - rng.randint(0, 50):
            step = rng.randint(1, 40)
            ranges.append((settled_to, min(written, settled_to + step) - 1))
            settled_to = min(written, settled_to + step)
        rng.shuffle(ranges)
        for first, last in ranges:
            s.settle(first, last)
    s.settle(0, written - 1)
    assert sorted(seq for seq, _ in sink.confirms) == [1000 + i for i in range(written)]
    assert s.outstanding == 0


def _transfer_frame(channel: int, delivery_id: int, payload: bytes) -> bytes:
    """A transfer frame (handle 0, unsettled) carrying ``payload``, written with the general codec."""
    from rbench.codec.amqp10 import UInt, encode_value

    perf = encode_value(Described(0x14, [UInt(0), UInt(delivery_id), delivery_id.to_bytes(4, "big"), UInt(0), False]))
    body = perf + payload
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


@pytest.mark.parametrize(("header", "redelivered"), [
    (None, False),                                      # no header section
    ([False, None, None, True], False),                 # RabbitMQ 3.x, a first delivery: first-acquirer true
    ([False, None, None, False], True),                 # RabbitMQ 3.x, a redelivery: first-acquirer false
    ([True, None, None, True, 2], True),                # delivered twice before (delivery-count)
    ([True], False),                                    # neither field: the spec's defaults say nothing
])
def test_the_header_section_says_whether_a_delivery_is_a_redelivery(header: list[object] | None,
                                                                   redelivered: bool) -> None:
    from rbench.codec.amqp10 import UInt, encode_data, encode_value

    got: list[tuple[bytes, bool]] = []
    rx = FrameReader()
    rx.add_receiver(0, Receiver(0, 0, lambda b, r, t: got.append((bytes(b), r)), 10, 0, True, 0))
    fields = [UInt(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in header or []]
    section = encode_value(Described(0x70, fields)) if header is not None else b""
    rx.feed(_transfer_frame(0, 0, section + encode_data(b"body")))
    assert got == [(b"body", redelivered)]


def test_a_manual_receiver_reports_each_delivery_and_settles_only_when_told() -> None:
    """Simulated processing time: the receiver writes no disposition or flow of its own; the caller
    accepts ranges (one disposition each) and grants credit."""
    from rbench.codec.amqp10 import encode_data

    ids: list[int] = []
    r = Receiver(0, 0, lambda *a: None, 0, 0, True, 0, True)
    r.on_delivery = lambda delivery_id, t: ids.append(delivery_id)
    with pytest.raises(ValueError, match="window must be 0"):
        Receiver(0, 0, lambda *a: None, 10, 0, True, 0, True)
    rx = FrameReader()
    rx.add_receiver(0, r)
    rx.feed(b"".join(_transfer_frame(0, i, encode_data(b"x")) for i in range(4)))
    assert ids == [0, 1, 2, 3] and rx.out == bytearray() and r.pending == 0
    out = bytearray()
    r.accept(out, 0, 2)
    ((_, disposition, _),) = frames(bytes(out))
    assert disposition.descriptor == 0x15 and disposition.value[:4] == [True, 0, 2, True]


def test_stream_offset_filter_names_each_offset_form_as_rabbitmq_4_reads_it() -> None:
    from rbench.codec.amqp10 import Described, Symbol, Timestamp, ULong
    from rbench.drivers.amqp10 import STREAM_OFFSET_SPEC, stream_offset_filter
    from rbench.errors import ConfigError

    assert STREAM_OFFSET_SPEC == Symbol("rabbitmq:stream-offset-spec")
    for offset, value in (("first", "first"), ("last", "last"), ("next", "next"), ("offset:42", ULong(42)),
                          ("timestamp:1700000000000", Timestamp(1700000000000))):
        (key, described), = stream_offset_filter(offset).items()
        assert key == STREAM_OFFSET_SPEC and isinstance(described, Described)
        assert described.descriptor == STREAM_OFFSET_SPEC and described.value == value
    with pytest.raises(ConfigError, match="consumer.offset: expected first, last, next"):
        stream_offset_filter("offset:-1")


class Owner:
    """The Python side of a FrameReader used as the transport's protocol: what it is told."""

    def __init__(self) -> None:
        self.got: list[tuple[int, int, bytes]] = []
        self.errors: list[CodecError] = []

    def frames(self, frames: list[tuple[int, int, bytes]]) -> None:
        self.got.extend(frames)

    def protocol_error(self, exc: CodecError) -> None:
        self.errors.append(exc)


class Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytearray) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return False


def test_as_the_protocol_a_read_of_transfers_is_settled_and_written_without_the_owner() -> None:
    """The reader is the transport's protocol: link frames are answered and written in the same read; only
    the rare frames (here an empty-bodied performative on an unregistered channel) reach the owner."""
    owner = Owner()
    rx = FrameReader(owner)
    transport = Transport()
    rx.transport = transport
    s = Sender(0, 0, False, False, 4096, 1, Sink())
    s.flow(0, 10)
    wire = bytearray()
    s.send_batch(wire, bytearray(24), 0, 4, 0)
    r = Receiver(0, 0, LatencyTap(), 10, 0, True, 0)
    r.write_flow(bytearray(), 10)
    rx.add_receiver(0, r)
    rx.data_received(bytes(wire))
    ((channel, perf, _),) = frames(transport.writes[0])
    assert len(transport.writes) == 1 and perf.descriptor == 0x15 and perf.value[1:3] == [0, 3]
    assert owner.got == [] and rx.reads == 1 and rx.wrote and rx.out == bytearray()
    other = struct.pack(">IBBH", 8 + 4, 2, 0, 9) + b"\x00\x53\x10\x45"        # an open on channel 9
    rx.data_received(other)
    assert owner.got == [(9, 0, b"\x00\x53\x10\x45")] and len(transport.writes) == 1
    rx.data_received(b"\x00\x00\x00\x10\x00\x00\x00\x00" + bytes(8))              # data offset 0: garbage
    assert len(owner.errors) == 1


def _deliver_five(tap: LatencyTap) -> None:
    """Five messages sent by a Sender and received through a FrameReader into ``tap``."""
    s = Sender(0, 0, True, False, 4096, 1, Sink())
    s.flow(0, 5)
    wire = bytearray()
    s.send_batch(wire, bytearray(24), 0, 5, 0)
    rx = FrameReader()
    rx.add_receiver(0, Receiver(0, 0, tap, 0, 0, False, 0))
    rx.feed(bytes(wire))


def test_a_latency_tap_publishes_its_count_into_a_shared_buffer() -> None:
    import ctypes

    shared = ctypes.c_longlong(-1)
    tap = LatencyTap()
    tap.publish_count(shared)
    assert shared.value == 0
    _deliver_five(tap)
    assert shared.value == tap.count == 5
    with pytest.raises(ValueError):
        LatencyTap().publish_count(ctypes.c_int(0))          # 4 bytes: too small for the count


def test_a_latency_tap_wakes_a_waiter_through_a_pipe_once_the_count_it_asked_for_is_reached() -> None:
    import ctypes
    import os

    shared = (ctypes.c_longlong * 2)()
    r, w = os.pipe()
    try:
        os.set_blocking(r, False)
        tap = LatencyTap()
        tap.publish_count(shared, w)
        shared[1] = 3                                       # a sender waits for the third message
        _deliver_five(tap)
        assert shared[0] == 5 and shared[1] == 0            # reached: the request cleared ...
        assert os.read(r, 16) == b"w"                       # ... and one byte written, not one per message
        with pytest.raises(ValueError):
            LatencyTap().publish_count(ctypes.c_longlong(0), w)     # 8 bytes: no room for the request
    finally:
        os.close(r)
        os.close(w)
