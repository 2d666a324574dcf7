"""Stream filtering: which filter value each message carries, and which messages the consumers ask for.

Why a rule of (producer, seq) and not a value drawn at random: three places must agree on a message's value
without sharing state. The publisher writes it into the Publish frame (in C, ext/codec/stream.pyx), the
consumer recomputes it from the body's stamp to drop what the broker sent anyway (its bloom filter is per
chunk), and the reduce recomputes it to leave out of the loss count the messages no consumer asked for. So a
message's *slot* is ``(seq * SEQ_STEP + producer * PRODUCER_STEP) mod SLOTS``; SEQ_STEP is prime to SLOTS, so
any SLOTS consecutive messages of a producer fill every slot once and the spread is exact, not just expected.
Slots are handed out to the values in proportion to their weights, the last share (``unfiltered``) to messages
published with no filter value.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SLOTS = 1000
SEQ_STEP = 7919               # prime, so prime to SLOTS: consecutive messages visit every slot
PRODUCER_STEP = 104729        # producers start at different slots


def slot(producer: int, seq: int) -> int:
    return (seq * SEQ_STEP + producer * PRODUCER_STEP) % SLOTS


@dataclass(frozen=True)
class FilterSpread:
    """The publishers' filter values and the slots [bounds[i-1], bounds[i]) each value gets; slots from
    bounds[-1] to SLOTS go out without a filter value."""

    values: tuple[str, ...]
    bounds: tuple[int, ...]

    @classmethod
    def of(cls, values: list[str] | tuple[str, ...], weights: list[float] | tuple[float, ...] | None = None,
           unfiltered: float = 0.0) -> FilterSpread:
        w = list(weights) if weights else [1.0] * len(values)
        total = sum(w)
        bounds, cum = [], 0.0
        for x in w:
            cum += x
            bounds.append(round(cum / total * (1.0 - unfiltered) * SLOTS))
        return cls(tuple(values), tuple(bounds))

    def value_of_slot(self, s: int) -> str | None:
        for value, bound in zip(self.values, self.bounds):
            if s < bound:
                return value
        return None

    def value(self, producer: int, seq: int) -> str | None:
        return self.value_of_slot(slot(producer, seq))

    def table(self) -> tuple[bytes | None, ...]:
        """Each slot's filter value as UTF-8 (None: published unfiltered): what the C frame builder indexes."""
        out = []
        for s in range(SLOTS):
            v = self.value_of_slot(s)
            out.append(None if v is None else v.encode())
        return tuple(out)


def wanted_table(spread: FilterSpread | None, wanted: tuple[str, ...], match_unfiltered: bool) -> bytes:
    """One byte per slot, 1 where a consumer filtering on ``wanted`` keeps the message (client side)."""
    out = bytearray(SLOTS)
    for s in range(SLOTS):
        v = spread.value_of_slot(s) if spread is not None else None
        out[s] = 1 if (v in wanted if v is not None else match_unfiltered) else 0
    return bytes(out)


def unwanted_ranges(table: bytes) -> tuple[tuple[int, int], ...]:
    """The slot ranges [lo, hi) a consumer drops, merged: what the reduce leaves out of the loss count."""
    out: list[tuple[int, int]] = []
    for s, keep in enumerate(table):
        if keep:
            continue
        if out and out[-1][1] == s:
            out[-1] = (out[-1][0], s + 1)
        else:
            out.append((s, s + 1))
    return tuple(out)


def spread_of(publisher: Mapping[str, Any]) -> FilterSpread | None:
    """The spread a workload's ``publisher`` section (as run.json keeps it, or the model's dump) sets; None without."""
    f = publisher.get("filter")
    if not f:
        return None
    return FilterSpread.of(list(f["values"]), f.get("weights"), float(f.get("unfiltered") or 0.0))


def unwanted_of_workload(workload: Mapping[str, Any]) -> tuple[tuple[int, int], ...]:
    """Slot ranges of the messages the workload's consumers filter out (none when they do not filter); read by the
    reduce from run.json's ``workload``, so a run records nothing more than what it was asked."""
    consumer = workload.get("consumer") or {}
    values = consumer.get("filter") or []
    if not values:
        return ()
    spread = spread_of(workload.get("publisher") or {})
    return unwanted_ranges(wanted_table(spread, tuple(values), bool(consumer.get("match_unfiltered"))))
