"""The message pass's check, with numpy (rbench.reduce.stats' docstring, step 4): one call per hash
partition (every row of some (run, cluster, producer)) counts reorders per (producer, queue) in receive
order, distinct and duplicated copies per step, and losses (a sort-merge membership test); for the clusters
that had a fault the same per run and per fault window, plus the messages in flight at a cut. Spark runs it
with mapInArrow (rbench.reduce.messages), the driver directly (rbench.reduce.small)."""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from rbench.reduce.plan import MAX_FAULTS

MSG_COUNTS = ("reordered", "consumed_unique", "duplicated", "lost", "expected",
              "connection_lost", "connection_lost_consumed", "redelivered")
STEP_GROUP, RUN_GROUP, FAULT_GROUP = 0, 1, 2   # what a message-pass count is of: a step (gid), a run's cluster (rc), a fault
MSG_ARROW = pa.schema([("kind", pa.int8()), ("gid", pa.int64()), *[(c, pa.int64()) for c in MSG_COUNTS]])
DELIVERY, CANDIDATE, CUT = 1, 0, 2             # src of a message-pass row: a delivery, an expected copy, a connection_lost message


def sum_counts(rows: Iterable[dict[str, int]]) -> dict[tuple[int, int], dict[str, int]]:
    """(kind, gid) → MSG_COUNTS summed over the partitions' result rows."""
    out: dict[tuple[int, int], dict[str, int]] = {}
    for r in rows:
        d = out.setdefault((r["kind"], r["gid"]), {c: 0 for c in MSG_COUNTS})
        for key in d:
            d[key] += r[key]
    return out


def _groups_of(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort order of rows by ``cols`` (first = primary) and the group number of each sorted row."""
    order = np.lexsort(tuple(reversed(cols)))
    if order.size == 0:
        return order, order
    change = np.zeros(order.size, dtype=bool)
    for c in cols:
        s = c[order]
        change[1:] |= s[1:] != s[:-1]
    return order, np.cumsum(change)


def check_messages(faulted: frozenset[int], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One hash partition (all rows of some (rc, producer)): per gid reorders, distinct, duplicated, lost;
    for the clusters in ``faulted`` the same (and the cut messages) per run and per fault window."""
    got = [b for b in batches if b.num_rows]
    if not got:
        return
    tbl = pa.Table.from_batches(got)
    src = tbl.column("src").to_numpy()
    rc = tbl.column("rc").to_numpy().astype(np.int64)
    prod = tbl.column("producer").to_numpy(zero_copy_only=False).astype(np.int64)
    seq = tbl.column("seq").to_numpy(zero_copy_only=False)
    gt = tbl.column("gt").fill_null(-1).to_numpy()
    gm = tbl.column("gm").fill_null(-1).to_numpy()
    # queue codes shared by deliveries and expected copies (-1: a published row whose routes are unknown)
    qall = tbl.column("queue").dictionary_encode().combine_chunks()
    qcodes = np.where(qall.is_null().to_numpy(zero_copy_only=False), -1,
                      qall.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64))
    # fault columns exist only when some cluster had a fault; a row counts for its run when its cluster did
    fm = tbl.column("fm").to_numpy() if "fm" in tbl.column_names else np.zeros(tbl.num_rows, dtype=np.int64)
    red = (tbl.column("red").fill_null(False).to_numpy(zero_copy_only=False) if "red" in tbl.column_names
           else np.zeros(tbl.num_rows, dtype=bool))
    in_run = np.isin(rc, np.array(sorted(faulted), dtype=np.int64)) & ((src != DELIVERY) | (gt >= 0))
    acc: dict[tuple[int, int], list[int]] = {}

    def add_ids(kind: int, col: int, ids_: np.ndarray) -> None:
        ids, cnt = np.unique(ids_, return_counts=True)
        for g, c in zip(ids.tolist(), cnt.tolist()):
            acc.setdefault((kind, g), [0] * len(MSG_COUNTS))[col] += c

    def add(col: int, gids: np.ndarray) -> None:
        """Step counts: ``gids`` of the counted rows (only measured ones, gid ≥ 0, count)."""
        add_ids(STEP_GROUP, col, gids[gids >= 0])

    def add_wide(col: int, rows: np.ndarray) -> None:
        """Run and fault-window counts of the counted ``rows`` (indices) of faulted clusters."""
        rows = rows[in_run[rows]]
        if not rows.size:
            return
        add_ids(RUN_GROUP, col, rc[rows])
        bits = int(np.bitwise_or.reduce(fm[rows]))
        for bit in range(MAX_FAULTS):
            if bits >> bit & 1:
                sel = rows[(fm[rows] >> bit) & 1 == 1]
                add_ids(FAULT_GROUP, col, rc[sel] * 64 + bit)

    con = np.flatnonzero(src == DELIVERY)
    if con.size:
        # reorders: per (rc, producer, queue) in receive order (t_received, then seq), seq below the max before it
        qcode = qcodes[con]
        t = tbl.column("t").take(pa.array(con))
        tnull = t.is_null().to_numpy(zero_copy_only=False)
        tv = t.fill_null(0).to_numpy()
        # Spark's window sorts nulls first (ascending)
        order, grp = _groups_of(rc[con], prod[con], qcode, (~tnull).astype(np.int64), tv, seq[con])
        s_seq = seq[con][order]
        g_start = np.flatnonzero(np.diff(np.concatenate(([-1], _runs(rc[con][order], prod[con][order], qcode[order])))) != 0)
        reord = np.zeros(order.size, dtype=bool)
        for a, b in zip(g_start.tolist(), np.append(g_start[1:], order.size).tolist()):
            x = s_seq[a:b]
            if x.size > 1:
                prev = np.maximum.accumulate(x)[:-1]
                reord[a + 1:b] = x[1:] < prev
        add(0, gm[con][order][reord])
        add_wide(0, con[order][reord])
        # distinct and duplicated copies among the measured deliveries of each step: a message fanned out to
        # three queues is three copies, each expected once
        mi = con[gm[con] >= 0]
        if mi.size:
            order2, grp2 = _groups_of(gm[mi], prod[mi], seq[mi], qcodes[mi])
            counts = np.bincount(grp2)
            first = np.concatenate(([0], np.flatnonzero(np.diff(grp2)) + 1))
            g_of = gm[mi][order2][first]
            add(1, g_of)
            add(2, g_of[counts > 1])
        # the same over every delivery of a faulted cluster's run (copies share their stamp, so their t_sent)
        ri = con[in_run[con]]
        if ri.size:
            order3, grp3 = _groups_of(rc[ri], prod[ri], seq[ri], qcodes[ri])
            counts3 = np.bincount(grp3)
            reps = ri[order3][np.concatenate(([0], np.flatnonzero(np.diff(grp3)) + 1))]
            add_wide(1, reps)
            add_wide(2, reps[counts3 > 1])
            add_wide(7, ri[red[ri]])
    pub = np.flatnonzero(src == CANDIDATE)
    # lost: an expected copy of a ack/unconfirmed message that no delivery (with a step window) of its queue has
    # at any time; with unknown routes, a message no delivery of any queue has
    seen = con[gt[con] >= 0] if con.size else con
    if pub.size:
        add(4, gm[pub])
        add_wide(4, pub)
        routed = pub[qcodes[pub] >= 0]
        if routed.size:
            lost = routed[_missing(rc, prod, seq, qcodes, seen, routed)]
            add(3, gm[lost])
            add_wide(3, lost)
        anywhere = pub[qcodes[pub] < 0]
        if anywhere.size:
            lost = anywhere[_missing(rc, prod, seq, np.zeros_like(qcodes), seen, anywhere)]
            add(3, gm[lost])
            add_wide(3, lost)
    cut = np.flatnonzero(src == CUT)
    if cut.size:
        add_wide(5, cut)
        add_wide(6, cut[~_missing(rc, prod, seq, np.zeros_like(qcodes), seen, cut)])
    if acc:
        keys = sorted(acc)
        cols = list(zip(*[acc[k] for k in keys]))
        yield pa.RecordBatch.from_arrays([pa.array([k[0] for k in keys], pa.int8()), pa.array([k[1] for k in keys], pa.int64()),
                                          *[pa.array(c, pa.int64()) for c in cols]], schema=MSG_ARROW)


def _missing(rc: np.ndarray, prod: np.ndarray, seq: np.ndarray, queue: np.ndarray, seen: np.ndarray, rows: np.ndarray
             ) -> np.ndarray:
    """For each of ``rows`` (indices), whether no row of ``seen`` has its (rc, producer, seq, queue)
    (a sort-merge membership test); a boolean array in the order of ``rows``."""
    both = np.concatenate((seen, rows))
    flag = np.concatenate((np.zeros(seen.size, dtype=np.int64), np.ones(rows.size, dtype=np.int64)))
    order, _ = _groups_of(rc[both], prod[both], seq[both], queue[both], flag)
    key_grp = _runs(rc[both][order], prod[both][order], seq[both][order], queue[both][order])
    has_seen = np.zeros(int(key_grp.max()) + 1, dtype=bool)
    is_seen = flag[order] == 0
    has_seen[key_grp[is_seen]] = True
    missing_sorted = (~is_seen) & ~has_seen[key_grp]
    out = np.zeros(both.size, dtype=bool)
    out[order] = missing_sorted
    result: np.ndarray = out[seen.size:]
    return result


def _runs(*cols: np.ndarray) -> np.ndarray:
    """Run number of each row of already sorted ``cols`` (a new run where any column changes)."""
    n = cols[0].size
    change = np.zeros(n, dtype=bool)
    for c in cols:
        change[1:] |= c[1:] != c[:-1]
    return np.cumsum(change)

