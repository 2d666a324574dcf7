"""The driver's message-pass rows (rbench.reduce.small, DriverPasses._message_rows), assembled as the numpy
columns check_rows reads (rbench.reduce.message_checks.MessageRows).

Speed: a column is written once, into its final array: a part's constant (a delivery's src, an expected copy's
null t_received) is a fill of a slice, a part's gathered rows are taken straight into it, and a cluster with one
part (only deliveries, only expected copies) hands its arrays over without a copy. Building every part's columns
and then concatenating them wrote each of the 12 columns of every row twice."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from rbench.config.stream_filter import PRODUCER_STEP, SEQ_STEP, SLOTS
from rbench.reduce.message_checks import MessageRows

# the dtype of each MessageRows column
DTYPES: dict[str, type] = {"src": np.int8, "rc": np.int64, "prod": np.int64, "seq": np.int64, "qcode": np.int64,
                           "t": np.int64, "tnull": np.bool_, "gt": np.int64, "gm": np.int64, "fm": np.int64,
                           "red": np.bool_, "consumer": np.int64}

# a part's value of a column: a constant, an array (one value per row of the part), or (array, rows to take from it:
# a boolean mask or indices)
Value = int | bool | np.ndarray | tuple[np.ndarray, np.ndarray]


class Part:
    """``n`` message-pass rows, a Value per MessageRows column."""

    def __init__(self, n: int, **cols: Value) -> None:
        assert set(cols) == set(DTYPES), sorted(set(DTYPES) ^ set(cols))
        self.n, self.cols = n, cols


def assemble(parts: list[Part]) -> MessageRows:
    """The parts' rows, one after the other."""
    total = sum(p.n for p in parts)
    out: dict[str, np.ndarray] = {}
    for name, dtype in DTYPES.items():
        only = parts[0].cols[name] if len(parts) == 1 else None
        if isinstance(only, np.ndarray) and only.dtype == dtype:
            out[name] = only                       # one part: its array as it is
            continue
        values = [p.cols[name] for p in parts]
        if all(not isinstance(v, (np.ndarray, tuple)) and not v for v in values):
            out[name] = np.zeros(total, dtype=dtype)      # e.g. fm without faults: pages the check never touches
            continue
        col: np.ndarray = np.empty(total, dtype=dtype)
        at = 0
        for p in parts:
            _fill(col[at:at + p.n], p.cols[name])
            at += p.n
        out[name] = col
    return MessageRows(**out)


def _fill(dst: np.ndarray, v: Any) -> None:
    if isinstance(v, tuple):
        arr, take = v
        if take.dtype == np.bool_:
            np.compress(take, arr, out=dst)
        else:
            np.take(arr, take, out=dst, mode="clip")     # valid indices: clip, unlike raise, writes in place
    else:
        dst[...] = v


def queue_codes(col: pa.ChunkedArray, names: dict[str | None, int]) -> np.ndarray:
    """A code per row's queue name (-1: null), from ``names`` (name → code), which unseen names are added to."""
    if not pa.types.is_dictionary(col.type):
        col = col.dictionary_encode()
    out: list[np.ndarray] = []
    for chunk in col.chunks:
        dict_codes = np.array([names.setdefault(q, len(names) - 1) for q in chunk.dictionary.to_pylist()] + [-1],
                              dtype=np.int64)
        idx = chunk.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        out.append(dict_codes[idx])         # a null index (-1) reads the trailing -1
    if len(out) == 1:
        return out[0]
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def producer_codes(prod: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(prod, return_inverse=True); by a table look-up when the ids span a small range (producer ids are
    0…P-1 and -1 for unknown), not a sort of every row."""
    if not prod.size:
        return prod, np.zeros(0, dtype=np.int64)
    lo, hi = int(prod.min()), int(prod.max())
    if hi - lo > 4 * prod.size + 4096:
        uniq, inv = np.unique(prod, return_inverse=True)
        return uniq, inv.reshape(-1)
    present = np.bincount(prod - lo) > 0
    uniq = np.flatnonzero(present) + lo
    code = np.cumsum(present) - 1
    return uniq, code[prod - lo]


def expected(idx: np.ndarray, prod: np.ndarray, known: np.ndarray, seq: np.ndarray, gm: np.ndarray, fm: np.ndarray | None,
             rc: int, routes: dict[int, list[str]] | None, names: dict[str | None, int], src: int) -> Part:
    """The published rows ``idx`` (``prod``/``known``: every published row's producer and whether it is not null);
    with ``routes`` one per queue the producer's messages go to (explode_outer: one row with a null queue for a
    producer without routes), else one with a null queue (code -1). ``fm`` None: no fault windows (0)."""
    take: np.ndarray = idx
    if routes:
        lists = {p: [names.setdefault(q, len(names) - 1) for q in qs] for p, qs in routes.items()}
        uniq, inv = producer_codes(np.where(known[idx], prod[idx], -1))
        per = [(lists.get(int(p)) if p >= 0 else None) or [-1] for p in uniq.tolist()]
        lens = np.array([len(q) for q in per], dtype=np.int64)
        flat = np.array([x for q in per for x in q], dtype=np.int64)
        if int(lens.max(initial=1)) == 1:           # one queue per producer (no fan-out): one copy per row
            qcode = flat[inv]
        else:
            reps = lens[inv]
            flat_start = np.cumsum(lens) - lens                  # where each producer's queue codes start in ``flat``
            offsets = np.cumsum(reps) - reps                     # where each row's copies start
            within = np.arange(int(reps.sum()), dtype=np.int64) - np.repeat(offsets, reps)
            qcode = flat[np.repeat(flat_start[inv], reps) + within]
            take = np.repeat(idx, reps)
    else:
        qcode = np.full(idx.size, -1, dtype=np.int64)
    return Part(take.size, src=src, rc=rc, prod=(prod, take), seq=(seq, take), qcode=qcode, t=0, tnull=True, gt=-1,
                gm=(gm, take), fm=(fm, take) if fm is not None else 0, red=False, consumer=-1)


def wanted_rows(producer: pa.Array, seq: pa.Array, ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    """messages.wanted_column on the driver: True for rows outside the filter's dropped slot ranges."""
    p = producer.to_numpy(zero_copy_only=False).astype(np.int64)
    s = (seq.to_numpy(zero_copy_only=False).astype(np.int64) * SEQ_STEP + p * PRODUCER_STEP) % SLOTS
    dropped = np.zeros(s.shape, dtype=bool)
    for lo, hi in ranges:
        dropped |= (s >= lo) & (s < hi)
    out: np.ndarray = ~dropped
    return out
