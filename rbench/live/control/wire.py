"""The control channel's lines, as typed records: what a task says, and what the coordinator answers.

A task sends JSON objects, one per line; which record a line is follows from the key only that record
has (``error``, ``ready``, ``hello``, ``metrics_port``, ``reconnecting``, ``t0_ns``; none of them: a
progress line). Every field is checked when a line is read: a line that is not JSON, lacks a field or
has one of the wrong type is refused with a CodecError naming it, so the coordinator never acts on
half a message. ``attempt`` (the sender's Spark task attempt id) is the one field a line may leave
out: a client that does not say has none. The coordinator answers with bare words (``stop``,
``pause``, ``resume``) and ``t0 <ns>`` when the start gate opens.

A line is at most MAX_LINE bytes: ``read_line`` refuses a longer one after reading MAX_LINE + 1 bytes of
it, so a peer that never sends a newline cannot make the reader hold it whole.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal, Protocol, TypeVar, get_type_hints

from rbench.errors import CodecError

MAX_LINE = 1 << 20          # bytes, newline excluded; progress lines are a few hundred bytes


class LineTooLong(CodecError):
    """A control line longer than MAX_LINE: the rest of it cannot be told from the next line, so the
    connection it came on is closed."""


class Readable(Protocol):
    def readline(self, size: int = -1, /) -> bytes: ...


def read_line(stream: Readable) -> bytes:
    """The next line of ``stream`` with its newline (b"" at the end); LineTooLong for a line longer than
    MAX_LINE, after reading no more than MAX_LINE + 1 bytes of it."""
    line = stream.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE and not line.endswith(b"\n"):
        raise LineTooLong(f"control line: longer than {MAX_LINE} bytes")
    return line


# ---- field checks -------------------------------------------------------------------------------------

def _int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise CodecError(f"control line: {name!r} expected an integer, got {v!r}"[:200])
    return v


def _optional_int(name: str, v: Any) -> int | None:
    return None if v is None else _int(name, v)


def _bool(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise CodecError(f"control line: {name!r} expected true or false, got {v!r}"[:200])
    return v


def _str(name: str, v: Any) -> str:
    if not isinstance(v, str):
        raise CodecError(f"control line: {name!r} expected a string, got {v!r}"[:200])
    return v


def _buckets(name: str, v: Any) -> dict[int, int]:
    """A latency histogram: bucket index (a JSON object's keys are strings) → count."""
    if not isinstance(v, dict):
        raise CodecError(f"control line: {name!r} expected an object of bucket counts, got {v!r}"[:200])
    out: dict[int, int] = {}
    for k, c in v.items():
        try:
            bucket = int(k)
        except ValueError:
            raise CodecError(f"control line: {name!r} has a bucket {k!r} that is not an integer"[:200]) from None
        out[bucket] = _int(f"{name}[{k}]", c)
    return out


def _figures(name: str, v: Any) -> dict[str, float] | None:
    """The self-check's figures of the second (rbench.runtime.selfcheck): name → number."""
    if v is None:
        return None
    if not isinstance(v, dict) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v.values()):
        raise CodecError(f"control line: {name!r} expected an object of numbers, got {v!r}"[:200])
    return {str(k): float(x) for k, x in v.items()}


_CHECKS: dict[Any, Callable[[str, Any], Any]] = {
    int: _int, int | None: _optional_int, bool: _bool, str: _str,
    dict[int, int]: _buckets, dict[str, float] | None: _figures,
}

Line = TypeVar("Line", bound="TaskLine")


_FIELD_CHECKS: dict[str, tuple[tuple[str, Callable[[str, Any], Any]], ...]] = {}


def _field_checks(cls: type) -> tuple[tuple[str, Callable[[str, Any], Any]], ...]:
    """Each field of a line record with the check of its type, worked out once per record type: resolving the
    type hints took ~140 µs a line, most of the coordinator's CPU per task-second (bench-scale, docs/scale.md)."""
    checks = _FIELD_CHECKS.get(cls.__qualname__)
    if checks is None:
        hints = get_type_hints(cls)
        checks = _FIELD_CHECKS[cls.__qualname__] = tuple((f.name, _CHECKS[hints[f.name]]) for f in fields(cls))
    return checks


@dataclass(frozen=True)
class TaskLine:
    """What every line from a task carries: who sent it. ``MARK`` is the key that says which record a line is
    (written as ``true`` when the record has no field of that name)."""

    MARK: ClassVar[str | None] = None
    cluster: str
    task: int
    attempt: int | None = field(default=None, kw_only=True)     # Spark's task attempt id (None: not said)

    def to_line(self) -> bytes:
        out: dict[str, Any] = {"cluster": self.cluster, "task": self.task}
        if self.MARK is not None and self.MARK not in self._names():
            out[self.MARK] = True
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("cluster", "task") or (f.name == "attempt" and v is None):
                continue
            out[f.name] = v
        return json.dumps(out, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def _names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))

    @classmethod
    def from_dict(cls: type[Line], d: dict[str, Any]) -> Line:
        values: dict[str, Any] = {}
        for name, check in _field_checks(cls):
            if name not in d:
                if name == "attempt":
                    continue
                raise CodecError(f"control line ({cls.__name__}): no {name!r}")
            values[name] = check(name, d[name])
        if cls.MARK is not None and cls.MARK not in values and d.get(cls.MARK) is not True:
            raise CodecError(f"control line ({cls.__name__}): {cls.MARK!r} expected true, got {d.get(cls.MARK)!r}"[:200])
        return cls(**values)

    @classmethod
    def from_line(cls: type[Line], line: bytes) -> Line:
        parsed = parse_line(line)
        if not isinstance(parsed, cls):
            raise CodecError(f"control line: expected {cls.__name__}, got {type(parsed).__name__}")
        return parsed


@dataclass(frozen=True)
class Hello(TaskLine):
    """The first line of a connection: which process runs this task attempt."""

    MARK: ClassVar[str | None] = "hello"
    host: str
    pid: int


@dataclass(frozen=True)
class Ready(TaskLine):
    """At the start gate: this task is ready and proposes ``proposal_ns`` as t0."""

    MARK: ClassVar[str | None] = "ready"
    proposal_ns: int


@dataclass(frozen=True)
class Failed(TaskLine):
    """The task ends with an error it can name ("Kind: message"): the coordinator ends the run."""

    MARK: ClassVar[str | None] = "error"
    error: str


@dataclass(frozen=True)
class MetricsEndpoint(TaskLine):
    """The task serves its Prometheus metrics at scheme://host:metrics_port/metrics."""

    MARK: ClassVar[str | None] = "metrics_port"
    metrics_port: int
    host: str
    scheme: str = "http"


@dataclass(frozen=True)
class Reconnecting(TaskLine):
    """The task lost its broker connection (True) or has it back (False)."""

    MARK: ClassVar[str | None] = "reconnecting"
    step: int
    reconnecting: bool


@dataclass(frozen=True)
class Started(TaskLine):
    """The task publishes from ``t0_ns`` (the start gate's answer, or allGather's)."""

    MARK: ClassVar[str | None] = "t0_ns"
    t0_ns: int
    step: int = 0


@dataclass(frozen=True)
class Notice(TaskLine):
    """A warning the task's own code logged (rbench.runtime.notices): the coordinator prints each once, so a user
    reads it in the terminal rather than in an executor's log."""

    MARK: ClassVar[str | None] = "notice"
    notice: str

    MAX_CHARS: ClassVar[int] = 1000


@dataclass(frozen=True)
class Progress(TaskLine):
    """What the task did during wall-clock second ``second`` of step ``step`` (counts are deltas); ``final``: its
    last line, sent when it ends by itself. Histograms are rbench.live.histogram bucket counts."""

    step: int = 0
    second: int = 0
    published: int = 0
    confirmed: int = 0
    consumed: int = 0
    nacked: int = 0
    returned: int = 0
    hist: dict[int, int] = field(default_factory=dict)
    final: bool = False
    confirm_hist: dict[int, int] = field(default_factory=dict)
    e2e_sum_ns: int = 0
    confirm_sum_ns: int = 0
    gen: dict[str, float] | None = None        # the self-check's figures of the second (rbench.runtime.selfcheck)


# a line's record is the first of these whose MARK it has; none of them: Progress
_BY_MARK: tuple[type[TaskLine], ...] = (Failed, Ready, Hello, MetricsEndpoint, Reconnecting, Started, Notice)


def parse_line(line: bytes) -> TaskLine:
    """The record a task's line holds; CodecError (naming what is wrong) for anything else."""
    if len(line) > MAX_LINE + 1:
        raise LineTooLong(f"control line: longer than {MAX_LINE} bytes")
    try:
        d = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CodecError(f"control line: not JSON ({exc})") from None
    if not isinstance(d, dict):
        raise CodecError(f"control line: expected a JSON object, got {type(d).__name__}")
    kind = next((k for k in _BY_MARK if k.MARK in d), Progress)
    return kind.from_dict(d)


# ---- coordinator → task ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Command:
    """``stop`` (end the load, flush, commit), or ``pause``/``resume`` the consumers (consumer.pause)."""

    word: Literal["stop", "pause", "resume"]

    def to_line(self) -> bytes:
        return self.word.encode() + b"\n"


@dataclass(frozen=True)
class StartAt:
    """The start gate opened: publish from ``t0_ns``."""

    t0_ns: int

    def to_line(self) -> bytes:
        return b"t0 %d\n" % self.t0_ns


STOP, PAUSE, RESUME = Command("stop"), Command("pause"), Command("resume")


def parse_answer(line: bytes) -> Command | StartAt:
    """What a coordinator's line says; CodecError for anything else."""
    word = line.strip()
    for command in (STOP, PAUSE, RESUME):
        if word == command.word.encode():
            return command
    if word.startswith(b"t0 "):
        try:
            return StartAt(int(word[3:]))
        except ValueError:
            pass
    raise CodecError(f"control answer: expected stop, pause, resume or t0 <ns>, got {bytes(word[:60])!r}")
