"""Interoperability with qpid-proton: proton decodes what rbench encodes and rbench decodes
what proton encodes, for every AMQP 1.0 type and every message section, values equal."""
from __future__ import annotations

import datetime as dt
import uuid

import proton
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import Data

from rbench.codec.amqp10 import (
    BODY_DATA,
    BODY_SEQUENCE,
    Array,
    Byte,
    Char,
    Decimal32,
    Decimal64,
    Decimal128,
    Described,
    Float,
    Header,
    Int,
    Long,
    Message,
    Properties,
    Short,
    Symbol,
    Timestamp,
    UByte,
    UInt,
    ULong,
    UShort,
    decode_data_props,
    decode_message,
    decode_value,
    encode_message,
    encode_value,
)

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)

ARRAY_TYPES = {0x40: Data.NULL, 0x56: Data.BOOL, 0x50: Data.UBYTE, 0x51: Data.BYTE,
               0x60: Data.USHORT, 0x61: Data.SHORT, 0x70: Data.UINT, 0x52: Data.UINT,
               0x71: Data.INT, 0x54: Data.INT, 0x73: Data.CHAR, 0x80: Data.ULONG,
               0x53: Data.ULONG, 0x81: Data.LONG, 0x55: Data.LONG, 0x83: Data.TIMESTAMP,
               0x72: Data.FLOAT, 0x82: Data.DOUBLE, 0x74: Data.DECIMAL32, 0x84: Data.DECIMAL64,
               0x94: Data.DECIMAL128, 0x98: Data.UUID, 0xa0: Data.BINARY, 0xb0: Data.BINARY,
               0xa1: Data.STRING, 0xb1: Data.STRING, 0xa3: Data.SYMBOL, 0xb3: Data.SYMBOL,
               0xc0: Data.LIST, 0xd0: Data.LIST, 0xc1: Data.MAP, 0xd1: Data.MAP}


def ms(t: dt.datetime) -> int:
    d = t - EPOCH
    return (d.days * 86400 + d.seconds) * 1000 + d.microseconds // 1000


def to_proton(v):
    """rbench value -> the proton object that asks for the same AMQP type."""
    wrappers = {UByte: proton.ubyte, UShort: proton.ushort, UInt: proton.uint,
                ULong: proton.ulong, Byte: proton.byte, Short: proton.short, Int: proton.int32,
                Float: proton.float32, Char: proton.char, Decimal32: proton.decimal32,
                Decimal64: proton.decimal64, Decimal128: proton.decimal128,
                Timestamp: proton.timestamp, Symbol: proton.symbol}
    t = type(v)
    if t in wrappers:
        return wrappers[t](v)
    if t is Long:
        return int(v)
    if t is int:
        return proton.ulong(v) if v >= 2**63 else v
    if isinstance(v, dt.datetime):
        return proton.timestamp(ms(v))
    if t is Described:
        return proton.Described(to_proton(v.descriptor), to_proton(v.value))
    if t is Array:
        desc = proton.UNDESCRIBED if v.descriptor is None else to_proton(v.descriptor)
        return proton.Array(desc, ARRAY_TYPES[v.code], *[to_proton(x) for x in v.items])
    if t is dict:
        return {to_proton(k): to_proton(x) for k, x in v.items()}
    if t in (list, tuple):
        return [to_proton(x) for x in v]
    return v


def norm(v):
    """A comparable form of a value from either side (types that matter kept as tags)."""
    if isinstance(v, (proton.symbol, Symbol)):
        return ("sym", str(v))
    if isinstance(v, (proton.char, Char)):
        return ("char", str(v))
    if isinstance(v, proton.timestamp) or type(v) is Timestamp:
        return EPOCH + dt.timedelta(milliseconds=int(v))
    if isinstance(v, (proton.decimal32, Decimal32)):
        return ("d32", int(v))
    if isinstance(v, (proton.decimal64, Decimal64)):
        return ("d64", int(v))
    if isinstance(v, (proton.decimal128, Decimal128)):
        return ("d128", bytes(v))
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, (bytes, memoryview, bytearray)):
        return bytes(v)
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v
    if isinstance(v, (Described, proton.Described)):
        return ("described", norm(v.descriptor), norm(v.value))
    if isinstance(v, Array):
        return ("array", norm(v.descriptor), [norm(x) for x in v.items])
    if isinstance(v, proton.Array):
        desc = None if v.descriptor is proton.UNDESCRIBED else norm(v.descriptor)
        return ("array", desc, [norm(x) for x in v.elements])
    if isinstance(v, dict):
        return {_hashable(norm(k)): norm(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    return v


def _hashable(v):
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def proton_decode(wire: bytes):
    """Decoded by proton, normalised while ``d`` is alive (proton binaries point into it)."""
    d = Data()
    d.decode(wire)
    d.rewind()
    d.next()
    return norm(d.get_object())


def proton_encode(v) -> bytes:
    d = Data()
    d.put_object(to_proton(v))
    return d.encode()


EVERY_TYPE = [
    None, True, False, UByte(0), UByte(255), UShort(65535), UInt(0), UInt(200), UInt(2**32 - 1),
    ULong(0), ULong(7), ULong(2**64 - 1), Byte(-128), Short(-32768), Int(-1), Int(2**31 - 1),
    Long(-(2**63)), 0, -5, 2**40, 2**64 - 1, Float(0.25), 1e300, -0.0, Decimal32(0x22500001),
    Decimal64(0x31C0000000000001), Decimal128(bytes(range(16))), Char("x"), Char("\U0001F600"),
    dt.datetime(2024, 2, 29, 23, 59, 59, 999000, tzinfo=UTC), Timestamp(-1000),
    uuid.UUID("12345678-1234-5678-1234-567812345678"), b"", b"\x00\xff" * 200, "", "é" * 200,
    Symbol(""), Symbol("amqp:symbol" * 30), [], [1, "a", None], list(range(300)), {},
    {"k": 1, Symbol("s"): [True], 3: {"n": None}}, {i: str(i) for i in range(100)},
    Described(ULong(0x77), "v"), Described(Symbol("com.example:t"), {"a": [1]}),
    Array(0x71, [1, -2, 3]), Array(0xa1, ["a", "b"]), Array(0xa3, [Symbol("x")]),
    Array(0x81, [2**40]), Array(0x56, [True, False]), Array(0x98, [uuid.UUID(int=5)]),
    Array(0xa0, [b"x", b"yz"]), Array(0x82, [1.5]), Array(0x40, [None, None]),
    Array(0x71, [1], descriptor=Symbol("desc")), Array(0x70, []),
    Array(0x71, list(range(100))),  # array32
]


@pytest.mark.parametrize("v", EVERY_TYPE, ids=lambda v: type(v).__name__)
def test_proton_decodes_rbench(v):
    assert proton_decode(encode_value(v)) == norm(v)


@pytest.mark.parametrize("v", EVERY_TYPE, ids=lambda v: type(v).__name__)
def test_rbench_decodes_proton(v):
    assert norm(decode_value(proton_encode(v))) == norm(v)


symbols = st.text(st.characters(max_codepoint=127), max_size=40).map(Symbol)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False),
    st.text(max_size=300), st.binary(max_size=300), symbols, st.uuids(),
    st.integers(0, 2**32 - 1).map(UInt), st.integers(-128, 127).map(Byte),
    st.floats(width=32, allow_nan=False).map(Float),
    st.characters(exclude_categories=("Cs",)).map(Char),
    st.integers(-(10**12), 10**13).map(lambda n: EPOCH + dt.timedelta(milliseconds=n)),
)
values = st.recursive(
    scalars,
    lambda kids: st.one_of(st.lists(kids, max_size=5),
                           st.dictionaries(st.one_of(st.text(max_size=10), symbols,
                                                     st.integers(-5, 5)), kids, max_size=5),
                           # proton's Python binding drops the next list element after a
                           # described whose value is itself described (proton's own round
                           # trip loses it), so that shape is left out here
                           st.builds(Described, symbols,
                                     kids.filter(lambda k: type(k) is not Described))),
    max_leaves=15)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_random_values_both_ways(v):
    assert proton_decode(encode_value(v)) == norm(v)
    assert norm(decode_value(proton_encode(v))) == norm(v)


# ----------------------------------------------------------------------------- messages

CREATED = dt.datetime(2024, 1, 1, 12, 0, 0, 500000, tzinfo=UTC)
EXPIRES = dt.datetime(2030, 1, 1, tzinfo=UTC)
SEED = {"large-int": 2**31 - 1, "small-list": [1, 2, 3], "bin-string": b"abc"}


def rbench_full(body=SEED, kind=None) -> Message:
    return Message(
        body, body_kind=kind,
        header=Header(durable=True, priority=7, ttl=60000, first_acquirer=True, delivery_count=2),
        delivery_annotations={Symbol("x-da"): 1},
        message_annotations={Symbol("x-opt-key"): "v"},
        properties=Properties(
            message_id="id-1", user_id=b"guest", to="/queues/q", subject="subj",
            reply_to="/queues/r", correlation_id=uuid.UUID(int=7),
            content_type="application/json", content_encoding="utf-8",
            absolute_expiry_time=EXPIRES, creation_time=CREATED, group_id="g", group_sequence=3,
            reply_to_group_id="rg"),
        application_properties={"producer": "p1", "seq": 42, "t": 1.5},
        footer={"x-foot": b"sig"})


def proton_full(body=SEED, inferred=False) -> proton.Message:
    m = proton.Message(body=body)
    m.inferred = inferred
    m.durable, m.priority, m.ttl, m.first_acquirer, m.delivery_count = True, 7, 60.0, True, 2
    m.instructions = {proton.symbol("x-da"): 1}
    m.annotations = {proton.symbol("x-opt-key"): "v"}
    m.id, m.user_id, m.address, m.subject, m.reply_to = "id-1", b"guest", "/queues/q", "subj", "/queues/r"
    m.correlation_id = uuid.UUID(int=7)
    m.content_type, m.content_encoding = "application/json", "utf-8"
    m.expiry_time, m.creation_time = ms(EXPIRES) / 1000, ms(CREATED) / 1000
    m.group_id, m.group_sequence, m.reply_to_group_id = "g", 3, "rg"
    m.properties = {"producer": "p1", "seq": 42, "t": 1.5}
    return m


def check_same(pm: proton.Message, m: Message) -> None:
    h, p = m.header, m.properties
    assert (pm.durable, pm.priority, pm.ttl, pm.first_acquirer, pm.delivery_count) == \
        (h.durable, h.priority, h.ttl / 1000, h.first_acquirer, h.delivery_count)
    assert norm(pm.instructions) == norm(m.delivery_annotations)
    assert norm(pm.annotations) == norm(m.message_annotations)
    assert (pm.id, pm.user_id, pm.address, pm.subject, pm.reply_to, pm.correlation_id) == \
        (p.message_id, p.user_id, p.to, p.subject, p.reply_to, p.correlation_id)
    assert (pm.content_type, pm.content_encoding, pm.group_id, pm.group_sequence,
            pm.reply_to_group_id) == (p.content_type, p.content_encoding, p.group_id,
                                      p.group_sequence, p.reply_to_group_id)
    assert round(pm.expiry_time * 1000) == ms(p.absolute_expiry_time)
    assert round(pm.creation_time * 1000) == ms(p.creation_time)
    assert norm(pm.properties) == norm(m.application_properties)


@pytest.mark.parametrize("body, kind, inferred", [
    (SEED, None, False), (b"payload", BODY_DATA, True), ([1, "two", None], BODY_SEQUENCE, True),
    ("text", None, False),
])
def test_proton_reads_rbench_message(body, kind, inferred):
    m = rbench_full([body] if kind == BODY_SEQUENCE else body, kind)
    pm = proton.Message()
    pm.decode(encode_message(m))
    check_same(pm, m)
    assert pm.inferred is inferred
    assert norm(pm.body) == norm(body)


@pytest.mark.parametrize("body, kind, inferred", [
    (SEED, "value", False), (b"payload", BODY_DATA, True), ([1, "two", None], BODY_SEQUENCE, True),
    (b"binary value", "value", False),
])
def test_rbench_reads_proton_message(body, kind, inferred):
    wire = proton_full(body, inferred).encode()
    m = decode_message(wire)
    check_same(proton_full(body, inferred), m)
    assert m.body_kind == kind
    assert type(m.properties.content_type) is Symbol
    assert norm(m.body) == norm([body] if kind == BODY_SEQUENCE else body)
    if kind == BODY_DATA:
        view, app = decode_data_props(wire)
        assert bytes(view) == body and app == {"producer": "p1", "seq": 42, "t": 1.5}


def test_every_section_matches_proton_data_view():
    """proton.Data walks rbench's sections (including the footer proton.Message lacks)."""
    wire = encode_message(rbench_full(b"data-body", BODY_DATA))
    sections = {}
    pos = 0
    while pos < len(wire):
        d = Data()
        pos += d.decode(wire[pos:])
        d.rewind()
        d.next()
        s = d.get_object()
        sections[int(s.descriptor)] = norm(s.value)
    assert sorted(sections) == [0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x78]
    assert sections[0x78] == norm({Symbol("x-foot"): b"sig"})
    assert sections[0x75] == b"data-body"
    assert sections[0x70] == [True, 7, 60000, True, 2]
    assert sections[0x73][:3] == ["id-1", b"guest", "/queues/q"]
    assert sections[0x74] == norm({"producer": "p1", "seq": 42, "t": 1.5})


def test_footer_from_proton_is_decoded():
    footer = Data()
    footer.put_object(proton.Described(proton.ulong(0x78), {proton.symbol("x-sig"): b"\x01"}))
    wire = proton_full(b"p", True).encode() + footer.encode()
    m = decode_message(wire)
    assert m.footer == {"x-sig": b"\x01"} and type(next(iter(m.footer))) is Symbol
    assert bytes(m.body) == b"p"
