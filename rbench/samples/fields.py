"""Reading one JSON object of run.json field by field, each wrong field one line naming where it is.

The typed run record (rbench.samples.record) parses every object of run.json through :class:`Fields`,
so a hand-edited or truncated file fails as a SinkError such as ``run.json: clusters[0].t0_ns: expected
int or null, got '12'`` instead of a KeyError deep in the reduce. Numbers are returned as JSON gave
them (an int stays an int where a float is allowed), so writing a record back keeps the file's bytes.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from rbench.errors import SinkError


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_num(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Fields:
    """One JSON object at ``where`` (a path such as ``clusters[1].steps[0]``), read one typed field at a time."""

    def __init__(self, data: object, where: str) -> None:
        if not isinstance(data, Mapping):
            raise SinkError(f"run.json: {where}: expected an object, got {type(data).__name__}")
        self.data: Mapping[str, Any] = data
        self.where = where

    def _bad(self, key: str, expected: str) -> SinkError:
        return SinkError(f"run.json: {self.at(key)}: expected {expected}, got {self.data.get(key)!r}")

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def extra(self, known: tuple[str, ...]) -> dict[str, Any]:
        """The keys this rbench does not know, kept so that rewriting the file loses nothing."""
        return {k: v for k, v in self.data.items() if k not in known}

    def opt_int(self, key: str) -> int | None:
        value: object = self.data.get(key)
        if value is None or _is_int(value):
            return value
        raise self._bad(key, "int or null")

    def req_int(self, key: str, default: int | None = None) -> int:
        value: object = self.data.get(key, default)
        if _is_int(value):
            return value
        raise self._bad(key, "int")

    def opt_num(self, key: str) -> float | None:
        value: object = self.data.get(key)
        if value is None or _is_num(value):
            return value
        raise self._bad(key, "number or null")

    def num(self, key: str, default: float | None = None) -> float:
        value: object = self.data.get(key, default)
        if _is_num(value):
            return value
        raise self._bad(key, "number")

    def opt_text(self, key: str) -> str | None:
        value: object = self.data.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self._bad(key, "string or null")

    def text(self, key: str, default: str | None = None) -> str:
        value: object = self.data.get(key, default)
        if isinstance(value, str):
            return value
        raise self._bad(key, "string")

    def flag(self, key: str, default: bool = False) -> bool:
        value: object = self.data.get(key, default)
        if isinstance(value, bool):
            return value
        raise self._bad(key, "true or false")

    def entries(self, key: str) -> list[tuple[str, Any]]:
        """Each entry of the list at ``key`` with its path; [] when the key is absent or null."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._bad(key, "a list")
        return [(f"{self.at(key)}[{i}]", v) for i, v in enumerate(value)]

    def texts(self, key: str) -> tuple[str, ...]:
        out = []
        for where, value in self.entries(key):
            if not isinstance(value, str):
                raise SinkError(f"run.json: {where}: expected a string, got {value!r}")
            out.append(value)
        return tuple(out)

    def ints(self, key: str) -> tuple[int, ...]:
        out = []
        for where, value in self.entries(key):
            if not _is_int(value):
                raise SinkError(f"run.json: {where}: expected an int, got {value!r}")
            out.append(value)
        return tuple(out)

    def obj(self, key: str) -> Fields | None:
        """The object at ``key`` (None when absent or null)."""
        value = self.data.get(key)
        return None if value is None else Fields(value, self.at(key))

    def mapping(self, key: str) -> dict[str, Any]:
        """A free-form object (the masked workload, a summary rbench does not read): {} when absent."""
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self._bad(key, "an object")
        return dict(value)

    def numbers(self, key: str) -> dict[str, float]:
        """An object whose values are all numbers ({} when absent)."""
        out = {}
        for name, value in self.mapping(key).items():
            if not _is_num(value):
                raise SinkError(f"run.json: {self.at(key)}.{name}: expected a number, got {value!r}")
            out[str(name)] = value
        return out
