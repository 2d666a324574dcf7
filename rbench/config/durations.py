"""Human durations ("90s", "5m", "250ms", "1h", or plain seconds) for workload fields."""
from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(us|µs|ms|s|min|m|h)?\s*$")


def parse_seconds(value: Any) -> float:
    """Seconds as float from a number or a string with a unit; ValueError names the accepted forms."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30s, 5m, 250ms or a number of seconds")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and (match := _PATTERN.match(value)):
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    else:     # the value itself is not echoed: a misplaced line could be a password (issue 11)
        given = "a string" if isinstance(value, str) else f"a {type(value).__name__}"
        raise ValueError(f"expected a duration such as 30s, 5m, 250ms or a number of seconds, got {given}")
    if not math.isfinite(seconds):
        raise ValueError("expected a finite duration")
    if seconds < 0:
        raise ValueError(f"expected a duration >= 0, got {seconds:g} s")
    return seconds


Seconds = Annotated[float, BeforeValidator(parse_seconds)]
