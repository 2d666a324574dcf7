# cython: language_level=3
"""AMQP 0-9-1 wire codec: frames, methods, content headers, field tables.

Why Cython: a load generator must spend its CPU on the broker's messages, not on
struct.unpack. The hot paths are ``PublishEncoder.write`` (method + header + body
frames appended to the output bytearray in one call, the method frame pre-encoded
once per publisher) and ``FrameReader`` (frames split in place in a reusable
receive buffer; a delivery reaches its handler as (tag, redelivered, body, t_ns)
without building a method object). Everything else -- generic methods, properties,
field tables per RabbitMQ's errata (t b B s u I i l f d D S x A T F V) -- is exact
but not tuned. No asyncio here: the wire state machine lives in
rbench/drivers/amqp091_protocol.py.

One extension module built from this file and the parts it includes (ext/codec/amqp091/*.pxi:
values, methods, frames), so calls between the parts are plain C calls within one module.
"""
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.string cimport memcpy, memmove
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int8_t, int16_t, int32_t, int64_t

# shared primitives (ext/include/): inline, so every call stays a C call in this module
from byteorder cimport put_be16, put_be32, put_be64, get_be16, get_be32, get_be64
from clock cimport realtime_ns
from wbuf cimport WBuf, wbuf_init, wbuf_release, wbuf_claim, wbuf_put1, wbuf_write, wbuf_bytes
from rcursor cimport RCursor, rc_init, rc_take

import datetime as _dt
import decimal as _decimal

from rbench.errors import CodecError

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_MIN_SIZE = 4096
DEFAULT_FRAME_MAX = 131072

cdef enum:
    _FRAME_END = 0xCE


def now_ns() -> int:
    """time.time_ns() without the Python call overhead (CLOCK_REALTIME)."""
    return realtime_ns()


# --------------------------------------------------------------------------------------
# method table: key = class_id << 16 | method_id
# field types: o octet, s short, l long, L longlong, S shortstr, X longstr, b bit, F table
# --------------------------------------------------------------------------------------
cdef inline uint32_t K(uint16_t c, uint16_t m):
    return (<uint32_t>c << 16) | m

_CLOSE = (("reply_code", "s"), ("reply_text", "S"), ("class_id", "s"), ("method_id", "s"))
_EX_BIND = (("ticket", "s"), ("destination", "S"), ("source", "S"), ("routing_key", "S"),
            ("nowait", "b"), ("arguments", "F"))
_METHOD_DEFS = (
    (10, 10, "Connection.Start", (("version_major", "o"), ("version_minor", "o"), ("server_properties", "F"),
                                  ("mechanisms", "X"), ("locales", "X"))),
    (10, 11, "Connection.StartOk", (("client_properties", "F"), ("mechanism", "S"), ("response", "X"), ("locale", "S"))),
    (10, 20, "Connection.Secure", (("challenge", "X"),)),
    (10, 21, "Connection.SecureOk", (("response", "X"),)),
    (10, 30, "Connection.Tune", (("channel_max", "s"), ("frame_max", "l"), ("heartbeat", "s"))),
    (10, 31, "Connection.TuneOk", (("channel_max", "s"), ("frame_max", "l"), ("heartbeat", "s"))),
    (10, 40, "Connection.Open", (("virtual_host", "S"), ("capabilities", "S"), ("insist", "b"))),
    (10, 41, "Connection.OpenOk", (("known_hosts", "S"),)),
    (10, 50, "Connection.Close", _CLOSE),
    (10, 51, "Connection.CloseOk", ()),
    (10, 60, "Connection.Blocked", (("reason", "S"),)),
    (10, 61, "Connection.Unblocked", ()),
    (10, 70, "Connection.UpdateSecret", (("new_secret", "X"), ("reason", "S"))),
    (10, 71, "Connection.UpdateSecretOk", ()),
    (20, 10, "Channel.Open", (("out_of_band", "S"),)),
    (20, 11, "Channel.OpenOk", (("channel_id", "X"),)),
    (20, 20, "Channel.Flow", (("active", "b"),)),
    (20, 21, "Channel.FlowOk", (("active", "b"),)),
    (20, 40, "Channel.Close", _CLOSE),
    (20, 41, "Channel.CloseOk", ()),
    (40, 10, "Exchange.Declare", (("ticket", "s"), ("exchange", "S"), ("exchange_type", "S"), ("passive", "b"),
                                  ("durable", "b"), ("auto_delete", "b"), ("internal", "b"), ("nowait", "b"),
                                  ("arguments", "F"))),
    (40, 11, "Exchange.DeclareOk", ()),
    (40, 20, "Exchange.Delete", (("ticket", "s"), ("exchange", "S"), ("if_unused", "b"), ("nowait", "b"))),
    (40, 21, "Exchange.DeleteOk", ()),
    (40, 30, "Exchange.Bind", _EX_BIND),
    (40, 31, "Exchange.BindOk", ()),
    (40, 40, "Exchange.Unbind", _EX_BIND),
    (40, 51, "Exchange.UnbindOk", ()),
    (50, 10, "Queue.Declare", (("ticket", "s"), ("queue", "S"), ("passive", "b"), ("durable", "b"),
                               ("exclusive", "b"), ("auto_delete", "b"), ("nowait", "b"), ("arguments", "F"))),
    (50, 11, "Queue.DeclareOk", (("queue", "S"), ("message_count", "l"), ("consumer_count", "l"))),
    (50, 20, "Queue.Bind", (("ticket", "s"), ("queue", "S"), ("exchange", "S"), ("routing_key", "S"),
                            ("nowait", "b"), ("arguments", "F"))),
    (50, 21, "Queue.BindOk", ()),
    (50, 30, "Queue.Purge", (("ticket", "s"), ("queue", "S"), ("nowait", "b"))),
    (50, 31, "Queue.PurgeOk", (("message_count", "l"),)),
    (50, 40, "Queue.Delete", (("ticket", "s"), ("queue", "S"), ("if_unused", "b"), ("if_empty", "b"),
                              ("nowait", "b"))),
    (50, 41, "Queue.DeleteOk", (("message_count", "l"),)),
    (50, 50, "Queue.Unbind", (("ticket", "s"), ("queue", "S"), ("exchange", "S"), ("routing_key", "S"),
                              ("arguments", "F"))),
    (50, 51, "Queue.UnbindOk", ()),
    (60, 10, "Basic.Qos", (("prefetch_size", "l"), ("prefetch_count", "s"), ("global_", "b"))),
    (60, 11, "Basic.QosOk", ()),
    (60, 20, "Basic.Consume", (("ticket", "s"), ("queue", "S"), ("consumer_tag", "S"), ("no_local", "b"),
                               ("no_ack", "b"), ("exclusive", "b"), ("nowait", "b"), ("arguments", "F"))),
    (60, 21, "Basic.ConsumeOk", (("consumer_tag", "S"),)),
    (60, 30, "Basic.Cancel", (("consumer_tag", "S"), ("nowait", "b"))),
    (60, 31, "Basic.CancelOk", (("consumer_tag", "S"),)),
    (60, 40, "Basic.Publish", (("ticket", "s"), ("exchange", "S"), ("routing_key", "S"), ("mandatory", "b"),
                               ("immediate", "b"))),
    (60, 50, "Basic.Return", (("reply_code", "s"), ("reply_text", "S"), ("exchange", "S"), ("routing_key", "S"))),
    (60, 60, "Basic.Deliver", (("consumer_tag", "S"), ("delivery_tag", "L"), ("redelivered", "b"),
                               ("exchange", "S"), ("routing_key", "S"))),
    (60, 70, "Basic.Get", (("ticket", "s"), ("queue", "S"), ("no_ack", "b"))),
    (60, 71, "Basic.GetOk", (("delivery_tag", "L"), ("redelivered", "b"), ("exchange", "S"), ("routing_key", "S"),
                             ("message_count", "l"))),
    (60, 72, "Basic.GetEmpty", (("cluster_id", "S"),)),
    (60, 80, "Basic.Ack", (("delivery_tag", "L"), ("multiple", "b"))),
    (60, 90, "Basic.Reject", (("delivery_tag", "L"), ("requeue", "b"))),
    (60, 100, "Basic.RecoverAsync", (("requeue", "b"),)),
    (60, 110, "Basic.Recover", (("requeue", "b"),)),
    (60, 111, "Basic.RecoverOk", ()),
    (60, 120, "Basic.Nack", (("delivery_tag", "L"), ("multiple", "b"), ("requeue", "b"))),
    (85, 10, "Confirm.Select", (("nowait", "b"),)),
    (85, 11, "Confirm.SelectOk", ()),
    (90, 10, "Tx.Select", ()),
    (90, 11, "Tx.SelectOk", ()),
    (90, 20, "Tx.Commit", ()),
    (90, 21, "Tx.CommitOk", ()),
    (90, 30, "Tx.Rollback", ()),
    (90, 31, "Tx.RollbackOk", ()),
)

# key -> (name, field names, field types as bytes)
METHODS = {}
METHOD_KEYS = {}
for _c, _m, _name, _fields in _METHOD_DEFS:
    METHODS[K(_c, _m)] = (_name, tuple(f[0] for f in _fields), "".join(f[1] for f in _fields).encode())
    METHOD_KEYS[_name] = K(_c, _m)

# content-bearing methods: a header frame and body frames follow
CONTENT_METHODS = frozenset((K(60, 40), K(60, 50), K(60, 60), K(60, 71)))

cdef uint32_t KEY_DELIVER = K(60, 60)
cdef uint32_t KEY_ACK = K(60, 80)
cdef uint32_t KEY_NACK = K(60, 120)

# basic properties in flag order (bit 15 first)
PROPERTIES = (("content_type", "S"), ("content_encoding", "S"), ("headers", "F"), ("delivery_mode", "o"),
              ("priority", "o"), ("correlation_id", "S"), ("reply_to", "S"), ("expiration", "S"),
              ("message_id", "S"), ("timestamp", "T"), ("message_type", "S"), ("user_id", "S"),
              ("app_id", "S"), ("cluster_id", "S"))
_PROP_NAMES = tuple(p[0] for p in PROPERTIES)
_PROP_TYPES = "".join(p[1] for p in PROPERTIES).encode()
cdef frozenset _PROP_SET = frozenset(_PROP_NAMES)


include "amqp091/values.pxi"    # _Writer, _Cursor, field tables and arrays
include "amqp091/methods.pxi"   # methods, content header and properties, body, ack
include "amqp091/frames.pxi"    # PublishEncoder, FrameReader, split_frames
