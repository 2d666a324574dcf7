"""Message body templates: file contents (PerfTest -B) and random JSON documents (--json-body).

Built once on the Spark driver and shipped in each TaskPlan, so executors need no
access to the files. Every body still starts with rbench's 24-byte stamp (the producer
writes it over the first 24 bytes of the template), which is how consumers measure
latency and count losses; templates shorter than the stamp are padded to it.
"""
from __future__ import annotations

import json
import random
import string
from pathlib import Path

from rbench.errors import ConfigError
from rbench.runtime.stamp import STAMP_SIZE


def file_bodies(paths: list[str]) -> tuple[bytes, ...]:
    """The contents of ``paths``, in order; ConfigError names a file that cannot be read."""
    out = []
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"publisher.body_files: cannot read {path!r} ({exc.strerror or exc})") from None
        out.append(data.ljust(STAMP_SIZE, b"\0"))
    return tuple(out)


def _word(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(low, high)))


def json_bodies(size: int, field_count: int, body_count: int, seed: int = 0) -> tuple[bytes, ...]:
    """``body_count`` JSON objects of exactly ``max(size, 24)`` bytes, their fields drawn from
    ``field_count`` random names and values; whitespace before the closing brace pads them."""
    rng = random.Random(seed)
    size = max(size, STAMP_SIZE)
    fields = [(_word(rng, 4, 12), rng.choice([_word(rng, 4, 24), rng.randint(0, 10**9), rng.random() < 0.5]))
              for _ in range(field_count)]
    encoded = [json.dumps(k) + ":" + json.dumps(val) for k, val in fields]
    bodies = []
    for _ in range(body_count):
        parts: list[str] = []
        length = 2                                   # "{}"
        for item in rng.sample(encoded, len(encoded)):
            extra = len(item) + (1 if parts else 0)
            if length + extra > size:
                continue
            parts.append(item)
            length += extra
            if length >= size - 4:
                break
        text = "{" + ",".join(parts) + " " * (size - length) + "}"
        bodies.append(text.encode())
    return tuple(bodies)
