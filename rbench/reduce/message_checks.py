"""The message pass's check, with numpy (rbench.reduce.stats' docstring, step 4): one call per hash
partition (every row of some (run, cluster, producer)) counts reorders per (producer, queue, consumer) in
receive order, distinct and duplicated copies per step, and losses (a sort-merge membership test); for every cluster
its deliveries, distinct and duplicated copies and flagged redeliveries over its whole run (the re-reads and
redeliveries the summary reconciles, rbench.reduce.rereads); for the clusters that had a fault the same per
run and per fault window, plus the messages in flight at a cut. Spark runs it
with mapInArrow (rbench.reduce.messages, check_messages), the driver on numpy columns (rbench.reduce.small,
check_rows)."""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np
import pyarrow as pa

from rbench.reduce.plan import MAX_FAULTS
from rbench.reduce.row_keys import Key, absent, as_index, key_counts, pack, small_ids

MSG_COUNTS = ("reordered", "consumed_unique", "duplicated", "lost", "expected",
              "connection_lost", "connection_lost_consumed", "redelivered", "deliveries")
# what a message-pass count is of: a step (gid), a faulted run's cluster (rc: messages of a step with a window), a
# fault, every fresh delivery of a run's cluster (rc)
STEP_GROUP, RUN_GROUP, FAULT_GROUP, WHOLE_GROUP = 0, 1, 2, 3
MSG_ARROW = pa.schema([("kind", pa.int8()), ("gid", pa.int64()), *[(c, pa.int64()) for c in MSG_COUNTS]])
DELIVERY, CANDIDATE, CUT = 1, 0, 2             # src of a message-pass row: a delivery, an expected copy, a connection_lost message
# rc → queue → the consumers that each read every message of it (a stream's consumers outside a single-active group)
Readers = Mapping[int, Mapping[str, tuple[int, ...]]]


def sum_counts(rows: Iterable[dict[str, int]]) -> dict[tuple[int, int], dict[str, int]]:
    """(kind, gid) → MSG_COUNTS summed over the partitions' result rows."""
    out: dict[tuple[int, int], dict[str, int]] = {}
    for r in rows:
        d = out.setdefault((r["kind"], r["gid"]), {c: 0 for c in MSG_COUNTS})
        for key in d:
            d[key] += r[key]
    return out


def _packed(cols: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """The same lexicographic order in fewer keys: neighbouring integer columns whose value ranges multiply
    below 2^62 become one int64 (mixed radix, each less its minimum). A sort on one or two keys instead of
    five or six is what makes the message check fast."""
    if not cols or cols[0].size == 0:
        return list(cols)
    out: list[np.ndarray] = []
    cur: np.ndarray | None = None
    cur_span = 1
    for c in cols:
        lo, hi = int(c.min()), int(c.max())
        span = hi - lo + 1
        if cur is not None and cur_span * span < 1 << 62:
            if span == 1:                                 # one value: adds 0 to every key
                continue
            cur *= span                                   # in place: an int64 that wraps in between ends exact
            np.add(cur, c, out=cur, casting="unsafe")
            if lo:
                cur -= lo
            cur_span *= span
        else:
            if cur is not None:
                out.append(cur)
            cur, cur_span = np.subtract(c, lo, dtype=np.int64, casting="unsafe"), span
    assert cur is not None
    out.append(cur)
    return out


def _groups_of(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort order of rows by ``cols`` (first = primary) and the group number of each sorted row."""
    keys = _packed(cols)
    order = np.argsort(keys[0], kind="stable") if len(keys) == 1 else np.lexsort(tuple(reversed(keys)))
    if order.size == 0:
        return order, order
    change = np.zeros(order.size, dtype=bool)
    for c in keys:
        s = c[order]
        change[1:] |= s[1:] != s[:-1]
    return order, np.cumsum(change)


@dataclass(frozen=True)
class MessageRows:
    """The message pass's rows as numpy columns (what check_rows reads): ``src`` DELIVERY / CANDIDATE / CUT,
    ``rc``, ``prod``, ``seq``, ``qcode`` (a code per queue name, shared by deliveries and expected copies; -1: a
    published row whose routes are unknown), ``t`` (t_received, valid where not ``tnull``), ``gt`` and ``gm``
    (tagged / measured step id, -1: none), ``fm`` (fault-window bits), ``red`` (flagged redelivered), ``consumer``
    (a delivery's consumer, -1: none or unknown)."""

    src: np.ndarray
    rc: np.ndarray
    prod: np.ndarray
    seq: np.ndarray
    qcode: np.ndarray
    t: np.ndarray
    tnull: np.ndarray
    gt: np.ndarray
    gm: np.ndarray
    fm: np.ndarray
    red: np.ndarray
    consumer: np.ndarray


def check_messages(faulted: frozenset[int], batches: Iterator[pa.RecordBatch], readers: Readers | None = None
                   ) -> Iterator[pa.RecordBatch]:
    """One hash partition (all rows of some (rc, producer)) as Arrow (Spark's mapInArrow): check_rows. The rows'
    ``consumer`` column (deliveries; absent: one consumer) names a delivery's reader."""
    got = [b for b in batches if b.num_rows]
    if not got:
        return
    tbl = pa.Table.from_batches(got)
    # queue codes shared by deliveries and expected copies (-1: a published row whose routes are unknown)
    qall = tbl.column("queue").dictionary_encode().combine_chunks()
    t = tbl.column("t")
    rows = MessageRows(
        src=tbl.column("src").to_numpy(), rc=tbl.column("rc").to_numpy().astype(np.int64),
        prod=tbl.column("producer").to_numpy(zero_copy_only=False).astype(np.int64),
        seq=tbl.column("seq").to_numpy(zero_copy_only=False),
        qcode=np.where(qall.is_null().to_numpy(zero_copy_only=False), -1,
                       qall.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)),
        t=t.fill_null(0).to_numpy(), tnull=t.is_null().to_numpy(zero_copy_only=False),
        gt=tbl.column("gt").fill_null(-1).to_numpy(), gm=tbl.column("gm").fill_null(-1).to_numpy(),
        # fault columns exist only when some cluster had a fault; a row counts for its run when its cluster did
        fm=tbl.column("fm").to_numpy() if "fm" in tbl.column_names else np.zeros(tbl.num_rows, dtype=np.int64),
        red=(tbl.column("red").fill_null(False).to_numpy(zero_copy_only=False) if "red" in tbl.column_names
             else np.zeros(tbl.num_rows, dtype=bool)),
        consumer=(tbl.column("consumer").fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
                  if "consumer" in tbl.column_names else np.full(tbl.num_rows, -1, dtype=np.int64)))
    acc = check_rows(faulted, rows, readers, qall.dictionary.to_pylist())
    if acc:
        keys = sorted(acc)
        cols = list(zip(*[acc[k] for k in keys]))
        yield pa.RecordBatch.from_arrays([pa.array([k[0] for k in keys], pa.int8()), pa.array([k[1] for k in keys], pa.int64()),
                                          *[pa.array(c, pa.int64()) for c in cols]], schema=MSG_ARROW)


def check_rows(faulted: frozenset[int], rows: MessageRows, readers: Readers | None = None,
               queue_names: Sequence[str | None] = ()) -> dict[tuple[int, int], list[int]]:
    """(kind, gid) → MSG_COUNTS of the rows of some whole (rc, producer)s: per gid reorders, distinct, duplicated,
    lost; for the clusters in ``faulted`` the same (and the cut messages) per run and per fault window. ``readers``:
    the clusters whose consumers each read every message (a delivery's reader is its ``consumer``);
    ``queue_names[qcode]`` is the queue a code stands for."""
    # one row per copy: expected copies of a cluster with readers, one per reader of their queue
    base, rd = _reader_copies(readers or {}, rows, queue_names)
    if base is not None:
        rows = MessageRows(**{f.name: getattr(rows, f.name)[base] for f in fields(MessageRows)})
    src, rc, prod, seq, qcodes, gt, gm, fm, red = (rows.src, rows.rc, rows.prod, rows.seq, rows.qcode, rows.gt, rows.gm,
                                                   rows.fm, rows.red)
    # faulted clusters' rows, counted per run and per fault window too (None: no cluster had a fault)
    in_run = (np.isin(rc, np.array(sorted(faulted), dtype=np.int64)) & ((src != DELIVERY) | (gt >= 0))
              if faulted else None)
    acc: dict[tuple[int, int], list[int]] = {}
    # what identifies a copy (rc, producer, seq, queue, reader) as one int64 per row, packed once for every row
    rest = pack((prod, seq, qcodes, rd))
    copy_key = pack((rc, rest)) if rest is not None else None

    def add_ids(kind: int, col: int, ids_: np.ndarray) -> None:
        ids, cnt = small_ids(ids_)
        for g, c in zip(ids.tolist(), cnt.tolist()):
            acc.setdefault((kind, g), [0] * len(MSG_COUNTS))[col] += c

    def add(col: int, gids: np.ndarray) -> None:
        """Step counts: ``gids`` of the counted rows (only measured ones, gid ≥ 0, count)."""
        add_ids(STEP_GROUP, col, gids[gids >= 0])

    def add_wide(col: int, rows: np.ndarray) -> None:
        """Run and fault-window counts of the counted ``rows`` (indices) of faulted clusters."""
        if in_run is None:
            return
        rows = rows[in_run[rows]]
        if not rows.size:
            return
        add_ids(RUN_GROUP, col, rc[rows])
        bits = int(np.bitwise_or.reduce(fm[rows]))
        for bit in range(MAX_FAULTS):
            if bits >> bit & 1:
                sel = rows[(fm[rows] >> bit) & 1 == 1]
                add_ids(FAULT_GROUP, col, rc[sel] * 64 + bit)

    def copies(lead: np.ndarray, key: Key | None, sub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per distinct copy among rows ``sub`` (``lead``, producer, seq, queue, reader): its ``lead`` and count."""
        if key is not None:
            uniq, cnt = key_counts(key.v[as_index(sub)], key.span)
            return key.lead(uniq), cnt
        order, grp = _groups_of(lead[sub], prod[sub], seq[sub], qcodes[sub], rd[sub])
        cnt = np.bincount(grp)
        return lead[sub][order][np.concatenate(([0], np.flatnonzero(np.diff(grp)) + 1))], cnt

    con = np.flatnonzero(src == DELIVERY)
    seen = con
    if con.size:
        cs = as_index(con)                       # the deliveries are one run of rows on the driver: views
        hit = _reordered(rc[cs], prod[cs], qcodes[cs], rows.consumer[cs], rows.tnull[cs], rows.t[cs], seq[cs])
        add(0, gm[cs][hit])
        add_wide(0, con[hit])
        # distinct and duplicated copies among the measured deliveries of each step: a message fanned out to
        # three queues (or read by three readers of a stream) is three copies, each expected once
        measured = gm[cs] >= 0
        mi = con if measured.all() else con[measured]
        if mi.size:
            g_of, counts = copies(gm, pack((gm, rest)) if rest is not None else None, mi)
            add(1, g_of)
            add(2, g_of[counts > 1])
        # every fresh delivery of the run, whatever its window: how many came again (re-reads, redeliveries)
        whole = rc[cs] >= 0
        wi = con if whole.all() else con[whole]
        if wi.size:
            ws = as_index(wi)
            r_of, counts4 = copies(rc, copy_key, wi)
            add_ids(WHOLE_GROUP, 8, rc[ws])
            add_ids(WHOLE_GROUP, 1, r_of)
            add_ids(WHOLE_GROUP, 2, r_of[counts4 > 1])
            add_ids(WHOLE_GROUP, 7, rc[ws][red[ws]])
        # the same over every delivery of a faulted cluster's run (copies share their stamp, so their t_sent)
        ri = con[in_run[cs]] if in_run is not None else con[:0]
        if ri.size:
            order3, grp3 = _groups_of(rc[ri], prod[ri], seq[ri], qcodes[ri], rd[ri])
            counts3 = np.bincount(grp3)
            reps = ri[order3][np.concatenate(([0], np.flatnonzero(np.diff(grp3)) + 1))]
            add_wide(1, reps)
            add_wide(2, reps[counts3 > 1])
            add_wide(7, ri[red[ri]])
        tagged = gt[cs] >= 0
        seen = con if tagged.all() else con[tagged]
    pub = np.flatnonzero(src == CANDIDATE)
    # lost: an expected copy of a ack/unconfirmed message that no delivery (with a step window) of its queue, to
    # its reader, has at any time; with unknown routes, a message no delivery of any queue has (to its reader)
    if pub.size:
        ps = as_index(pub)
        add(4, gm[ps])
        add_wide(4, pub)
        known = qcodes[ps] >= 0
        routed = pub if known.all() else pub[known]
        if routed.size:
            lost = routed[_missing((rc, prod, seq, qcodes, rd), seen, routed, copy_key)]
            add(3, gm[lost])
            add_wide(3, lost)
        anywhere = pub[~known]
        if anywhere.size:
            lost = anywhere[_missing((rc, prod, seq, rd), seen, anywhere)]
            add(3, gm[lost])
            add_wide(3, lost)
    cut = np.flatnonzero(src == CUT)
    if cut.size:
        add_wide(5, cut)
        add_wide(6, cut[~_missing((rc, prod, seq), seen, cut)])          # by any consumer, on any queue
    return acc


def _reordered(rc: np.ndarray, prod: np.ndarray, qcode: np.ndarray, who: np.ndarray, tnull: np.ndarray, t: np.ndarray,
               seq: np.ndarray) -> np.ndarray:
    """The deliveries (indices) whose seq is below the max before it in receive order (t_received, nulls first as in
    Spark's ascending window sort, then seq) among those of its (rc, producer, queue, consumer)."""
    grp = _packed((rc, prod, qcode, who))
    keys = _packed((*grp, np.logical_not(tnull).view(np.int8), t, seq))
    order = np.argsort(keys[0], kind="stable") if len(keys) == 1 else np.lexsort(tuple(reversed(keys)))
    n = order.size
    change = np.zeros(n, dtype=bool)
    for g in grp:
        s = g[order]
        change[1:] |= s[1:] != s[:-1]
    x = seq[order].astype(np.int64, copy=False)
    reord = np.zeros(n, dtype=bool)
    if n < 2:
        return order[reord]
    lo = int(x.min())
    span = int(x.max()) - lo + 1
    groups = int(np.count_nonzero(change)) + 1
    if groups > 1 and groups * span < 1 << 62:
        # each group's seqs above every earlier group's: one running max over all rows restarts at each group
        off = np.cumsum(change, dtype=np.int64)
        off *= span
        off -= lo
        x += off
    elif groups > 1:
        starts = np.flatnonzero(change).tolist()
        for a, b in zip([0, *starts], [*starts, n]):
            if b - a > 1:
                reord[a + 1:b] = x[a + 1:b] < np.maximum.accumulate(x[a:b])[:-1]
        return order[reord]
    reord[1:] = x[1:] < np.maximum.accumulate(x)[:-1]
    return order[reord]


def _missing(keys: tuple[np.ndarray, ...], seen: np.ndarray, rows: np.ndarray, key: Key | None = None) -> np.ndarray:
    """For each of ``rows`` (indices), whether no row of ``seen`` has its ``keys`` (columns: rc, producer, seq and
    what else identifies the copy; ``key``: the same packed, when already made); a boolean array in the order of
    ``rows``. One packed key: a bitmap or a sorted search; else a sort-merge of the columns."""
    key = key or pack(keys)
    if key is not None:
        return absent(key.v[as_index(seen)], key.v[as_index(rows)], key.span)
    both = np.concatenate((seen, rows))
    flag = np.concatenate((np.zeros(seen.size, dtype=np.int64), np.ones(rows.size, dtype=np.int64)))
    cols = [k[both] for k in keys]
    order, _ = _groups_of(*cols, flag)
    key_grp = _runs(*[c[order] for c in cols])
    has_seen = np.zeros(int(key_grp.max()) + 1, dtype=bool)
    is_seen = flag[order] == 0
    has_seen[key_grp[is_seen]] = True
    missing_sorted = (~is_seen) & ~has_seen[key_grp]
    out = np.zeros(both.size, dtype=bool)
    out[order] = missing_sorted
    result: np.ndarray = out[seen.size:]
    return result


def _reader_copies(readers: Readers, rows: MessageRows, names: Sequence[str | None]
                   ) -> tuple[np.ndarray | None, np.ndarray]:
    """(source row of every row once the expected copies are one per reader, None: the rows as they are; the
    reader of each). In a cluster of ``readers`` a delivery's reader is its consumer and an expected copy becomes
    one per consumer reading its queue (every reader of the run when its queue is unknown: a super stream's); a
    queue no consumer reads keeps one copy. Every other row has reader -1: its queue's consumers share the
    messages."""
    src, rc, qcodes = rows.src, rows.rc, rows.qcode
    rd = np.full(src.size, -1, dtype=np.int64)
    if not readers:
        return None, rd
    mine = np.isin(rc, np.array(sorted(readers), dtype=np.int64))
    if not mine.any():
        return None, rd
    dl = mine & (src == DELIVERY)
    rd[dl] = rows.consumer[dl]
    cand = np.flatnonzero(mine & (src == CANDIDATE))
    extra_rows: list[np.ndarray] = []
    extra_rd: list[np.ndarray] = []
    pairs = np.unique(np.stack((rc[cand], qcodes[cand]), axis=1), axis=0) if cand.size else np.zeros((0, 2), np.int64)
    for r, q in pairs.tolist():
        per = readers[r]
        name = names[q] if q >= 0 else None
        who = per.get(name, ()) if name is not None else tuple(sorted({c for cs in per.values() for c in cs}))
        if not who:
            continue
        sel = cand[(rc[cand] == r) & (qcodes[cand] == q)]
        rd[sel] = who[0]
        for c in who[1:]:
            extra_rows.append(sel)
            extra_rd.append(np.full(sel.size, c, dtype=np.int64))
    if not extra_rows:
        return None, rd
    return np.concatenate([np.arange(src.size), *extra_rows]), np.concatenate([rd, *extra_rd])


def _runs(*cols: np.ndarray) -> np.ndarray:
    """Run number of each row of already sorted ``cols`` (a new run where any column changes)."""
    cols = tuple(_packed(cols))
    n = cols[0].size
    change = np.zeros(n, dtype=bool)
    for c in cols:
        change[1:] |= c[1:] != c[:-1]
    return np.cumsum(change)

