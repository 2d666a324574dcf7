"""The reduce's three passes on the driver, for samples small enough (stats.DRIVER_MAX_ROWS).

A session's first Spark SQL query pays seconds of first use (class loading, JIT, code generation,
Arrow set-up; docs/timing.md) that dwarf the work on a short run's few hundred thousand rows. Here
the part files are read with pyarrow and every entry of the counting pass, the rows of the fetch pass
and the rows the message pass checks are evaluated with numpy, term for term as the Spark expressions
of rbench.reduce.counting and rbench.reduce.messages build them from the same Plan (windows, layers,
faults), and handed to the same functions downstream (plan_ranks / finish_ranks, check_messages).
tests/spark/test_reduce_paths.py reduces runs both ways and requires every figure to be equal.

Null handling follows Spark's: a comparison with a null is not true (a CASE skips it), an entry whose
key or sub-key is null is dropped, ``coalesce`` as written in rbench.reduce.counting.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
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
from rbench.reduce.message_checks import CANDIDATE, CUT, DELIVERY, check_messages, sum_counts
from rbench.reduce.messages import routes_of
from rbench.reduce.metrics import TL_PCTS
from rbench.reduce.percentiles import BUCKETS_PER_E, finish_ranks, plan_ranks
from rbench.reduce.plan import Plan
from rbench.samples import schema
from rbench.samples.schema import ACK, CONNECTION_LOST, MAY_BE_LOST, OUTCOMES

_PUB_COLS = ["producer", "queue", "seq", "step", "t_intended", "t_sent", "t_confirmed", "outcome"]
_CON_COLS = ["producer", "queue", "seq", "step", "t_intended", "t_sent", "t_received", "redelivered"]


class _Nullable:
    """An int64 column as values (nulls as 0) and a validity mask."""

    def __init__(self, col: pa.ChunkedArray) -> None:
        self.ok = ~col.is_null().to_numpy(zero_copy_only=False) if col.null_count else np.ones(len(col), dtype=bool)
        self.v = col.fill_null(0).to_numpy().astype(np.int64)


class _Side:
    """One (run, cluster) side's rows, read once with pyarrow."""

    def __init__(self, files: list[str], cols: list[str], arrow_schema: pa.Schema) -> None:
        tbl = pq.read_table(files, columns=cols, schema=arrow_schema) if files else arrow_schema.empty_table().select(cols)
        self.tbl = tbl
        self.n = tbl.num_rows
        self.num = {c: _Nullable(tbl.column(c)) for c in cols if pa.types.is_integer(arrow_schema.field(c).type)}

    def __getitem__(self, name: str) -> _Nullable:
        return self.num[name]


def _case(n: int, pairs: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray]:
    """plan.case: the value of the first true condition, null (ok False) when none is."""
    out = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    for cond, val in pairs:
        hit = cond & ~ok
        out[hit] = val
        ok |= hit
    return out, ok


class DriverPasses:
    """The counting, fetch and message passes of rbench.reduce.stats.reduce_samples over ``samples`` on the driver."""

    def __init__(self, samples: Any, plan: Plan) -> None:
        self.samples = samples
        self.plan = plan
        self.pub: list[tuple[str, str, int | None, _Side]] = []
        self.con: list[tuple[str, str, int | None, _Side]] = []
        for kind, run_id, cluster, files in samples.parts:
            rc = plan.rc_of(run_id, cluster)
            if kind == "published":
                self.pub.append((run_id, cluster, rc, _Side(files, _PUB_COLS, schema.PUBLISHED_SCHEMA)))
            else:
                self.con.append((run_id, cluster, rc, _Side(files, _CON_COLS, schema.CONSUMED_SCHEMA)))

    # --- the Plan's expressions, evaluated ---

    def _gid_tagged(self, rc: int, d: _Side) -> tuple[np.ndarray, np.ndarray]:
        s = d["step"]
        return _case(d.n, [(s.ok & (s.v == step), gid) for gid, step, _, _ in self.plan.by_rc.get(rc, [])])

    def _gid_measured(self, rc: int, d: _Side) -> tuple[np.ndarray, np.ndarray]:
        s, ti = d["step"], d["t_intended"]
        both = s.ok & ti.ok
        return _case(d.n, [(both & (s.v == step) & (ti.v >= m) & (ti.v < e), gid)
                           for gid, step, m, e in self.plan.by_rc.get(rc, [])])

    def _windows_of(self, rc: int, t: _Nullable) -> list[tuple[np.ndarray, np.ndarray]]:
        return [_case(t.v.size, [(t.ok & (t.v >= m) & (t.v < e), gid) for gid, m, e in layer]) for layer in self.plan.layers(rc)]

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

    def _entries(self, what: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        """(k, b, v) arrays of every kept entry (k and b not null; v None: null), as counting.entries."""
        out: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []

        def add(kind: int, ident: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray],
                v: np.ndarray | None = None) -> None:
            keep = ident[1] & b[1]
            out.append(((kind << SHIFT) + ident[0][keep], b[0][keep], None if v is None else v[keep]))

        if what == "all":
            for _, _, rc, d in self.pub:
                if rc is None:
                    continue
                n = d.n
                zero = (np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))
                oc = d.tbl.column("outcome").to_numpy(zero_copy_only=False)
                is_ack = oc == OUTCOMES[ACK]
                ts, tc = d["t_sent"], d["t_confirmed"]
                for w in self._windows_of(rc, ts):
                    add(PUBRATE, w, zero)
                for w in self._windows_of(rc, tc):
                    add(CONFRATE, (w[0], w[1] & is_ack), zero)
                code, has = _case(n, [(oc == name, i) for i, name in enumerate(OUTCOMES)])
                add(OUTCOME, self._gid_measured(rc, d), (np.where(has, code, len(OUTCOMES)), np.ones(n, dtype=bool)))
                rcs = np.full(n, rc, dtype=np.int64)
                add(TLPUB, (rcs, np.ones(n, dtype=bool)), (self._second(rc, ts), ts.ok))
                if rc in self.plan.faults:
                    add(TLCONF, (rcs, is_ack), (self._second(rc, tc), tc.ok))
                    add(FIRSTCONF, (rcs, is_ack), self._after_fault(rc, tc), -tc.v)
        for _, _, rc, d in self.con:
            if rc is None:
                continue
            n = d.n
            fresh = self._fresh(rc, d)
            tr, ti = d["t_received"], d["t_intended"]
            e2e = tr.v - ti.v
            e2e_ok = tr.ok & ti.ok
            tl = ((rc << 32) + self._second(rc, tr) + SEC_OFF, fresh & tr.ok)
            add(TLHIST, tl, (bucket_of(e2e), e2e_ok), e2e)
            if what != "all":
                continue
            for w in self._windows_of(rc, tr):
                add(CONRATE, (w[0], w[1] & fresh), (np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)))
            gm, gm_ok = self._gid_measured(rc, d)
            red = d.tbl.column("redelivered")
            red_v = red.fill_null(False).to_numpy(zero_copy_only=False).astype(np.int64)
            add(DELIV, (gm, gm_ok & fresh), (red_v, np.ones(n, dtype=bool)))
            add(TLHIST, tl, (np.full(n, NO_LAT, dtype=np.int64), ~e2e_ok))
            add(STALE, (np.full(n, rc, dtype=np.int64), ~fresh), (np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)))
        return out

    def counting(self) -> pa.Table | None:
        """counting.counting_pass: per (k, b) the count ``c`` and the max of ``v`` (``bmax``, null when every v is)."""
        if not any(rc is not None for *_, rc, _ in self.pub + self.con):
            return None
        ents = self._entries("all")
        k = np.concatenate([e[0] for e in ents])
        b = np.concatenate([e[1] for e in ents])
        has_v = np.concatenate([np.zeros(e[0].size, dtype=bool) if e[2] is None else np.ones(e[0].size, dtype=bool)
                                for e in ents])
        v = np.concatenate([np.zeros(e[0].size, dtype=np.int64) if e[2] is None else e[2] for e in ents])
        order = np.lexsort((b, k))
        k, b, has_v, v = k[order], b[order], has_v[order], v[order]
        if not k.size:
            return pa.table({"k": pa.array([], pa.int64()), "b": pa.array([], pa.int64()), "c": pa.array([], pa.int64()),
                             "bmax": pa.array([], pa.int64())})
        first = np.concatenate(([0], np.flatnonzero((np.diff(k) != 0) | (np.diff(b) != 0)) + 1))
        c = np.diff(np.append(first, k.size))
        vmax = np.maximum.reduceat(np.where(has_v, v, np.iinfo(np.int64).min), first)
        any_v = np.logical_or.reduceat(has_v, first)
        return pa.table({"k": pa.array(k[first]), "b": pa.array(b[first]), "c": pa.array(c.astype(np.int64)),
                         "bmax": pa.array(vmax, pa.int64(), mask=~any_v)})

    # --- pass 2: the values of the buckets holding a needed rank ---

    def timeline_ranks(self, hist: pa.Table) -> dict[int, dict[str, Any]]:
        """counting.latency_ranks for the timeline (TLHIST, TL_PCTS), the fetched rows taken from the arrays."""
        k = hist.column("k").to_numpy()
        b = hist.column("b").to_numpy()
        sel = ((k >> SHIFT) == TLHIST) & (b != NO_LAT)
        groups, fetch = plan_ranks(k[sel], b[sel], hist.column("c").to_numpy()[sel],
                                   hist.column("bmax").fill_null(0).to_numpy()[sel], TL_PCTS)
        if not groups:
            return {}
        ents = [e for e in self._entries("tl") if e[2] is not None]
        ek = np.concatenate([e[0] for e in ents])
        eb = np.concatenate([e[1] for e in ents])
        ev = np.concatenate([e[2] for e in ents if e[2] is not None])
        pick = _isin_pairs(ek, eb, sorted(fetch))
        return finish_ranks(groups, ek[pick], eb[pick], ev[pick])

    # --- pass 3: the rows the message checks read ---

    def messages(self) -> dict[tuple[int, int], dict[str, int]]:
        """messages.message_pass: the same rows (deliveries, expected copies, cut messages), checked by
        message_checks.check_messages in one call (every (rc, producer) together)."""
        routes = routes_of(self.samples)
        with_faults = bool(self.plan.faults)
        parts: list[dict[str, pa.Array]] = []
        for _, _, rc, d in self.con:
            keep = self._fresh(rc, d) if rc is not None else np.ones(d.n, dtype=bool)
            t = d.tbl.column("t_received").combine_chunks()
            gt = self._gid_tagged(rc, d) if rc is not None else None
            gm = self._gid_measured(rc, d) if rc is not None else None
            cols = {"src": np.full(d.n, DELIVERY, dtype=np.int8), "rc": np.full(d.n, -1 if rc is None else rc, dtype=np.int32),
                    "producer": d.tbl.column("producer").combine_chunks(), "queue": d.tbl.column("queue").combine_chunks(),
                    "seq": d.tbl.column("seq").combine_chunks(), "t": t, "gt": _nullable_long(gt, d.n),
                    "gm": _nullable_long(gm, d.n)}
            if with_faults:
                cols["fm"] = self._fault_mask(rc, d) if rc is not None else np.zeros(d.n, dtype=np.int64)
                cols["red"] = d.tbl.column("redelivered").combine_chunks()
            parts.append({name: _take(col, keep) for name, col in cols.items()})
        for run_id, _, rc, d in self.pub:
            if rc is None:
                continue
            oc = d.tbl.column("outcome").to_numpy(zero_copy_only=False)
            gm = self._gid_measured(rc, d)
            keep = self._gid_tagged(rc, d)[1] if rc in self.plan.faults else gm[1]
            base = {"producer": d.tbl.column("producer").combine_chunks(), "seq": d.tbl.column("seq").combine_chunks(),
                    "gm": _nullable_long(gm, d.n)}
            fm = self._fault_mask(rc, d) if with_faults else None
            cand = keep & np.isin(oc, list(MAY_BE_LOST))
            parts.append(self._expected(cand, base, rc, fm, routes.get(run_id), CANDIDATE))
            if rc in self.plan.faults:
                parts.append(self._expected(keep & (oc == OUTCOMES[CONNECTION_LOST]), base, rc, fm, None, CUT))
        if not parts:
            return {}
        names = ["src", "rc", "producer", "queue", "seq", "t", "gt", "gm", *(["fm", "red"] if with_faults else [])]
        types = {"src": pa.int8(), "rc": pa.int32(), "producer": pa.int32(), "queue": pa.string(), "seq": pa.int64(),
                 "t": pa.int64(), "gt": pa.int64(), "gm": pa.int64(), "fm": pa.int64(), "red": pa.bool_()}
        tbl = pa.table({n: pa.concat_arrays([pa.array(p[n], types[n]) if not isinstance(p[n], pa.Array) else p[n].cast(types[n])
                                             for p in parts]) for n in names})
        checked = check_messages(frozenset(self.plan.faults), iter(tbl.to_batches()))
        return sum_counts(r for batch in checked for r in batch.to_pylist())

    @staticmethod
    def _expected(sel: np.ndarray, base: dict[str, Any], rc: int, fm: np.ndarray | None,
                  routes: dict[int, list[str]] | None, src: int) -> dict[str, Any]:
        """Rows of ``sel``; with ``routes`` one per queue the producer's messages go to (explode_outer: one row with a
        null queue for a producer without routes), else one with a null queue."""
        idx = np.flatnonzero(sel)
        queues: list[str | None] = []
        if routes:
            prods = base["producer"].take(pa.array(idx)).to_pylist()
            rep: list[int] = []
            for i, p in zip(idx.tolist(), prods):
                qs = routes.get(p) if p is not None else None
                for q in (qs if qs else [None]):
                    rep.append(i)
                    queues.append(q)
            idx = np.array(rep, dtype=np.int64)
        else:
            queues = [None] * idx.size
        take = pa.array(idx, pa.int64())
        out: dict[str, Any] = {"src": np.full(idx.size, src, dtype=np.int8), "rc": np.full(idx.size, rc, dtype=np.int32),
                               "producer": base["producer"].take(take), "queue": pa.array(queues, pa.string()),
                               "seq": base["seq"].take(take), "t": pa.nulls(idx.size, pa.int64()),
                               "gt": pa.nulls(idx.size, pa.int64()), "gm": base["gm"].take(take)}
        if fm is not None:
            out["fm"] = fm[idx]
            out["red"] = pa.nulls(idx.size, pa.bool_())
        return out


def bucket_of(v: np.ndarray) -> np.ndarray:
    """percentiles.bucket_of on the driver. Only the fetch on the driver reads these buckets back, so a last-ulp
    difference from the JVM's log1p would only move a value between neighbouring buckets of both passes alike."""
    out: np.ndarray = (np.sign(v) * np.floor(np.log1p(np.abs(v).astype(np.float64)) * BUCKETS_PER_E)).astype(np.int64)
    return out


def _nullable_long(g: tuple[np.ndarray, np.ndarray] | None, n: int) -> pa.Array:
    if g is None:
        return pa.nulls(n, pa.int64())
    return pa.array(g[0], pa.int64(), mask=~g[1])


def _take(col: Any, keep: np.ndarray) -> Any:
    if isinstance(col, pa.Array):
        return col.filter(pa.array(keep))
    return col[keep]


def _isin_pairs(k: np.ndarray, b: np.ndarray, wanted: list[tuple[int, int]]) -> np.ndarray:
    """Whether each (k, b) is one of ``wanted`` (the broadcast semi-join of the fetch pass)."""
    pair = np.dtype([("k", np.int64), ("b", np.int64)])
    have = np.empty(k.size, dtype=pair)
    have["k"], have["b"] = k, b
    hit: np.ndarray = np.isin(have, np.array(wanted, dtype=pair))
    return hit
