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
from rbench.errors import ConfigError

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_env(text: str, source: str) -> str:
    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name, default)
        if value is None:
            raise ConfigError(f"{source}: environment variable {name} is not set and has no default (${{{name}:-...}})")
        return value

    return _ENV.sub(sub, text)


def format_validation_error(exc: ValidationError, source: str) -> str:
    """First pydantic error as `source: field.path: what was expected (got X)`."""
    errors = exc.errors()
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"] if p not in ("function-after[_consistent(), Workload]",))
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown field"
    elif first["type"] == "missing":
        message = "required field is missing"
    where = f"{loc}: " if loc else ""
    got = ""
    if first["type"] not in ("missing", "value_error") and "input" in first and not isinstance(first["input"], (dict, list)):
        got = f" (got {first['input']!r})"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source}: {where}{message}{got}{more}"


def workload_from_dict(data: Any, source: str = "workload") -> Workload:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of workload fields at the top level")
    try:
        return Workload.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None


def load_workload(path: str | os.PathLike[str]) -> Workload:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: no such workload file") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read workload file ({exc.strerror})") from None
    try:
        data = yaml.safe_load(_expand_env(text, source))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{source}:{where}: {problem}") from None
    return workload_from_dict(data, source)


def workload_hash(workload: Workload) -> str:
    """Identity of what was measured, without where: runs against different clusters compare."""
    # regress thresholds and progress output change what is judged or printed, not what is measured
    data = workload.model_dump(mode="json", by_alias=True, exclude={"clusters", "description", "regress", "progress"})
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def workload_schema() -> dict[str, Any]:
    return Workload.model_json_schema(by_alias=True)
