"""PerfTest's value syntaxes, each parsed to a Python value or one ConfigError line.

Every error names the option as ``-x/--producers`` and says what was expected.
"""
from __future__ import annotations

import datetime as dt
import re
from typing import Any

from rbench.config.durations import parse_seconds
from rbench.errors import ConfigError
from rbench.perftest.option import Option


def integer(opt: Option, value: str | None) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{opt.label}: invalid int value {value!r} (expected a whole number)") from None


def number(opt: Option, value: str | None) -> float:
    try:
        return float(str(value).strip())
    except ValueError:
        raise ConfigError(f"{opt.label}: invalid number {value!r} (expected a number, e.g. 100 or 0.5)") from None


def seconds(opt: Option, value: str | None) -> float:
    """PerfTest's whole seconds; rbench also takes fractions and units (250ms, 5m)."""
    try:
        return parse_seconds(str(value).strip())
    except ValueError as exc:
        raise ConfigError(f"{opt.label}: {exc}") from None


def boolean(opt: Option, value: str | None) -> bool:
    low = str(value).strip().lower()
    if low in ("true", "yes", "1"):
        return True
    if low in ("false", "no", "0"):
        return False
    raise ConfigError(f"{opt.label}: expected true or false, got {value!r}")


def scalar(value: str) -> Any:
    """A key=value value as PerfTest types it: true/false, a whole number, else the string."""
    if value in ("true", "false"):
        return value == "true"
    try:
        return int(value)
    except ValueError:
        return value


def key_values(opt: Option, texts: list[str]) -> dict[str, Any]:
    """k=v,k=v (possibly repeated) into a dict; later keys win, as in PerfTest."""
    out: dict[str, Any] = {}
    for text in texts:
        for item in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise ConfigError(f"{opt.label}: expected key=value pairs separated by commas, got {item!r}")
            out[key] = scalar(value)
    return out


def rate_seconds(opt: Option, text: str, what: str = "RATE") -> tuple[float, float]:
    """RATE:SECONDS (or SIZE:SECONDS …)."""
    left, sep, right = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return float(left), parse_seconds(right)
    except ValueError:
        raise ConfigError(f"{opt.label}: expected {what}:SECONDS, e.g. 100:60, got {text!r}") from None


_CAPACITY = re.compile(r"^(\d+)(kb|mb|gb|tb)?$", re.IGNORECASE)
_CAPACITY_UNITS = {None: 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def byte_capacity(opt: Option, value: str | None) -> int:
    """PerfTest's byte capacities: 20gb, 500mb, 1000 (powers of 1000, as PerfTest)."""
    m = _CAPACITY.match(str(value).strip())
    if not m:
        raise ConfigError(f"{opt.label}: expected a byte capacity such as 100gb, 50mb or 1000, got {value!r}")
    unit = m.group(2).lower() if m.group(2) else None
    return int(m.group(1)) * _CAPACITY_UNITS[unit]


_ISO_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def iso_duration_seconds(opt: Option, value: str | None) -> int:
    """ISO 8601 durations as Java's Duration.parse reads them (PnDTnHnMn.nS), in whole seconds."""
    text = str(value).strip()
    m = _ISO_DURATION.match(text)
    if not m or text.upper() in ("P", "PT"):
        raise ConfigError(f"{opt.label}: expected an ISO 8601 duration such as PT15M or P5DT8H, got {value!r}")
    days, hours, minutes, secs = (float(g) if g else 0.0 for g in m.groups())
    total = int(days * 86400 + hours * 3600 + minutes * 60 + secs)
    if total <= 0:
        raise ConfigError(f"{opt.label}: expected a positive duration, got {value!r}")
    return total


def stream_offset(opt: Option, value: str | None) -> tuple[Any, str]:
    """(x-stream-offset argument, consumer.offset) for first|last|next|N|ISO timestamp."""
    text = str(value).strip()
    if text.lower() in ("first", "last", "next"):
        return text.lower(), text.lower()
    if text.isdigit():
        return int(text), f"offset:{text}"
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{opt.label}: expected first, last, next, an offset or an ISO 8601 timestamp "
                          f"(2022-06-03T07:45:54Z), got {value!r}") from None
    if when.tzinfo is None:
        raise ConfigError(f"{opt.label}: expected a timestamp with its offset, e.g. 2022-06-03T07:45:54Z, got {value!r}")
    return when, f"timestamp:{int(when.timestamp() * 1000)}"


def fraction(opt: Option, value: str | None) -> float:
    """A share written as a percentage (5%) or a fraction (0.05)."""
    text = str(value).strip()
    try:
        share = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise ConfigError(f"{opt.label}: expected a share such as 5% or 0.05, got {value!r}") from None
    return share


def rate_range(opt: Option, value: str | None) -> tuple[float, float]:
    """START:MAX, two rates in msg/s with 0 < START <= MAX."""
    left, sep, right = str(value).strip().partition(":")
    try:
        if not sep:
            raise ValueError
        start, top = float(left), float(right)
    except ValueError:
        raise ConfigError(f"{opt.label}: expected START:MAX in msg/s per producer, e.g. 250:16000, got {value!r}") from None
    if not 0 < start <= top:
        raise ConfigError(f"{opt.label}: expected 0 < START <= MAX, got {value!r}")
    return start, top
