"""The reduce's passes on the driver, one (run, cluster) at a time, for samples whose largest cluster fits the
driver's memory budget (rbench.reduce.stats.on_driver; docs/reduce.md "Where the passes run").

A session's first Spark SQL query pays seconds of first use (class loading, JIT, code generation, Arrow
set-up; docs/timing.md), and on one machine the Spark passes also move every row through Python workers
and a shuffle. Here each cluster's part files are read once with pyarrow (only the columns a pass reads),
and every entry of the counting pass, the rows of the fetch pass, the rows the message pass checks and the
step latencies are evaluated with numpy, term for term as the Spark expressions of rbench.reduce.counting
and rbench.reduce.messages build them from the same Plan (windows, layers, faults), and handed to the same
functions downstream (plan_ranks / finish_ranks, check_messages). Every figure is keyed by the cluster
(step ids, cluster ids, seconds of its timeline), so a cluster's rows are freed before the next is read:
memory is bounded by the largest cluster. tests/spark/test_reduce_paths.py reduces runs both ways and
requires every figure to be equal.

Speed: each group of entries is counted as it is made (one integer key per (k, b): a ``bincount`` when
the keys are dense, else one sort), not concatenated and sorted as pairs; window and step look-ups are
``searchsorted`` / table look-ups, not one comparison per window; the fetch pass reads the values of a
needed bucket as a slice of the already sorted timeline entries; the message rows are written once into their
columns (rbench.reduce.message_rows) and checked on packed keys (rbench.reduce.row_keys).

Null handling follows Spark's: a comparison with a null is not true (a CASE skips it), an entry whose
key or sub-key is null is dropped, ``coalesce`` as written in rbench.reduce.counting.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rbench.reduce.counting import (
    CONFRATE,
    CONRATE,
    DELIV,
    FIRSTCONF,
    NO_LAT,
    OUTCOME,
    PUBRATE,
    SEC_OFF,
    SHIFT,
    STALE,
    TLCONF,
    TLHIST,
    TLPUB,
)
from rbench.reduce.message_checks import CANDIDATE, CUT, DELIVERY, MSG_COUNTS, MessageRows, check_rows, sum_counts
from rbench.reduce.message_rows import Part, assemble, expected, queue_codes, wanted_rows
from rbench.reduce.messages import readers_of, routes_of, unwanted_of
from rbench.reduce.metrics import PERCENTILES, TL_PCTS
from rbench.reduce.percentiles import BUCKETS_PER_E, finish_ranks, plan_ranks
from rbench.reduce.plan import Plan
from rbench.reduce.step_latencies import Column, select_latencies
from rbench.samples import schema
from rbench.samples.schema import ACK, CONNECTION_LOST, MAY_BE_LOST, OUTCOMES

_PUB_COLS = ["producer", "seq", "step", "t_intended", "t_sent", "t_confirmed", "outcome"]
_CON_COLS = ["producer", "queue", "seq", "step", "t_intended", "t_sent", "t_received", "redelivered", "consumer"]
_I64_MIN, _I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


class _Nullable:
    """An integer column as int64 values (nulls as 0) and a validity mask."""

    def __init__(self, col: pa.ChunkedArray) -> None:
        n = len(col)
        if n and col.null_count == n:              # e.g. t_confirmed without confirms: nothing to convert
            self.ok, self.v = np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64)
            return
        self.ok = ~col.is_null().to_numpy(zero_copy_only=False) if col.null_count else np.ones(n, dtype=bool)
        if col.null_count:
            col = col.fill_null(0)
        self.v = np.empty(n, dtype=np.int64)       # each chunk written (and widened) once, in place
        at = 0
        for chunk in col.chunks:
            self.v[at:at + len(chunk)] = chunk.to_numpy()
            at += len(chunk)


class _Side:
    """One (run, cluster) side's rows, read once with pyarrow."""

    def __init__(self, files: list[str], cols: list[str], arrow_schema: pa.Schema) -> None:
        if files:
            tbl = pa.concat_tables([_read_part(f, cols, arrow_schema) for f in files])
        else:
            tbl = arrow_schema.empty_table().select(cols)
        self.tbl = tbl
        self.n = tbl.num_rows
        self.num = {c: _Nullable(tbl.column(c)) for c in cols if pa.types.is_integer(arrow_schema.field(c).type)}
        self.lock = threading.Lock()
        self.steps: tuple[np.ndarray, np.ndarray] | None = None    # DriverPasses._steps

    def __getitem__(self, name: str) -> _Nullable:
        return self.num[name]

    @cached_property
    def _outcomes(self) -> tuple[np.ndarray, np.ndarray]:
        col = self.tbl.column("outcome")
        if not pa.types.is_dictionary(col.type):
            col = col.dictionary_encode()
        codes, oks = [], []
        for chunk in col.chunks:             # the dictionary's few names looked up once, then indexed
            lookup = pc.index_in(chunk.dictionary, value_set=pa.array(OUTCOMES)).fill_null(-1).to_numpy(zero_copy_only=False)
            code = np.append(lookup, -1).astype(np.int64)[chunk.indices.fill_null(-1).to_numpy(zero_copy_only=False)]
            codes.append(code)
            oks.append(code >= 0)
        if not codes:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        return np.concatenate(codes), np.concatenate(oks)

    def outcome_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """The index of each row's outcome in OUTCOMES, and whether it has one (not null, a known name)."""
        return self._outcomes


_CODED = ("queue", "outcome")          # read as dictionaries: a few names, never a string per row
_CODED_TYPE = pa.dictionary(pa.int32(), pa.string())


def _read_side(files: list[str], cols: list[str], arrow_schema: pa.Schema, with_outcomes: bool = False) -> _Side:
    """A side, read; ``with_outcomes`` (the published side) computes its outcome codes once, here, before two
    threads read them."""
    side = _Side(files, cols, arrow_schema)
    if with_outcomes:
        side.outcome_codes()
    return side


def _read_part(path: str, cols: list[str], arrow_schema: pa.Schema) -> pa.Table:
    """``cols`` of one part file in the schema's types (``_CODED`` strings as dictionaries); a file without some
    column (an older writer) through the dataset reader, which fills nulls."""
    want = pa.schema([pa.field(c, _CODED_TYPE) if c in _CODED else arrow_schema.field(c) for c in cols])
    meta = pq.read_metadata(path)
    if not set(cols) <= set(meta.schema.names):
        tbl = pq.read_table(path, columns=cols, schema=arrow_schema)
    else:
        tbl = pq.ParquetFile(path, metadata=meta, read_dictionary=[c for c in _CODED if c in cols]).read(columns=cols)
    return tbl if tbl.schema.equals(want) else tbl.cast(want)


@dataclass(frozen=True)
class DriverResult:
    """What the driver's passes measured, in the shapes the Spark passes give (rbench.reduce.stats)."""

    hist: pa.Table | None                                  # the counting pass: k, b, c, bmax
    ranks: dict[int, dict[str, Any]]                       # the fetch pass: timeline percentiles
    msgs: dict[tuple[int, int], dict[str, int]]            # the message pass
    latencies: dict[tuple[int, int], dict[str, Any]]       # step latencies (step_latencies.step_latencies)


class _Counts:
    """The counting pass's aggregation for one cluster: each group of entries is counted as it is added."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.values: list[tuple[int, int, int, np.ndarray, np.ndarray]] = []   # kept TLHIST values: kmin, bmin, sb, key, v

    def add(self, kind: int, ident: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray],
            v: np.ndarray | None = None, keep_values: bool = False) -> None:
        """Entries (kind << SHIFT + ident, b, v) of the rows whose ident and b are not null."""
        keep = ident[1] & b[1]
        whole = bool(keep.all())                     # no copy of every row's arrays when every entry is kept
        ii = ident[0] if whole else ident[0][keep]
        bb = b[0] if whole else b[0][keep]
        if not ii.size:
            return
        vv = None if v is None else v if whole else v[keep]
        imin, imax, bmin, bmax = int(ii.min()), int(ii.max()), int(bb.min()), int(bb.max())
        kmin, kmax = (kind << SHIFT) + imin, (kind << SHIFT) + imax
        sb = bmax - bmin + 1
        span = (kmax - kmin + 1) * sb
        if span >= 1 << 62 or kmin < _I64_MIN or kmax > _I64_MAX:   # keys too spread for one integer: sort the pairs
            k = (kind << SHIFT) + ii
            order = np.lexsort((bb, k))
            sk, sbb = k[order], bb[order]
            first = np.flatnonzero(np.concatenate(([True], (sk[1:] != sk[:-1]) | (sbb[1:] != sbb[:-1]))))
            self._part(sk[first], sbb[first], np.diff(np.append(first, k.size)), vv, order, first)
            return
        key = np.subtract(ii, imin, dtype=np.int64)  # (k - kmin) * sb + (b - bmin), in place
        key *= sb
        np.add(key, bb, out=key, casting="unsafe")
        if bmin:
            key -= bmin
        if vv is None and span <= 2 * key.size + 4096:
            cnt = np.bincount(key, minlength=span)
            nz = np.flatnonzero(cnt)
            self._part(kmin + nz // sb, bmin + nz % sb, cnt[nz], None, None, None)
            return
        if vv is None:
            uk, cnt = np.unique(key, return_counts=True)
            self._part(kmin + uk // sb, bmin + uk % sb, cnt, None, None, None)
            return
        order = np.argsort(key)
        skey = key[order]
        first = np.flatnonzero(np.concatenate(([True], skey[1:] != skey[:-1])))
        uk = skey[first]
        self._part(kmin + uk // sb, bmin + uk % sb, np.diff(np.append(first, key.size)), vv, order, first)
        if keep_values:
            self.values.append((kmin, bmin, sb, skey, vv[order]))

    def _part(self, k: np.ndarray, b: np.ndarray, c: np.ndarray, v: np.ndarray | None, order: np.ndarray | None,
              first: np.ndarray | None) -> None:
        if v is None:
            vmax, has = np.zeros(k.size, dtype=np.int64), np.zeros(k.size, dtype=bool)
        else:
            assert order is not None and first is not None
            vmax, has = np.maximum.reduceat(v[order], first), np.ones(k.size, dtype=bool)
        self.parts.append((k.astype(np.int64), b.astype(np.int64), c.astype(np.int64), vmax, has))

    def fetch(self, wanted: set[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(k, b, v) of every kept value whose (k, b) is ``wanted``: slices of the sorted entries."""
        ks, bs, vs = [], [], []
        for kmin, bmin, sb, skey, sv in self.values:
            for k, b in sorted(wanted):
                if not 0 <= b - bmin < sb or k < kmin:
                    continue
                key = (k - kmin) * sb + (b - bmin)
                lo, hi = np.searchsorted(skey, [key, key + 1])
                if hi > lo:
                    ks.append(np.full(hi - lo, k, dtype=np.int64))
                    bs.append(np.full(hi - lo, b, dtype=np.int64))
                    vs.append(sv[lo:hi])
        if not ks:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        return np.concatenate(ks), np.concatenate(bs), np.concatenate(vs)


def merge_counts(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> pa.Table:
    """The counted groups as counting.counting_pass's table: per (k, b) the count ``c`` and the max of ``v``
    (``bmax``, null when every v is)."""
    if not parts:
        return pa.table({"k": pa.array([], pa.int64()), "b": pa.array([], pa.int64()), "c": pa.array([], pa.int64()),
                         "bmax": pa.array([], pa.int64())})
    k, b, c, v, has = (np.concatenate([p[i] for p in parts]) for i in range(5))
    order = np.lexsort((b, k))
    k, b, c, v, has = k[order], b[order], c[order], v[order], has[order]
    first = np.flatnonzero(np.concatenate(([True], (k[1:] != k[:-1]) | (b[1:] != b[:-1]))))
    vmax = np.maximum.reduceat(np.where(has, v, _I64_MIN), first)
    any_v = np.logical_or.reduceat(has, first)
    return pa.table({"k": pa.array(k[first]), "b": pa.array(b[first]), "c": pa.array(np.add.reduceat(c, first)),
                     "bmax": pa.array(vmax, pa.int64(), mask=~any_v)})


class DriverPasses:
    """The counting, fetch and message passes and the step latencies of rbench.reduce.stats.reduce_samples over
    ``samples`` on the driver, one (run, cluster) at a time."""

    def __init__(self, samples: Any, plan: Plan) -> None:
        self.samples = samples
        self.plan = plan
        self.files: dict[int, dict[str, list[str]]] = {}
        for kind, run_id, cluster, files in samples.parts:
            rc = plan.rc_of(run_id, cluster)
            if rc is not None:      # a cluster without step windows: its rows count in no figure (as in Spark)
                self.files.setdefault(rc, {}).setdefault(kind, []).extend(files)
        self.names = {rc: key for key, rc in plan.rc.items()}
        self.routes = routes_of(samples)
        self.unwanted = unwanted_of(samples)
        self.readers = readers_of(samples, plan)

    def run(self, mark: Callable[[str], None]) -> DriverResult:
        """Every cluster in turn, on two threads (numpy and pyarrow release the GIL in their reads, sorts and array
        arithmetic: two cores, when there are two): the published side is read beside the consumed one, then the
        message check and the published side's counting run beside the consumed side's counting, fetch and the
        step latencies."""
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        ranks: dict[int, dict[str, Any]] = {}
        msg_rows: list[dict[str, int]] = []
        lat: dict[tuple[int, int], dict[str, Any]] = {}
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rbench-reduce") as pool:
            for rc in sorted(self.files):
                run_id, cluster = self.names[rc]
                reading = pool.submit(_read_side, self.files[rc].get("published", []), _PUB_COLS,
                                      schema.PUBLISHED_SCHEMA, with_outcomes=True)
                con = _Side(self.files[rc].get("consumed", []), _CON_COLS, schema.CONSUMED_SCHEMA)
                pub = reading.result()
                checked = pool.submit(self._messages, rc, run_id, pub, con)
                pub_counts = _Counts()
                counted = pool.submit(self._count_published, rc, pub, pub_counts)
                counts = _Counts()
                self._count_consumed(rc, con, counts)
                ranks.update(self._timeline_ranks(counts))
                wins, t0 = self.plan.by_rc[rc], self.plan.t0[rc]
                if pub.n:
                    lat.update(select_latencies("published", _columns(pub), wins, PERCENTILES, t0))
                if con.n:
                    lat.update(select_latencies("consumed", _columns(con), wins, PERCENTILES, t0))
                msg_rows += checked.result()
                counted.result()
                parts += counts.parts + pub_counts.parts
                mark(f"driver passes, {cluster}: {pub.n + con.n:,} rows")
        hist = merge_counts(parts) if self.files else None
        return DriverResult(hist, ranks, sum_counts(msg_rows), lat)

    def _messages(self, rc: int, run_id: str, pub: _Side, con: _Side) -> list[dict[str, int]]:
        """The message pass of one cluster: its rows, checked."""
        names: dict[str | None, int] = {None: -1}
        rows = self._message_rows(rc, run_id, pub, con, names)
        if rows is None or not rows.src.size:
            return []
        queue_names = [q for q, code in sorted(names.items(), key=lambda kv: kv[1]) if code >= 0]
        checked = check_rows(frozenset(self.plan.faults), rows, self.readers, queue_names)
        return [{"kind": kind, "gid": gid, **dict(zip(MSG_COUNTS, c, strict=True))} for (kind, gid), c in checked.items()]

    # --- the Plan's expressions, evaluated ---

    def _step_table(self, rc: int, d: _Side) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per row the gid of its step's window (the first of the step, as in CASE), whether it has one, and the
        window's start and end."""
        wins = self.plan.by_rc[rc]
        s = d["step"]
        lo = min(w[1] for w in wins)
        size = max(w[1] for w in wins) - lo + 1
        gid, start, end, has = (np.zeros(size, dtype=np.int64), np.zeros(size, dtype=np.int64),
                                np.zeros(size, dtype=np.int64), np.zeros(size, dtype=bool))
        for g, step, m, e in reversed(wins):           # the first window of a step wins, as in CASE
            gid[step - lo], start[step - lo], end[step - lo], has[step - lo] = g, m, e, True
        idx = s.v - lo
        inside = s.ok & (idx >= 0) & (idx < size)
        idx = np.where(inside, idx, 0)
        ok = inside & has[idx]
        return gid[idx], ok, start[idx], end[idx]

    def _windows_of(self, rc: int, t: _Nullable) -> list[tuple[np.ndarray, np.ndarray]]:
        """plan.windows_of: per layer of non-overlapping windows, the gid of the window holding ``t``."""
        out = []
        for layer in self.plan.layers(rc):
            starts = np.array([m for _, m, _ in layer], dtype=np.int64)
            ends = np.array([e for _, _, e in layer], dtype=np.int64)
            gids = np.array([g for g, _, _ in layer], dtype=np.int64)
            i = np.searchsorted(starts, t.v, side="right") - 1
            j = np.maximum(i, 0)
            out.append((gids[j], t.ok & (i >= 0) & (t.v < ends[j])))
        return out

    def _fresh(self, rc: int, d: _Side) -> np.ndarray:
        ti = d["t_intended"]
        fresh: np.ndarray = ~ti.ok | (ti.v >= self.plan.t0[rc])
        return fresh

    def _second(self, rc: int, t: _Nullable) -> np.ndarray:
        sec: np.ndarray = np.floor((t.v - self.plan.t0[rc]) / 1e9).astype(np.int64)
        return sec

    def _fault_mask(self, rc: int, d: _Side) -> np.ndarray:
        t = d["t_sent"]
        out = np.zeros(d.n, dtype=np.int64)
        for bit, (_, lo, hi) in enumerate(self.plan.faults.get(rc, [])):
            out += np.where(t.ok & (t.v >= lo) & (t.v < hi), 1 << bit, 0)
        return out

    def _after_fault(self, rc: int, t: _Nullable) -> tuple[np.ndarray, np.ndarray]:
        starts = self.plan.fault_starts(rc)
        return _case(t.v.size, [(t.ok & (t.v > s), i) for i, s in reversed(list(enumerate(starts)))])

    # --- pass 1: the (k, b, v) entries, counted ---

    def _count_published(self, rc: int, d: _Side, counts: _Counts) -> None:
        n = d.n
        if not n:
            return
        zero = (np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))
        code, has = d.outcome_codes()
        is_ack = has & (code == ACK)
        ts, tc = d["t_sent"], d["t_confirmed"]
        for w in self._windows_of(rc, ts):
            counts.add(PUBRATE, w, zero)
        for w in self._windows_of(rc, tc):
            counts.add(CONFRATE, (w[0], w[1] & is_ack), zero)
        gm = self._steps(rc, d)[1]                    # plan.gid_measured, -1: none
        counts.add(OUTCOME, (gm, gm >= 0), (np.where(has, code, len(OUTCOMES)), np.ones(n, dtype=bool)))
        rcs = np.full(n, rc, dtype=np.int64)
        counts.add(TLPUB, (rcs, np.ones(n, dtype=bool)), (self._second(rc, ts), ts.ok))
        if rc in self.plan.faults:
            counts.add(TLCONF, (rcs, is_ack), (self._second(rc, tc), tc.ok))
            counts.add(FIRSTCONF, (rcs, is_ack), self._after_fault(rc, tc), -tc.v)

    def _count_consumed(self, rc: int, d: _Side, counts: _Counts) -> None:
        n = d.n
        if not n:
            return
        fresh = self._fresh(rc, d)
        tr, ti = d["t_received"], d["t_intended"]
        e2e = tr.v - ti.v
        e2e_ok = tr.ok & ti.ok
        tl = ((rc << 32) + self._second(rc, tr) + SEC_OFF, fresh & tr.ok)
        counts.add(TLHIST, tl, (bucket_of(e2e), e2e_ok), e2e, keep_values=True)
        for w in self._windows_of(rc, tr):
            counts.add(CONRATE, (w[0], w[1] & fresh), (np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)))
        gm = self._steps(rc, d)[1]
        red_v = d.tbl.column("redelivered").fill_null(False).to_numpy(zero_copy_only=False).astype(np.int64)
        counts.add(DELIV, (gm, (gm >= 0) & fresh), (red_v, np.ones(n, dtype=bool)))
        counts.add(TLHIST, tl, (np.full(n, NO_LAT, dtype=np.int64), ~e2e_ok))
        counts.add(STALE, (np.full(n, rc, dtype=np.int64), ~fresh), (np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)))

    # --- pass 2: the values of the buckets holding a needed rank ---

    def _timeline_ranks(self, counts: _Counts) -> dict[int, dict[str, Any]]:
        """counting.latency_ranks for the timeline (TLHIST, TL_PCTS) of one cluster, the fetched rows sliced
        from its sorted timeline entries."""
        hist = merge_counts([p for p in counts.parts if p[0].size and int(p[0][0]) >> SHIFT == TLHIST])
        k = hist.column("k").to_numpy()
        b = hist.column("b").to_numpy()
        sel = b != NO_LAT
        groups, fetch = plan_ranks(k[sel], b[sel], hist.column("c").to_numpy()[sel],
                                   hist.column("bmax").fill_null(0).to_numpy()[sel], TL_PCTS)
        if not groups:
            return {}
        return finish_ranks(groups, *counts.fetch(fetch))

    # --- pass 3: the rows the message checks read ---

    def _message_rows(self, rc: int, run_id: str, pub: _Side, con: _Side, names: dict[str | None, int]
                      ) -> MessageRows | None:
        """messages.message_pass's rows of one cluster (deliveries, expected copies, cut messages) as numpy columns;
        ``names``: queue name → code, filled as names are met."""
        parts: list[Part] = []
        if con.n:
            fresh = self._fresh(rc, con)
            n = int(fresh.sum())
            keep = fresh if n < con.n else None       # every delivery fresh (the usual case): no gathers

            def rows(v: np.ndarray) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
                return v if keep is None else (v, keep)
            t, cons = con["t_received"], con["consumer"]
            gt, gm = self._steps(rc, con)
            red = con.tbl.column("redelivered").fill_null(False).to_numpy(zero_copy_only=False)
            parts.append(Part(
                n, src=DELIVERY, rc=rc, prod=rows(con["producer"].v), seq=rows(con["seq"].v),
                qcode=rows(queue_codes(con.tbl.column("queue"), names)), t=rows(t.v), tnull=rows(~t.ok), gt=rows(gt),
                gm=rows(gm), fm=rows(self._fault_mask(rc, con)) if self.plan.faults else 0, red=rows(red),
                consumer=rows(cons.v if cons.ok.all() else np.where(cons.ok, cons.v, -1))))
        if pub.n:
            code, has = pub.outcome_codes()
            gt, gm = self._steps(rc, pub)
            keep_pub = gt >= 0 if rc in self.plan.faults else gm >= 0
            fm = self._fault_mask(rc, pub) if self.plan.faults else None
            may_be_lost = np.array([OUTCOMES.index(o) for o in MAY_BE_LOST], dtype=np.int64)
            cand = keep_pub & has & np.isin(code, may_be_lost)
            if run_id in self.unwanted:     # messages every consumer's stream filter drops are expected nowhere
                cand &= wanted_rows(pub.tbl.column("producer").combine_chunks(), pub.tbl.column("seq").combine_chunks(),
                                    self.unwanted[run_id])
            prod, seq = pub["producer"], pub["seq"].v
            parts.append(expected(np.flatnonzero(cand), prod.v, prod.ok, seq, gm, fm, rc, self.routes.get(run_id), names,
                                  CANDIDATE))
            if rc in self.plan.faults:
                cut = keep_pub & has & (code == CONNECTION_LOST)
                parts.append(expected(np.flatnonzero(cut), prod.v, prod.ok, seq, gm, fm, rc, None, names, CUT))
        if not parts:
            return None
        return assemble(parts)

    def _steps(self, rc: int, d: _Side) -> tuple[np.ndarray, np.ndarray]:
        """plan.gid_tagged and plan.gid_measured of every row, -1 for null; made once per side, by whichever of the
        two threads asks first (the counting and the message check both read them)."""
        with d.lock:
            if d.steps is None:
                if not self.plan.by_rc.get(rc) or not d.n:
                    none = np.full(d.n, -1, dtype=np.int64)
                    d.steps = none, none
                else:
                    gid, ok, start, end = self._step_table(rc, d)
                    ti = d["t_intended"]
                    d.steps = np.where(ok, gid, -1), np.where(ok & ti.ok & (ti.v >= start) & (ti.v < end), gid, -1)
            return d.steps


def _columns(d: _Side) -> dict[str, Column]:
    return {name: (col.v, None if col.ok.all() else col.ok) for name, col in d.num.items()}


def _case(n: int, pairs: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray]:
    """plan.case: the value of the first true condition, null (ok False) when none is."""
    out = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    for cond, val in pairs:
        hit = cond & ~ok
        out[hit] = val
        ok |= hit
    return out, ok


def bucket_of(v: np.ndarray) -> np.ndarray:
    """percentiles.bucket_of on the driver. Only the fetch on the driver reads these buckets back, so a last-ulp
    difference from the JVM's log1p would only move a value between neighbouring buckets of both passes alike."""
    x = np.abs(v).astype(np.float64)           # sign(v) * floor(log1p(|v|) * B), in place
    np.log1p(x, out=x)
    x *= BUCKETS_PER_E
    np.floor(x, out=x)
    x *= np.sign(v)
    out: np.ndarray = x.astype(np.int64)
    return out
