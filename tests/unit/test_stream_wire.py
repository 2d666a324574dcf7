"""Stream driver pieces that need no broker: URIs, arguments, offsets, framing, chunk parsing."""
from __future__ import annotations

import asyncio
import struct
import zlib
from typing import Any

import pytest
from rstream.constants import OffsetType

from rbench.codec._stream import PublishFrame, confirm_each
from rbench.config.types import ClusterTarget, ConsumerSpec, PublisherSpec, QueueDecl
from rbench.drivers.base import DRIVERS
from rbench.drivers.stream import create_arguments, stream_uris
from rbench.drivers.stream_consumer import StreamConsumer, parse_offset, start_offset, store_offset_frame
from rbench.drivers.stream_publisher import StreamPublisher
from rbench.drivers.stream_wire import (
    FRAME_MAX,
    StreamProtocol,
    consumer_update_response,
    decode_amqp_data,
    encode_amqp_data,
    iter_records,
    parse_stream_uri,
    stream_uri_from_amqp,
)
from rbench.errors import ConfigError
from tests.loops import LoopRunner


def test_registered_as_stream_driver() -> None:
    assert DRIVERS["stream"] == "rbench.drivers.stream:StreamDriver"


@pytest.mark.parametrize("amqp, expected", [
    ("amqp://guest:guest@127.0.0.1:5672/", "rabbitmq-stream://guest:guest@127.0.0.1:5552/"),
    ("amqp://u:p%40ss@broker.example:5672/%2Fprod", "rabbitmq-stream://u:p%40ss@broker.example:5552/%2Fprod"),
    ("amqp://rabbit", "rabbitmq-stream://rabbit:5552/"),
    ("amqps://u:p@[::1]:5671/v", "rabbitmq-stream://u:p@[::1]:5552/v"),
])
def test_stream_uri_is_derived_from_amqp_uri(amqp: str, expected: str) -> None:
    assert stream_uri_from_amqp(amqp) == expected


def test_stream_uri_is_not_guessed_from_a_non_default_amqp_port() -> None:
    """issue 11: `stream-publish --uri amqp://…:5999` used 5552 and then blamed the credentials."""
    with pytest.raises(ConfigError) as info:
        stream_uri_from_amqp("amqp://guest:topsecret@127.0.0.1:5999/")
    assert "AMQP port 5999 is not the default" in str(info.value) and "rabbitmq-stream://" in str(info.value)
    assert "topsecret" not in str(info.value)


def test_stream_uris_prefer_explicit_ones() -> None:
    t = ClusterTarget("c", ("amqp://a:b@h1/",), stream_uris=("rabbitmq-stream://x:y@h2:7000/",))
    assert stream_uris(t) == ("rabbitmq-stream://x:y@h2:7000/",)
    assert stream_uris(ClusterTarget("c", ("amqp://a:b@h1/",))) == ("rabbitmq-stream://a:b@h1:5552/",)
    with pytest.raises(ConfigError):
        stream_uris(ClusterTarget("c", ()))


@pytest.mark.parametrize("uri, parsed", [
    ("rabbitmq-stream://guest:guest@127.0.0.1:5552/", ("127.0.0.1", 5552, "guest", "guest", "/")),
    ("rabbitmq-stream://u:p%2Fw@h/%2F", ("h", 5552, "u", "p/w", "/")),
    ("rabbitmq-stream://u:p@h:1234/prod", ("h", 1234, "u", "p", "prod")),
])
def test_parse_stream_uri(uri: str, parsed: tuple[Any, ...]) -> None:
    assert parse_stream_uri(uri) == parsed


def test_bad_stream_uri_is_a_config_error_without_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        parse_stream_uri("amqp://u:topsecret@h/")
    assert "topsecret" not in str(info.value)


def test_create_arguments_map_x_arguments_to_stream_names() -> None:
    q = QueueDecl("s", arguments=(("x-queue-type", "stream"), ("x-max-length-bytes", 20_000_000),
                                  ("x-max-age", "7D"), ("x-stream-max-segment-size-bytes", 500_000),
                                  ("x-initial-cluster-size", 3)))
    assert create_arguments(q) == {"max-length-bytes": "20000000", "max-age": "7D",
                                   "stream-max-segment-size-bytes": "500000", "initial-cluster-size": "3"}
    with pytest.raises(ConfigError, match="x-message-ttl"):
        create_arguments(QueueDecl("s", arguments=(("x-queue-type", "stream"), ("x-message-ttl", 5))))


@pytest.mark.parametrize("text, expected", [
    ("first", (1, None)), ("last", (2, None)), ("next", (3, None)), ("NEXT", (3, None)),
    ("offset:0", (4, 0)), ("offset:42", (4, 42)), ("timestamp:1700000000000", (5, 1700000000000)),
])
def test_parse_offset(text: str, expected: tuple[int, int | None]) -> None:
    assert parse_offset(text) == expected


@pytest.mark.parametrize("text", ["", "begin", "offset:", "offset:-1", "offset:x", "timestamp", "ts:5"])
def test_bad_offset_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="offset"):
        parse_offset(text)


# ------------------------------------------------------------- AMQP 1.0 bodies

@pytest.mark.parametrize("size", [0, 10, 255, 256, 70_000])
def test_amqp_data_round_trip(size: int) -> None:
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert bytes(decode_amqp_data(encode_amqp_data(body))) == body


def test_publisher_writes_data_sections_byte_identical_to_the_codec(run: LoopRunner) -> None:
    """The inline data-section prefix and the codec/fallback encoder agree byte for byte."""
    proto = FakeProto()

    async def go() -> None:
        pub = StreamPublisher(proto, "s", PublisherSpec(0, "s", message_format="amqp"), NullSink())  # type: ignore[arg-type]
        pub.publish(b"0123456789", 5)
        pub.publish(b"y" * 300, 6)
        pub.flush()
    run(go())
    (frame,) = proto.frames
    msgs = parse_publish(frame)
    assert msgs == [(5, encode_amqp_data(b"0123456789")), (6, encode_amqp_data(b"y" * 300))]


@pytest.mark.parametrize("size", [0, 1, 255, 256, 70_000])
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_c_frame_builder_matches_the_codec_for_every_size_and_buffer_type(size: int, kind: type) -> None:
    """ext/codec/stream.pyx writes the data section itself: vbin8 below 256 bytes, vbin32 above."""
    body = bytes((i * 7) & 0xFF for i in range(size))
    firsts: list[int] = []
    frame = PublishFrame(3, 1 << 20, True, lambda: firsts.append(1), lambda need: None)
    frame.add(kind(body), 2**64 - 1)
    frame.add(kind(body), 0)
    assert frame.count == 2 and firsts == [1]            # on_first once per frame
    out = frame.take()
    assert frame.count == 0 and frame.take() is None
    size_, key, version, pid, count = struct.unpack_from(">IHHBI", out)
    assert (size_, key, version, pid, count) == (len(out) - 4, 2, 1, 3, 2)
    first_len = struct.unpack_from(">I", out, 13 + 8)[0]
    assert out[13 + 12:13 + 12 + first_len] == encode_amqp_data(body)
    assert struct.unpack_from(">Q", out, 13)[0] == 2**64 - 1


def test_confirm_each_refuses_a_frame_shorter_than_its_count() -> None:
    got: list[tuple[int, bool, int]] = []
    confirm_each(struct.pack(">QQ", 7, 9), 0, 2, lambda *a: got.append(a), 42)
    assert got == [(7, True, 42), (9, True, 42)]
    with pytest.raises(ValueError, match="do not fit"):
        confirm_each(struct.pack(">Q", 7), 0, 2, lambda *a: None, 0)


# ------------------------------------------------------------- publisher framing and confirms

class FakeProto:
    _writable = None
    closed = None
    frame_max = FRAME_MAX

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, data: bytes | bytearray) -> None:
        self.frames.append(bytes(data))


class NullSink:
    def __init__(self) -> None:
        self.confirms: list[tuple[int, bool]] = []

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        self.confirms.append((seq, acked))

    def on_return(self, body: Any, t_ns: int) -> None:
        raise AssertionError


def parse_publish(frame: bytes) -> list[tuple[int, bytes]]:
    size, key, version, pid, count = struct.unpack_from(">IHHBI", frame)
    assert (size, key, version, pid) == (len(frame) - 4, 2, 1, 0)
    out, pos = [], 13
    for _ in range(count):
        pub_id, n = struct.unpack_from(">QI", frame, pos)
        out.append((pub_id, frame[pos + 12:pos + 12 + n]))
        pos += 12 + n
    assert pos == len(frame)
    return out


def test_messages_of_one_loop_turn_share_a_frame_and_confirms_map_to_seq(run: LoopRunner) -> None:
    proto, sink = FakeProto(), NullSink()

    async def go() -> int:
        pub = StreamPublisher(proto, "s", PublisherSpec(0, "s", confirm=True, message_format="binary"), sink)  # type: ignore[arg-type]
        body = bytearray(b"a" * 24)
        for seq in (10, 11, 12):
            pub.publish(body, seq)
            body[0] += 1                     # the runtime reuses its buffer: publish must have copied
        await asyncio.sleep(0)               # the frame goes out at the end of the loop turn
        assert len(proto.frames) == 1
        pub.on_confirm(struct.pack(">QQ", 12, 10), 0, 2)
        pub.on_error(struct.pack(">QH", 11, 17), 0, 1)
        return await pub.drain(0.1)

    assert run(go()) == 0
    assert parse_publish(proto.frames[0]) == [(10, b"a" * 24), (11, b"b" + b"a" * 23), (12, b"c" + b"a" * 23)]
    assert sink.confirms == [(12, True), (10, True), (11, False)]


def test_drain_reports_unconfirmed_messages_after_its_timeout(run: LoopRunner) -> None:
    proto, sink = FakeProto(), NullSink()

    async def go() -> int:
        pub = StreamPublisher(proto, "s", PublisherSpec(0, "s", confirm=True), sink)  # type: ignore[arg-type]
        for seq in range(3):
            pub.publish(b"x", seq)
        pub.on_confirm(struct.pack(">Q", 0), 0, 1)
        return await pub.drain(0.05)

    assert run(go()) == 2


def test_confirm_window_blocks_ready_until_confirms_arrive(run: LoopRunner) -> None:
    proto, sink = FakeProto(), NullSink()

    async def go() -> None:
        pub = StreamPublisher(proto, "s", PublisherSpec(0, "s", confirm=True, confirm_window=2), sink)  # type: ignore[arg-type]
        pub.publish(b"x", 0)
        pub.publish(b"x", 1)
        waiter = asyncio.ensure_future(pub.ready())
        await asyncio.sleep(0.01)
        assert not waiter.done()
        pub.on_confirm(struct.pack(">Q", 0), 0, 1)
        await asyncio.wait_for(waiter, 1)

    run(go())


def test_large_batches_are_split_below_frame_max(run: LoopRunner) -> None:
    proto, sink = FakeProto(), NullSink()
    proto.frame_max = 128 * 1024

    async def go() -> None:
        pub = StreamPublisher(proto, "s", PublisherSpec(0, "s", message_format="binary"), sink)  # type: ignore[arg-type]
        for seq in range(100):
            pub.publish(b"z" * 10_000, seq)
        pub.flush()

    run(go())
    assert len(proto.frames) > 1 and all(len(f) <= 128 * 1024 for f in proto.frames)
    assert [i for f in proto.frames for i, _ in parse_publish(f)] == list(range(100))


# ------------------------------------------------------------- chunks and frame reassembly

def chunk(first_offset: int, records: list[bytes], sub_batch: list[bytes] | None = None, gzip: bool = False) -> bytes:
    data = b"".join(struct.pack(">I", len(r)) + r for r in records)
    entries = len(records)
    if sub_batch is not None:
        inner = b"".join(struct.pack(">I", len(r)) + r for r in sub_batch)
        blob = zlib.compress(inner, wbits=31) if gzip else inner
        data += struct.pack(">BHII", 0x80 | ((1 if gzip else 0) << 4), len(sub_batch), len(inner), len(blob)) + blob
        entries += 1
    nrec = len(records) + len(sub_batch or [])
    head = struct.pack(">bbHIqQQiIII", 0x50, 0, entries, nrec, 1_700_000_000_000, 1, first_offset, 0, len(data), 0, 0)
    return head + data


def deliver(sub_id: int, chunk_bytes: bytes) -> bytes:
    body = struct.pack(">HHB", 8, 1, sub_id) + chunk_bytes
    return struct.pack(">I", len(body)) + body


@pytest.mark.parametrize("gzip", [False, True])
def test_iter_records_reads_simple_entries_and_sub_batches(gzip: bool) -> None:
    raw = chunk(100, [b"one", b"two"], sub_batch=[b"three", b"four"], gzip=gzip)
    first, ts, recs = iter_records(raw, 0, len(raw))
    assert (first, ts) == (100, 1_700_000_000_000)
    assert [bytes(raw[r[0]:r[1]]) if isinstance(r, tuple) else r for r in recs] == [b"one", b"two", b"three", b"four"]


def make_consumer(offset: str = "first", fmt: str = "binary") -> tuple[StreamConsumer, list[bytes], FakeProto]:
    got: list[bytes] = []
    proto = FakeProto()
    c = StreamConsumer(proto, ConsumerSpec(0, "s", offset=offset, message_format=fmt),  # type: ignore[arg-type]
                       lambda b, r, t: got.append(bytes(b)))
    return c, got, proto


def test_offset_n_skips_the_start_of_its_chunk_and_credit_is_returned_per_chunk() -> None:
    c, got, proto = make_consumer("offset:12")
    raw = chunk(10, [b"m10", b"m11", b"m12", b"m13"])
    c.on_chunk(raw, 0, len(raw))
    raw = chunk(14, [b"m14"])
    c.on_chunk(raw, 0, len(raw))
    assert got == [b"m12", b"m13", b"m14"]
    assert c.next_offset == 15
    assert proto.frames == [struct.pack(">IHHBH", 7, 9, 1, 0, 1)] * 2


class NothingStoredProto(FakeProto):
    """Answers QueryOffset as a broker that holds no offset for the group (NO_OFFSET, 19)."""

    def next_corr(self) -> int:
        return 1

    async def request(self, frame: Any, doing: str, ok_codes: tuple[int, ...] = (1,)) -> Any:
        assert frame.reference == "g" and 19 in ok_codes
        return type("QueryOffsetResponse", (), {"response_code": 19, "offset": 0})()


def test_a_member_taking_over_starts_after_the_stored_offset_or_what_it_handled() -> None:
    first, nxt, offset = int(OffsetType.FIRST), int(OffsetType.NEXT), int(OffsetType.OFFSET)
    assert start_offset(first, None, None, None) == (first, None)        # nothing stored: its own spec
    assert start_offset(nxt, None, None, None) == (nxt, None)
    assert start_offset(first, None, 41, None) == (offset, 42)           # right after the group's store
    assert start_offset(nxt, None, 41, None) == (offset, 42)
    assert start_offset(first, None, 41, 50) == (offset, 50)             # it handled more than was stored
    assert start_offset(first, None, None, 7) == (offset, 7)
    assert start_offset(offset, 100, 41, None) == (offset, 100)          # never before its offset:N
    assert start_offset(offset, 10, 41, None) == (offset, 42)


def test_single_active_member_stores_its_offset_at_most_once_a_second_and_when_closing(run: LoopRunner) -> None:
    async def go() -> tuple[list[bytes], list[bytes]]:
        proto = NothingStoredProto()
        got: list[bytes] = []
        c = StreamConsumer(proto, ConsumerSpec(0, "s", single_active=True, extra={"name": "g"},  # type: ignore[arg-type]
                                               message_format="binary"),
                           lambda b, r, t: got.append(bytes(b)))
        c.on_consumer_update(7, True)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert c.active and proto.frames[-1] == consumer_update_response(7, int(OffsetType.FIRST), None)
        for first in (0, 2):
            raw = chunk(first, [b"a", b"b"])
            c.on_chunk(raw, 0, len(raw))
        stores = [f for f in proto.frames if f[4:6] == b"\x00\x0a"]
        assert stores == [store_offset_frame("g", "s", 1)]                # the first chunk; the second within 1 s
        c._closing = True                                                 # what aclose() does first
        c.store()
        raw = chunk(4, [b"late"])
        c.on_chunk(raw, 0, len(raw))                                      # after the last store: dropped
        return [f for f in proto.frames if f[4:6] == b"\x00\x0a"], got

    stores, got = run(go())
    assert stores == [store_offset_frame("g", "s", 1), store_offset_frame("g", "s", 3)]
    assert got == [b"a", b"b", b"a", b"b"]


def test_store_offset_frame_layout() -> None:
    assert store_offset_frame("g", "st", 5) == struct.pack(">IHHH1sH2sQ", 19, 10, 1, 1, b"g", 2, b"st", 5)
    assert consumer_update_response(9, 4, 2) == struct.pack(">IHHIHHQ", 20, 0x801A, 1, 9, 1, 4, 2)


class Recorder:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.stream = "s"

    def on_chunk(self, data: bytes, pos: int, end: int) -> None:
        _, _, recs = iter_records(data, pos, end)
        self.bodies += [bytes(data[a:b]) for a, b in recs]  # type: ignore[misc]

    def on_connection_lost(self, err: Exception) -> None:
        pass


@pytest.mark.parametrize("step", [1, 3, 7, 64, 10_000])
def test_frames_are_reassembled_whatever_the_read_sizes(step: int, run: LoopRunner) -> None:
    async def go() -> list[bytes]:
        proto = StreamProtocol("t")
        rec = Recorder()
        proto.subscribers[3] = rec
        stream = (deliver(3, chunk(0, [b"first", b"x" * 5000])) + struct.pack(">IHH", 4, 23, 1)
                  + deliver(3, chunk(2, [b"last"])))
        for i in range(0, len(stream), step):
            proto.data_received(stream[i:i + step])
        return rec.bodies

    assert run(go()) == [b"first", b"x" * 5000, b"last"]


def test_amqp_consumer_hands_over_the_data_section() -> None:
    c, got, _ = make_consumer("first", fmt="amqp")
    raw = chunk(0, [encode_amqp_data(b"stamped-body"), encode_amqp_data(b"z" * 1000)])
    c.on_chunk(raw, 0, len(raw))
    assert got == [b"stamped-body", b"z" * 1000]


def test_data_decoder_reads_what_qpid_proton_encodes() -> None:
    """An independent AMQP 1.0 implementation as the oracle for the section walker."""
    proton = pytest.importorskip("proton")
    msg = proton.Message(body=b"stamp-and-body", inferred=True, id="m-1", subject="s", durable=True,
                         properties={"k": 1, "n": "v"}, annotations={proton.symbol("x-opt"): 5})
    encoded = msg.encode()
    assert bytes(decode_amqp_data(encoded)) == b"stamp-and-body"
    back = proton.Message()
    back.decode(encode_amqp_data(b"\x00" * 24 + b"payload"))
    assert bytes(back.body) == b"\x00" * 24 + b"payload"


def test_amqp_consumer_skips_and_counts_messages_that_are_not_amqp() -> None:
    c, got, _ = make_consumer("first", fmt="amqp")
    raw = chunk(0, [encode_amqp_data(b"good-1"), b"\x99not amqp", encode_amqp_data(b"good-2")])
    c.on_chunk(raw, 0, len(raw))
    assert got == [b"good-1", b"good-2"] and c.malformed == 1


def test_a_message_larger_than_frame_max_is_refused_at_publish(run: LoopRunner) -> None:
    proto, sink = FakeProto(), NullSink()
    proto.frame_max = 4096

    async def go() -> None:
        pub = StreamPublisher(proto, "s", PublisherSpec(0, "s", message_format="binary"), sink)  # type: ignore[arg-type]
        pub.publish(b"a" * 4000, 0)
        pub.publish(b"b" * 4000, 1)          # does not fit with the first: the first goes out alone
        assert len(proto.frames) == 1
        with pytest.raises(ConfigError, match="frame_max"):
            pub.publish(b"c" * 5000, 2)
        pub.flush()

    run(go())
    assert [i for f in proto.frames for i, _ in parse_publish(f)] == [0, 1]
    assert all(len(f) <= 4096 for f in proto.frames)


def test_a_credit_error_at_the_end_of_a_read_fails_its_subscription_only(run: LoopRunner) -> None:
    """The credit response (key 0x8009) has no correlation id: 7 bytes after the size. Read as a correlated
    response it raised struct.error when it ended a read (RabbitMQ 4.0 sends it for credit given to a
    subscription just closed, in the single-active-consumer hand-over), and the transport died."""
    lost: list[Exception] = []

    class Sub(Recorder):
        def on_connection_lost(self, err: Exception) -> None:
            lost.append(err)

    async def go() -> None:
        proto = StreamProtocol("t")
        proto.subscribers[3] = Sub()
        proto.data_received(struct.pack(">IHHHB", 7, 0x8009, 1, 4, 3))       # 4: subscription id does not exist
        assert len(lost) == 1 and "credit" in str(lost[0])
        proto.data_received(struct.pack(">IHHHB", 7, 0x8009, 1, 4, 9))       # another subscription's: nothing
        assert len(lost) == 1

    run(go())
