"""The sweep as a workload file: a `scenario: scalability` document with a `scalability:` section.

    name: routing-scalability
    scenario: scalability
    uri: amqp://guest:guest@127.0.0.1:5672/
    scalability: {base: 2, x: 8, y: 6, messages: 200, exchange_type: direct, repeat: 3, tasks: 2}

Keys of the section are SweepSpec's fields; flags given on the command line win over the file.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from rbench.errors import ConfigError
from rbench.scenarios.scalability.plan import SweepSpec

_INTS = {"base", "x", "y", "cap", "messages", "repeat", "tasks", "queue_limit"}
_STRS = {"label", "exchange_type", "name_prefix", "prometheus", "uri"}


def load_sweep_file(path: str | Path) -> dict[str, Any]:
    """The file's sweep settings as SweepSpec keyword arguments (checked, one line per problem)."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a mapping with scenario: scalability")
    if doc.get("scenario") != "scalability":
        raise ConfigError(f"{path}: scenario: expected 'scalability', got {doc.get('scenario')!r}")
    unknown_top = sorted(set(doc) - {"name", "scenario", "uri", "scalability", "description"})
    if unknown_top:
        raise ConfigError(f"{path}: {unknown_top[0]}: unknown key (expected name, scenario, uri, scalability)")
    section = doc.get("scalability") or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: scalability: expected a mapping of sweep settings")
    fields = {f.name for f in dataclasses.fields(SweepSpec)}
    out: dict[str, Any] = {}
    for key, value in section.items():
        if key not in fields:
            raise ConfigError(f"{path}: scalability.{key}: unknown setting (expected one of {', '.join(sorted(fields))})")
        if key in _INTS and (not isinstance(value, int) or isinstance(value, bool)):
            raise ConfigError(f"{path}: scalability.{key}: expected an integer, got {value!r}")
        if key in _STRS and not isinstance(value, str):
            raise ConfigError(f"{path}: scalability.{key}: expected a string, got {value!r}")
        out[key] = value
    if "uri" in doc:
        if not isinstance(doc["uri"], str):
            raise ConfigError(f"{path}: uri: expected an amqp:// URI string")
        out.setdefault("uri", doc["uri"])
    if "name" in doc and "label" not in out:
        out["label"] = str(doc["name"])
    return out
