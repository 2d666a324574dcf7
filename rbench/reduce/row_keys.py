"""Integer keys for the message check (rbench.reduce.message_checks): several integer columns as one int64 per row,
so that grouping, counting and membership tests read one column instead of five, and, when the keys are dense, need
no sort at all (a ``bincount`` or a bitmap is linear where a sort is n log n). Every result is the same as the sort's:
the packing is one-to-one (mixed radix, each column less its minimum, the spans' product below 2^62), and a
column's value is read back from the key, not looked up."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

LIMIT = 1 << 62


class Key:
    """The packed columns: ``v`` (0 ≤ v < ``span``), first column most significant; ``lo0`` is the first column's
    minimum and ``below0`` the product of the other spans, so the first column of a key is ``lo0 + v // below0``."""

    def __init__(self, v: np.ndarray, span: int, lo0: int, below0: int) -> None:
        self.v, self.span, self.lo0, self.below0 = v, span, lo0, below0

    def lead(self, v: np.ndarray) -> np.ndarray:
        """The first column of keys ``v``."""
        if self.below0 == 1:
            out: np.ndarray = v + self.lo0
            return out
        out = v // self.below0
        out += self.lo0
        return out


def pack(cols: Sequence[np.ndarray | Key]) -> Key | None:
    """``cols`` (integer arrays of one length, or Keys read as a column from 0 to their span) as one Key; None when the
    spans' product reaches 2^62 (the caller falls back to a sort on several columns)."""
    ranges: list[tuple[int, int]] = []
    total = 1
    for c in cols:
        if isinstance(c, Key):
            lo, span = 0, c.span
        elif c.size:
            lo = int(c.min())
            span = int(c.max()) - lo + 1
        else:
            lo, span = 0, 1
        ranges.append((lo, span))
        total *= span
        if total >= LIMIT:
            return None
    v: np.ndarray | None = None
    for c, (lo, span) in zip(cols, ranges, strict=True):
        arr = c.v if isinstance(c, Key) else c
        if span == 1 and v is not None:      # one value (one producer, queue, reader): adds 0 to every key
            continue
        if v is None:
            v = np.subtract(arr, lo, dtype=np.int64, casting="unsafe")
        else:                   # in place; an int64 that wraps in between still ends at the exact key
            v *= span
            np.add(v, arr, out=v, casting="unsafe")
            if lo:
                v -= lo
    assert v is not None
    return Key(v, total, ranges[0][0], total // ranges[0][1])


def _dense(span: int, n: int) -> bool:
    """Whether a table over the key's span costs no more than a sort of ``n`` keys."""
    return span <= 4 * n + 4096


def key_counts(v: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys of ``v`` (0 ≤ v < span), ascending, and how many rows have each."""
    if _dense(span, v.size):
        cnt = np.bincount(v, minlength=1)
        uniq = np.flatnonzero(cnt)
        return uniq, cnt[uniq]
    s = np.sort(v)
    if not s.size:
        return s, np.zeros(0, dtype=np.int64)
    first = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    return s[first], np.diff(np.append(first, s.size))


def absent(seen: np.ndarray, rows: np.ndarray, span: int) -> np.ndarray:
    """For each key of ``rows``, whether no key of ``seen`` equals it (keys 0 ≤ k < span)."""
    if span <= 8 * (seen.size + rows.size) + 4096:          # a bitmap: one byte per possible key
        bits = np.zeros(span, dtype=bool)
        bits[seen] = True
        out: np.ndarray = ~bits[rows]
        return out
    s = np.unique(seen)
    if not s.size:
        return np.ones(rows.size, dtype=bool)
    pos = np.minimum(np.searchsorted(s, rows), s.size - 1)
    out = s[pos] != rows
    return out


def small_ids(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(ids, return_counts=True), by a ``bincount`` when the ids' range is small (a step's or a cluster's
    id: a few values over a million rows)."""
    if not ids.size:
        return ids, np.zeros(0, dtype=np.int64)
    lo, hi = int(ids.min()), int(ids.max())
    if not _dense(hi - lo + 1, ids.size):
        uniq, cnt = np.unique(ids, return_counts=True)
        return uniq, cnt
    cnt = np.bincount(ids - lo if lo else ids)
    nz = np.flatnonzero(cnt)
    return nz + lo, cnt[nz]


def as_index(idx: np.ndarray) -> np.ndarray | slice:
    """Ascending row indices as a slice when they are one contiguous run (a view, not a gather, when indexing)."""
    if idx.size and int(idx[-1]) - int(idx[0]) + 1 == idx.size:
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx
