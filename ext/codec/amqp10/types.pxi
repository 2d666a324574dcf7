# Part of rbench.codec._amqp10 (included by ext/codec/amqp10.pyx; shares its namespace).
# AMQP 1.0 type wrappers (Symbol, UInt, …, Described, Array) and the message classes.

# ---------------------------------------------------------------------------
# value wrappers: ask for a specific AMQP encoding
# ---------------------------------------------------------------------------

class Symbol(str):
    """An AMQP symbol (ASCII); a plain str is encoded as an AMQP string instead."""
    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


class Char(str):
    """A single Unicode code point encoded as AMQP char (UTF-32BE)."""
    __slots__ = ()

    def __new__(cls, value):
        s = str.__new__(cls, value)
        if len(s) != 1:
            raise ValueError("Char holds exactly one code point")
        return s

    def __repr__(self) -> str:
        return f"Char({str.__repr__(self)})"


class _Ranged(int):
    __slots__ = ()
    _lo = 0
    _hi = 0

    def __new__(cls, value=0):
        v = int.__new__(cls, value)
        if not cls._lo <= v <= cls._hi:
            raise ValueError(f"{cls.__name__} out of range [{cls._lo}, {cls._hi}]: {int(v)}")
        return v

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"


class UByte(_Ranged):
    """AMQP ubyte (0..255)."""
    __slots__ = ()
    _lo, _hi = 0, 0xff


class UShort(_Ranged):
    """AMQP ushort (0..65535)."""
    __slots__ = ()
    _lo, _hi = 0, 0xffff


class UInt(_Ranged):
    """AMQP uint (uint0 / smalluint / uint chosen by value)."""
    __slots__ = ()
    _lo, _hi = 0, 0xffffffff


class ULong(_Ranged):
    """AMQP ulong (ulong0 / smallulong / ulong chosen by value)."""
    __slots__ = ()
    _lo, _hi = 0, 0xffffffffffffffff


class Byte(_Ranged):
    """AMQP byte (-128..127)."""
    __slots__ = ()
    _lo, _hi = -0x80, 0x7f


class Short(_Ranged):
    """AMQP short."""
    __slots__ = ()
    _lo, _hi = -0x8000, 0x7fff


class Int(_Ranged):
    """AMQP int (smallint / int chosen by value)."""
    __slots__ = ()
    _lo, _hi = -0x80000000, 0x7fffffff


class Long(_Ranged):
    """AMQP long (smalllong / long chosen by value)."""
    __slots__ = ()
    _lo, _hi = -0x8000000000000000, 0x7fffffffffffffff


class Decimal32(_Ranged):
    """AMQP decimal32 carried as its raw 32 bits (IEEE 754 decimal32, no arithmetic)."""
    __slots__ = ()
    _lo, _hi = 0, 0xffffffff


class Decimal64(_Ranged):
    """AMQP decimal64 carried as its raw 64 bits."""
    __slots__ = ()
    _lo, _hi = 0, 0xffffffffffffffff


class Timestamp(_Ranged):
    """AMQP timestamp given as milliseconds since the Unix epoch (decodes as datetime)."""
    __slots__ = ()
    _lo, _hi = -0x8000000000000000, 0x7fffffffffffffff


class Float(float):
    """AMQP float (IEEE 754 binary32); a plain float is encoded as double."""
    __slots__ = ()

    def __repr__(self) -> str:
        return f"Float({float(self)!r})"


class Decimal128(bytes):
    """AMQP decimal128 carried as its raw 16 bytes."""

    def __new__(cls, value):
        b = bytes.__new__(cls, value)
        if len(b) != 16:
            raise ValueError("Decimal128 holds exactly 16 bytes")
        return b

    def __repr__(self) -> str:
        return f"Decimal128({bytes.__repr__(self)})"


@cython.final
@cython.freelist(64)
cdef class Described:
    """A described type: a descriptor (ulong or symbol) and the value it describes."""
    cdef readonly object descriptor
    cdef readonly object value

    def __init__(self, descriptor, value):
        self.descriptor = descriptor
        self.value = value

    def __eq__(self, other):
        if type(other) is not Described:
            return NotImplemented
        return (self.descriptor == (<Described>other).descriptor
                and self.value == (<Described>other).value)

    def __hash__(self):
        return hash((self.descriptor, self.value))

    def __repr__(self):
        return f"Described({self.descriptor!r}, {self.value!r})"


@cython.final
cdef class Array:
    """An AMQP array: every element shares one constructor ``code`` (and descriptor)."""
    cdef readonly int code
    cdef readonly list items
    cdef readonly object descriptor

    def __init__(self, int code, items, descriptor=None):
        if amqp10_code_width(code) == -2 or code == 0:
            raise ValueError(f"0x{code:02x} is not an AMQP constructor")
        self.code = code
        self.items = list(items)
        self.descriptor = descriptor

    def __eq__(self, other):
        if type(other) is not Array:
            return NotImplemented
        return (self.code == (<Array>other).code and self.items == (<Array>other).items
                and self.descriptor == (<Array>other).descriptor)

    __hash__ = None

    def __repr__(self):
        if self.descriptor is None:
            return f"Array(0x{self.code:02x}, {self.items!r})"
        return f"Array(0x{self.code:02x}, {self.items!r}, descriptor={self.descriptor!r})"


# ---------------------------------------------------------------------------
# message sections
# ---------------------------------------------------------------------------

@cython.final
@cython.freelist(64)
cdef class Header:
    """The header section: delivery details (durable, priority, ttl ms, …)."""
    cdef public object durable
    cdef public object priority
    cdef public object ttl
    cdef public object first_acquirer
    cdef public object delivery_count

    def __init__(self, durable=False, priority=4, ttl=None, first_acquirer=False,
                 delivery_count=0):
        self.durable = durable
        self.priority = priority
        self.ttl = ttl
        self.first_acquirer = first_acquirer
        self.delivery_count = delivery_count

    cdef tuple _key(self):
        return (self.durable, self.priority, self.ttl, self.first_acquirer, self.delivery_count)

    def __eq__(self, other):
        if type(other) is not Header:
            return NotImplemented
        return self._key() == (<Header>other)._key()

    __hash__ = None

    def __repr__(self):
        return ("Header(durable={!r}, priority={!r}, ttl={!r}, first_acquirer={!r}, "
                "delivery_count={!r})".format(*self._key()))


PROPERTY_NAMES = ("message_id", "user_id", "to", "subject", "reply_to", "correlation_id",
                  "content_type", "content_encoding", "absolute_expiry_time", "creation_time",
                  "group_id", "group_sequence", "reply_to_group_id")


@cython.final
@cython.freelist(64)
cdef class Properties:
    """The properties section: immutable facts about the message (ids, addresses, times)."""
    cdef public object message_id
    cdef public object user_id
    cdef public object to
    cdef public object subject
    cdef public object reply_to
    cdef public object correlation_id
    cdef public object content_type
    cdef public object content_encoding
    cdef public object absolute_expiry_time
    cdef public object creation_time
    cdef public object group_id
    cdef public object group_sequence
    cdef public object reply_to_group_id

    def __init__(self, message_id=None, user_id=None, to=None, subject=None, reply_to=None,
                 correlation_id=None, content_type=None, content_encoding=None,
                 absolute_expiry_time=None, creation_time=None, group_id=None,
                 group_sequence=None, reply_to_group_id=None):
        self.message_id = message_id
        self.user_id = user_id
        self.to = to
        self.subject = subject
        self.reply_to = reply_to
        self.correlation_id = correlation_id
        self.content_type = content_type
        self.content_encoding = content_encoding
        self.absolute_expiry_time = absolute_expiry_time
        self.creation_time = creation_time
        self.group_id = group_id
        self.group_sequence = group_sequence
        self.reply_to_group_id = reply_to_group_id

    cdef tuple _key(self):
        return (self.message_id, self.user_id, self.to, self.subject, self.reply_to,
                self.correlation_id, self.content_type, self.content_encoding,
                self.absolute_expiry_time, self.creation_time, self.group_id,
                self.group_sequence, self.reply_to_group_id)

    def __eq__(self, other):
        if type(other) is not Properties:
            return NotImplemented
        return self._key() == (<Properties>other)._key()

    __hash__ = None

    def __repr__(self):
        parts = [f"{n}={v!r}" for n, v in zip(PROPERTY_NAMES, self._key()) if v is not None]
        return f"Properties({', '.join(parts)})"


cdef inline bint is_bytes_like(object v):
    cdef type t = type(v)
    return t is bytes or t is memoryview or t is bytearray or isinstance(v, (bytes, bytearray,
                                                                              memoryview))


@cython.final
@cython.freelist(64)
cdef class Message:
    """An AMQP 1.0 message: optional sections around one body (data, sequence or value)."""
    cdef public object body
    cdef public object body_kind
    cdef public object header
    cdef public object delivery_annotations
    cdef public object message_annotations
    cdef public object properties
    cdef public object application_properties
    cdef public object footer

    def __init__(self, body=None, *, body_kind=None, header=None, delivery_annotations=None,
                 message_annotations=None, properties=None, application_properties=None,
                 footer=None):
        if body_kind is None:
            body_kind = BODY_DATA if is_bytes_like(body) else BODY_VALUE
        elif body_kind != BODY_DATA and body_kind != BODY_SEQUENCE and body_kind != BODY_VALUE:
            raise ValueError(f"body_kind must be 'data', 'sequence' or 'value', not {body_kind!r}")
        self.body = body
        self.body_kind = body_kind
        self.header = header
        self.delivery_annotations = delivery_annotations
        self.message_annotations = message_annotations
        self.properties = properties
        self.application_properties = application_properties
        self.footer = footer

    cdef tuple _key(self):
        body = self.body
        if self.body_kind == BODY_DATA:
            if is_bytes_like(body):
                body = bytes(body)
            elif type(body) is list:
                body = [bytes(b) for b in body]
        return (body, self.body_kind, self.header, self.delivery_annotations,
                self.message_annotations, self.properties, self.application_properties,
                self.footer)

    def __eq__(self, other):
        if type(other) is not Message:
            return NotImplemented
        return self._key() == (<Message>other)._key()

    __hash__ = None

    def __repr__(self):
        names = ("body", "body_kind", "header", "delivery_annotations", "message_annotations",
                 "properties", "application_properties", "footer")
        vals = (self.body, self.body_kind, self.header, self.delivery_annotations,
                self.message_annotations, self.properties, self.application_properties,
                self.footer)
        parts = [f"{n}={v!r}" for n, v in zip(names, vals) if v is not None]
        return f"Message({', '.join(parts)})"
