"""Read a PerfTest command line the way PerfTest's parser (Apache commons-cli) reads it.

Why not argparse: argparse matches option prefixes and splits unknown multi-letter
short options, so `-qq` became `-q q` and `-hst 4` became `-h st` plus a stray `4`.
Here names are matched exactly, by the table in ``options``:

* ``-x 2``, ``-x=2``, ``--producers 2``, ``--producers=2`` and commons-cli's
  ``-producers 2`` (a long name after one dash) all mean the same;
* an exact name always wins, so ``-qq`` is the quorum-queue flag and ``-qp`` the
  queue pattern; only when a token is no option name does commons-cli's short form
  apply: ``-x2`` (value attached to a one-letter option) and ``-aS`` (one-letter
  flags run together);
* a value is the next token unless that token is itself an option (negative numbers
  are values); ``-e`` takes an optional value; list options (``-f``, ``-qa``, ``-vr``
  …) take every following value up to the next option, and may be repeated;
* no prefix matching: ``--prod`` is not ``--producers``.

A single-valued option given twice keeps its first value, as PerfTest does, and the
caller says so. Positional arguments, which PerfTest silently ignores, are an error.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from rbench.errors import ConfigError
from rbench.perftest.option import Option
from rbench.perftest.options import BY_LONG, BY_SHORT

_NEGATIVE_NUMBER = re.compile(r"^-\d+(\.\d+)?$")


@dataclass
class Parsed:
    """The options of one command line: values per option key, in command-line order."""

    values: dict[str, list[str | None]] = field(default_factory=dict)
    order: list[Option] = field(default_factory=list)       # each option once, where it first appeared
    repeated: list[Option] = field(default_factory=list)    # single-valued options given more than once

    def has(self, key: str) -> bool:
        return key in self.values

    def first(self, key: str) -> str | None:
        """The value PerfTest uses for a single-valued option (its first); None when absent or valueless."""
        vals = self.values.get(key)
        return vals[0] if vals else None

    def all(self, key: str) -> list[str]:
        """Every value of a list option, across repeats."""
        return [v for v in self.values.get(key, []) if v is not None]


def _lookup(name: str, dashes: int) -> Option | None:
    if dashes == 2:
        return BY_LONG.get(name)
    return BY_SHORT.get(name) or BY_LONG.get(name)      # commons-cli also takes -producers


def _is_option(token: str) -> bool:
    """Whether commons-cli would read ``token`` as an option rather than as a value."""
    if not token.startswith("-") or token == "-" or _NEGATIVE_NUMBER.match(token):
        return False
    if token == "--":
        return True
    dashes = 2 if token.startswith("--") else 1
    name = token[dashes:].partition("=")[0]
    if _lookup(name, dashes) is not None:
        return True
    return dashes == 1 and bool(name) and name[0] in BY_SHORT and len(BY_SHORT[name[0]].short or "") == 1


def _unknown(token: str) -> ConfigError:
    return ConfigError(f"unrecognized arguments: {token} is neither a PerfTest nor an rbench option "
                       f"(rbench perftest --help lists them)")


def parse(argv: Sequence[str]) -> Parsed:
    """Tokenize ``argv`` (without the command name); ConfigError names the first problem."""
    parsed = Parsed()
    tokens = list(argv)
    i = 0

    def add(opt: Option, value: str | None) -> None:
        if opt.key in parsed.values:
            if opt.arg in ("one", "optional") and opt not in parsed.repeated:
                parsed.repeated.append(opt)
            parsed.values[opt.key].append(value)
        else:
            parsed.values[opt.key] = [value]
            parsed.order.append(opt)

    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token == "--":
            raise ConfigError(f"unexpected arguments after --: {' '.join(tokens[i:]) or '(none)'} "
                              "(PerfTest takes no positional arguments)")
        if not token.startswith("-") or token == "-" or _NEGATIVE_NUMBER.match(token):
            raise ConfigError(f"unexpected argument {token!r}: PerfTest options start with - or -- "
                              "(a value with spaces needs quotes)")
        dashes = 2 if token.startswith("--") else 1
        name, eq, attached = token[dashes:].partition("=")
        opt = _lookup(name, dashes)
        if opt is None and dashes == 1 and not eq:
            i = _concatenated(token, parsed, add, tokens, i)
            continue
        if opt is None:
            raise _unknown(token)
        if eq:
            if not opt.takes_value:
                raise ConfigError(f"{opt.label}: takes no value, got {token!r}")
            add(opt, attached)
            continue
        i = _take_values(opt, tokens, i, add)
    return parsed


def _take_values(opt: Option, tokens: list[str], i: int, add: object) -> int:
    """Consume the value(s) of ``opt`` from tokens[i:]; returns the next index."""
    assert callable(add)
    if opt.arg == "none":
        add(opt, None)
        return i
    if opt.arg == "optional":
        if i < len(tokens) and not _is_option(tokens[i]):
            add(opt, tokens[i])
            return i + 1
        add(opt, None)
        return i
    if i >= len(tokens) or _is_option(tokens[i]):
        raise ConfigError(f"{opt.label}: expects a value ({opt.metavar})")
    add(opt, tokens[i])
    i += 1
    if opt.arg == "many":
        while i < len(tokens) and not _is_option(tokens[i]):
            add(opt, tokens[i])
            i += 1
    return i


def _concatenated(token: str, parsed: Parsed, add: object, tokens: list[str], i: int) -> int:
    """commons-cli's short forms for a token that is no option name: -x2 and -aS."""
    assert callable(add)
    body = token[1:]
    first = BY_SHORT.get(body[0]) if body else None
    if first is None or len(first.short or "") != 1:
        raise _unknown(token)
    for pos, ch in enumerate(body):
        opt = BY_SHORT.get(ch)
        if opt is None or len(opt.short or "") != 1:
            raise _unknown(token)
        if opt.takes_value:
            rest = body[pos + 1:]
            if rest:
                add(opt, rest)
                return i
            return _take_values(opt, tokens, i, add)
        add(opt, None)
    return i
