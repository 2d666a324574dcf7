"""AMQP 0-9-1 codec: differential against pamqp (aio-pika's codec), frames, malformed input, fuzz."""
from __future__ import annotations

import datetime
import decimal
import inspect
import random
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pamqp import commands as pc
from pamqp import decode as pdecode
from pamqp import encode as pencode
from pamqp import frame as pframe
from pamqp import header as pheader

from rbench.codec import amqp091 as c
from rbench.errors import CodecError

NAME = st.text(alphabet=string.ascii_letters + string.digits + "-_.:", max_size=40)
UTC = datetime.timezone.utc


def _norm(v):
    """Compare values across codecs: bytearray == bytes, tuples as lists, nested."""
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return v


# values pamqp and we both encode the same way (no float: pamqp writes 'f', we write 'd')
scalar = st.one_of(
    st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=20), st.none(),
    st.binary(max_size=20).map(bytearray),
    st.datetimes(min_value=datetime.datetime(1971, 1, 1), max_value=datetime.datetime(2100, 1, 1))
    .map(lambda d: d.replace(microsecond=0, tzinfo=UTC)),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-1000, max_value=1000),
)
field_value = st.recursive(scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(NAME, inner, max_size=4)), max_leaves=12)
field_table = st.dictionaries(NAME, field_value, max_size=6)


def _arg_strategy(name: str, t: str):
    if name == "ticket":
        return st.just(0)
    if name in ("capabilities", "known_hosts", "cluster_id"):
        return st.just("")
    if name == "out_of_band":
        return st.just("0")
    if name == "insist":
        return st.just(False)
    if name == "channel_id":
        return st.just("0")
    if name == "exchange_type":
        return st.sampled_from(["direct", "topic", "fanout", "headers"])
    return {
        "o": st.integers(0, 255), "s": st.integers(0, 65535), "l": st.integers(0, 2**32 - 1),
        "L": st.integers(0, 2**63 - 1),  # pamqp reads longlong signed: see test_longlong_is_unsigned
        "S": NAME, "X": st.text(string.ascii_letters, max_size=30),
        "b": st.booleans(), "F": field_table,
    }[t]


def _pamqp_class(name: str):
    cls_name, method = name.split(".")
    return getattr(getattr(pc, cls_name), method)


@st.composite
def method_and_args(draw):
    key = draw(st.sampled_from(sorted(c.METHODS)))
    name, fields, types = c.METHODS[key]
    args = tuple(draw(_arg_strategy(f, chr(t))) for f, t in zip(fields, types))
    return key, args


def test_every_method_has_a_pamqp_twin() -> None:
    for key, (name, fields, _) in c.METHODS.items():
        cls = _pamqp_class(name)
        assert cls.index == key, name
        params = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
        assert params == list(fields), name
    # and every pamqp method class is covered
    for cls_name in ("Connection", "Channel", "Exchange", "Queue", "Basic", "Confirm", "Tx"):
        group = getattr(pc, cls_name)
        for attr in vars(group).values():
            if inspect.isclass(attr) and hasattr(attr, "index") and attr.__module__ == pc.__name__:
                if attr.__name__ == "Properties":
                    continue
                assert attr.index in c.METHODS, attr.name


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(method_and_args(), st.integers(0, 65535))
def test_methods_match_pamqp_both_ways(km, channel: int) -> None:
    key, args = km
    name, fields, _ = c.METHODS[key]
    cls = _pamqp_class(name)
    ours = c.encode_method(channel, key, args)
    # ours -> pamqp
    consumed, ch, obj = pframe.unmarshal(ours)
    assert consumed == len(ours) and ch == channel and obj.index == key
    for f, v in zip(fields, args):
        assert _norm(getattr(obj, f)) == _norm(v), (name, f)
    # pamqp -> ours, and byte equality when both pick the same field types
    theirs = pframe.marshal(cls(**dict(zip(fields, args))), channel)
    frames = c.split_frames(theirs)
    assert len(frames) == 1 and frames[0][:2] == (1, channel)
    k2, decoded = c.decode_method(frames[0][2])
    assert k2 == key
    assert _norm(decoded) == _norm(args)
    if "F" not in fields and all(not isinstance(a, dict) for a in args):
        assert ours == theirs, name


# pamqp drops falsy properties ('' , 0, {}): generate only values it keeps
S1 = st.text(alphabet=string.ascii_letters + string.digits + "-_.:", min_size=1, max_size=40)
props_strategy = st.fixed_dictionaries({}, optional={
    "content_type": S1, "content_encoding": S1, "headers": st.dictionaries(NAME, field_value, min_size=1, max_size=6),
    "delivery_mode": st.sampled_from([1, 2]), "priority": st.integers(1, 9), "correlation_id": S1,
    "reply_to": S1, "expiration": st.integers(0, 10**6).map(str), "message_id": S1,
    "timestamp": st.datetimes(min_value=datetime.datetime(1971, 1, 1), max_value=datetime.datetime(2100, 1, 1))
    .map(lambda d: d.replace(microsecond=0, tzinfo=UTC)),
    "message_type": S1, "user_id": S1, "app_id": S1,  # cluster_id: pamqp insists on empty
})


@settings(max_examples=400, deadline=None)
@given(props_strategy, st.integers(0, 2**40), st.integers(1, 65535))
def test_content_header_matches_pamqp_both_ways(props, body_size: int, channel: int) -> None:
    ours = c.encode_header(channel, body_size, props)
    consumed, ch, hdr = pframe.unmarshal(ours)
    assert ch == channel and hdr.body_size == body_size
    for k, v in props.items():
        assert _norm(getattr(hdr.properties, k)) == _norm(v), k
    theirs = pframe.marshal(pheader.ContentHeader(0, body_size, pc.Basic.Properties(**props)), channel)
    (ftype, ch2, payload), = c.split_frames(theirs)
    class_id, size, decoded = c.decode_header(payload)
    assert (ftype, ch2, class_id, size) == (2, channel, 60, body_size)
    assert _norm(decoded) == _norm(props)
    if "headers" not in props:
        assert ours == theirs


EVERY_TYPE = {
    "t": (c.TypedValue("t", True), True), "b": (c.TypedValue("b", -5), -5), "B": (c.TypedValue("B", 250), 250),
    "s": (c.TypedValue("s", -300), -300), "u": (c.TypedValue("u", 65000), 65000),
    "I": (c.TypedValue("I", -70000), -70000), "i": (c.TypedValue("i", 4_000_000_000), 4_000_000_000),
    "l": (c.TypedValue("l", -(2**40)), -(2**40)), "f": (c.TypedValue("f", 1.5), 1.5),
    "d": (c.TypedValue("d", 2.25), 2.25), "D": (c.TypedValue("D", decimal.Decimal("12.345")), decimal.Decimal("12.345")),
    "S": (c.TypedValue("S", "héllo"), "héllo"), "x": (c.TypedValue("x", b"\x00\xff"), b"\x00\xff"),
    "A": (c.TypedValue("A", [1, "a", [2]]), [1, "a", [2]]),
    "T": (c.TypedValue("T", 1_700_000_000), datetime.datetime.fromtimestamp(1_700_000_000, UTC)),
    "F": (c.TypedValue("F", {"k": {"n": None}}), {"k": {"n": None}}), "V": (c.TypedValue("V", None), None),
}


def test_every_field_type_letter_against_pamqp() -> None:
    table = {k: v[0] for k, v in EVERY_TYPE.items()}
    expect = {k: v[1] for k, v in EVERY_TYPE.items()}
    raw = c.encode_table(table)
    # the letters on the wire are the ones asked for
    decoded, end = c.decode_table(raw)
    assert end == len(raw) and _norm(decoded) == _norm(expect)
    n, theirs = pdecode.field_table(raw)
    assert n == len(raw) and _norm(theirs) == _norm(expect)
    for letter in EVERY_TYPE:
        one = c.encode_table({"v": table[letter]})
        assert one[4 + 2] == ord(letter)


@settings(max_examples=300, deadline=None)
@given(field_table)
def test_tables_match_pamqp_both_ways(table) -> None:
    ours = c.encode_table(table)
    n, theirs_decoded = pdecode.field_table(ours)
    assert n == len(ours) and _norm(theirs_decoded) == _norm(table)
    theirs = pencode.field_table(table)
    decoded, end = c.decode_table(theirs)
    assert end == len(theirs) and _norm(decoded) == _norm(table)


def test_float_is_double_and_pamqp_single_decodes() -> None:
    assert c.decode_table(c.encode_table({"x": 0.1}))[0] == {"x": 0.1}
    assert c.decode_table(pencode.field_table({"x": 0.5}))[0] == {"x": 0.5}


# ---- frames --------------------------------------------------------------------------------
class Collect:
    def __init__(self) -> None:
        self.methods: list = []
        self.contents: list = []
        self.heartbeats = 0
        self.delivered: list = []
        self.acks: list = []

    def reader(self, frame_max: int = 131072) -> c.FrameReader:
        return c.FrameReader(lambda ch, k, a: self.methods.append((ch, k, a)),
                             lambda ch, k, a, p, b: self.contents.append((ch, k, a, p, b)),
                             self._hb, frame_max=frame_max, capacity=frame_max + 8)

    def _hb(self) -> None:
        self.heartbeats += 1


def _deliver(channel: int, tag: int, body: bytes, props=None, frame_max: int = 131072) -> bytes:
    return (c.encode_method(channel, c.K.BASIC_DELIVER, ("ctag", tag, tag % 2 == 0, "ex", "rk"))
            + c.encode_header(channel, len(body), props or {}) + c.encode_body(channel, body, frame_max))


def test_stream_split_at_every_byte_and_bodies_across_frames() -> None:
    fm = 4096
    big = bytes(random.Random(1).randbytes(3 * fm + 17))
    stream = (c.encode_method(0, c.K.CONNECTION_TUNE, (2047, 131072, 60)) + c.encode_heartbeat()
              + _deliver(1, 1, big, {"headers": {"a": 1}}, fm) + _deliver(2, 2, b"") + _deliver(1, 3, b"x" * 10))
    assert sum(1 for f in c.split_frames(stream) if f[0] == 3) == 5   # 4 for big, 1 for x*10
    for cut in range(1, len(stream), 97):
        col = Collect()
        r = col.reader(fm)
        r.feed_bytes(stream[:cut])
        r.feed_bytes(stream[cut:])
        assert col.methods == [(0, c.K.CONNECTION_TUNE, (2047, 131072, 60))]
        assert col.heartbeats == 1
        assert [(ch, a[1], b) for ch, k, a, p, b in col.contents] == [(1, 1, big), (2, 2, b""), (1, 3, b"x" * 10)]
        assert col.contents[0][3] == {"headers": {"a": 1}}


def test_byte_by_byte_feed_and_fast_paths() -> None:
    col = Collect()
    r = col.reader()
    r.set_deliver_handler(5, lambda tag, red, body, t: col.delivered.append((tag, red, body)))
    r.set_ack_handler(5, lambda tag, multiple, acked: col.acks.append((tag, multiple, acked)))
    stream = (_deliver(5, 7, b"hello") + c.encode_method(5, c.K.BASIC_ACK, (9, True))
              + c.encode_method(5, c.K.BASIC_NACK, (10, False, False)) + _deliver(6, 8, b"other"))
    for i in range(len(stream)):
        r.feed_bytes(stream[i:i + 1])
    assert col.delivered == [(7, False, b"hello")]
    assert col.acks == [(9, True, True), (10, False, False)]
    assert [(ch, a[1], b) for ch, k, a, p, b in col.contents] == [(6, 8, b"other")]


def test_publish_encoder_frames_match_pamqp() -> None:
    fm = 4096
    enc = c.PublishEncoder(3, "ex", "rk", True, {"delivery_mode": 2, "content_type": "a/b"}, fm)
    out = bytearray()
    for body in (b"", b"abc", bytearray(b"z" * (fm - 8)), memoryview(b"q" * (2 * fm + 5))):
        out.clear()
        n = enc.write(out, body)
        assert n == len(out)
        data = bytes(out)
        pos, objs = 0, []
        while pos < len(data):
            used, ch, obj = pframe.unmarshal(data[pos:])
            assert ch == 3
            objs.append(obj)
            pos += used
        assert objs[0].name == "Basic.Publish" and objs[0].exchange == "ex" and objs[0].routing_key == "rk"
        assert objs[0].mandatory is True
        assert objs[1].body_size == len(body) and objs[1].properties.delivery_mode == 2
        assert b"".join(o.value for o in objs[2:]) == bytes(body)
        assert all(len(o.value) <= fm - 8 for o in objs[2:])


def test_all_fourteen_properties_round_trip() -> None:
    props = {name: v for (name, _), v in zip(c.PROPERTIES, [
        "a/b", "gzip", {"h": [1, {"x": None}]}, 2, 9, "corr", "reply", "1000", "mid",
        datetime.datetime.fromtimestamp(1_600_000_000, UTC), "type", "guest", "app", "cluster"])}
    frame = c.encode_header(9, 123, props)
    assert c.decode_header(frame[7:-1]) == (60, 123, props)


def test_longlong_is_unsigned() -> None:
    """The spec's longlong is unsigned (pamqp decodes it signed: the one known divergence)."""
    frame = c.encode_method(1, c.K.BASIC_ACK, (2**64 - 1, False))
    assert c.decode_method(frame[7:-1]) == (c.K.BASIC_ACK, (2**64 - 1, False))


def test_encode_ack_matches_generic() -> None:
    assert c.encode_ack(7, 2**40 + 3, True) == c.encode_method(7, c.K.BASIC_ACK, (2**40 + 3, True))
    assert c.encode_ack(1, 1, False) == c.encode_method(1, c.K.BASIC_ACK, (1, False))


# ---- malformed -----------------------------------------------------------------------------
@pytest.mark.parametrize("data, match", [
    (b"\x01\x00\x01\x00\x00\x00\x04\x00\x0a\x00\x33\xcd", "frame end"),
    (b"\x07\x00\x00\x00\x00\x00\x00\xce", "unknown frame type"),
    (b"\x01\x00\x00\x00\x10\x00\x00" + b"\x00" * 8, "exceeds frame_max"),
    (b"AMQP\x00\x00\x09\x01", "protocol header"),
    (b"\x02\x00\x01\x00\x00\x00\x0e" + b"\x00" * 14 + b"\xce", "unexpected content header"),
    (b"\x03\x00\x01\x00\x00\x00\x01x\xce", "unexpected body"),
    (b"\x08\x00\x01\x00\x00\x00\x00\xce", "heartbeat on channel"),
    (b"\x01\x00\x01\x00\x00\x00\x04\x00\x63\x00\x01\xce", "unknown method"),
    (b"\x01\x00\x01\x00\x00\x00\x05\x00\x3c\x00\x50\x00\xce", "truncated"),
])
def test_malformed_frames_raise_codec_error(data: bytes, match: str) -> None:
    r = Collect().reader(frame_max=4096)
    with pytest.raises(CodecError, match=match):
        r.feed_bytes(data)


def test_trailing_bytes_and_oversized_body_are_errors() -> None:
    good = c.encode_method(1, c.K.BASIC_QOS, (0, 10, False))
    payload = good[7:-1] + b"\x00"
    with pytest.raises(CodecError, match="trailing"):
        c.decode_method(payload)
    stream = c.encode_method(1, c.K.BASIC_DELIVER, ("t", 1, False, "", "")) + c.encode_header(1, 2) + c.encode_body(1, b"abc")
    with pytest.raises(CodecError, match="exceed"):
        Collect().reader().feed_bytes(stream)


def test_encode_errors_are_codec_errors() -> None:
    with pytest.raises(CodecError, match="short string"):
        c.encode_method(1, c.K.QUEUE_DECLARE, (0, "q" * 256, False, False, False, False, False, {}))
    with pytest.raises(CodecError, match="arguments"):
        c.encode_method(1, c.K.QUEUE_DECLARE, (0, "q"))
    with pytest.raises(CodecError, match="cannot encode"):
        c.encode_table({"x": object()})
    with pytest.raises(CodecError, match="out of range"):
        c.encode_table({"x": c.TypedValue("B", 256)})
    with pytest.raises(CodecError, match="64-bit"):
        c.encode_table({"x": 2**64})
    with pytest.raises(CodecError, match="frame_max"):
        c.PublishEncoder(1, "", "q", frame_max=100)


def test_nesting_depth_is_bounded() -> None:
    t: dict = {}
    for _ in range(100):
        t = {"a": t}
    raw = c.encode_table(t)
    with pytest.raises(CodecError, match="nested"):
        c.decode_table(raw)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300), st.integers(0, 6))
def test_fuzz_decoders_only_raise_codec_error(data: bytes, mode: int) -> None:
    """Random bytes and mutated valid frames never crash or raise anything but CodecError."""
    seeds = [c.encode_method(1, c.K.QUEUE_DECLARE, (0, "q", False, True, False, False, False, {"x": [1, "a", {"b": None}]})),
             _deliver(1, 3, b"body", {"headers": {"h": 1}, "delivery_mode": 2}),
             c.encode_header(1, 5, {"timestamp": 5, "headers": {"a": 1.5}})]
    if mode < 3:
        seed = bytearray(seeds[mode])
        for i, b in enumerate(data[:20]):
            seed[(b * 7 + i) % len(seed)] = data[-1 - i] if data else 0
        data = bytes(seed)
    try:
        col = Collect()
        r = col.reader(frame_max=4096)
        if mode == 4:
            r.set_deliver_handler(1, lambda *a: None)
        r.feed_bytes(data)
    except CodecError:
        pass
    for fn in (c.decode_method, c.decode_table, c.decode_header):
        try:
            fn(data)
        except CodecError:
            pass
