"""Read a workload file into a validated Workload, or fail with one line.

`${VAR}` and `${VAR:-default}` in the YAML are taken from the environment so that
committed workloads can name brokers (and passwords) without containing them.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rbench.config.model import Workload
from rbench.config.uri import mask_text
from rbench.errors import ConfigError

# libyaml's safe loader when PyYAML was built with it (same documents, same errors, ~10x faster)
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_env(text: str, source: str) -> str:
    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name, default)
        if value is None:
            raise ConfigError(f"{source}: environment variable {name} is not set and has no default (${{{name}:-...}})")
        return value

    return _ENV.sub(sub, text)


_NUMERIC_LIMITS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of")


def _kind(value: Any) -> str:
    """What a value is, without what it says: the only way a non-number appears in an error."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "a number"
    names: dict[type, str] = {str: "a string", list: "a list", dict: "a mapping"}
    return names.get(type(value), f"a {type(value).__name__}")


def format_validation_error(exc: ValidationError, source: str) -> str:
    """First pydantic error as `source: field.path: what was expected (got X)`.

    Never echoes a value that may hold a credential: an unknown field shows its name only, a
    wrong type shows the kind of value given (a string, a list), a number out of range shows
    the number, and anything URI-shaped left in a message is masked (rbench.config.uri).
    """
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"] if not str(p).startswith("function-"))
    kind = first["type"]
    message = first["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        message = "unknown field"
    elif kind == "missing":
        message = "required field is missing"
    where = f"{loc}: " if loc else ""
    got = ""
    value = first.get("input")
    if kind in _NUMERIC_LIMITS and isinstance(value, (int, float)) and not isinstance(value, bool):
        got = f" (got {value!r})"
    elif kind not in ("missing", "value_error", "extra_forbidden", "assertion_error") and "input" in first:
        got = f" (got {_kind(value)})"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return mask_text(f"{source}: {where}{message}{got}{more}")


def workload_from_dict(data: Any, source: str = "workload") -> Workload:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of workload fields at the top level")
    try:
        return Workload.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


def load_workload(path: str | os.PathLike[str], driver: str | None = None) -> Workload:
    """The workload file at ``path``, validated; with ``driver``, as if the file named that driver
    (`rbench amqp10 FILE`), so the driver's refusals are made here like every other."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such workload file") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read workload file ({exc.strerror})") from None
    try:
        data = yaml.load(_expand_env(text, source), Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{source}:{where}: {problem}") from None
    if driver is not None and isinstance(data, dict):
        data = {**data, "driver": driver}
    return workload_from_dict(data, source)


def workload_hash(workload: Workload) -> str:
    """Identity of what was measured, without where: runs against different clusters compare."""
    # regress thresholds, progress output and clean-up change what is judged, printed or left, not what is measured
    data = workload.model_dump(mode="json", by_alias=True, exclude={"clusters": True, "description": True, "regress": True,
                                                                     "progress": True, "queues": {"keep"}})
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def workload_schema() -> dict[str, Any]:
    return Workload.model_json_schema(by_alias=True)
