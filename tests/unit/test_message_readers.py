"""Who reads a queue's messages, and order per consumer (rbench.reduce.message_checks, messages.stream_readers).
No Spark: check_messages on hand-made tables, stream_readers against the plan's own placement of consumers."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from rbench.config.load import workload_from_dict
from rbench.plan import plan
from rbench.reduce.message_checks import (
    CANDIDATE,
    DELIVERY,
    FAULT_GROUP,
    RUN_GROUP,
    STEP_GROUP,
    Readers,
    check_messages,
    sum_counts,
)
from rbench.reduce.messages import stream_readers


def _check(rows: list[tuple[int, str | None, int, int, int]], readers: Readers | None = None,
           group: tuple[int, int] = (STEP_GROUP, 0)) -> dict[str, int]:
    """rows: (src, queue, seq, consumer, t_received) of producer 0 in run-cluster 0, all measured in step 0 and
    sent in the window of the cluster's fault 0."""
    n = len(rows)
    tbl = pa.table({"src": pa.array([r[0] for r in rows], pa.int8()), "rc": pa.array([0] * n, pa.int32()),
                    "producer": pa.array([0] * n, pa.int32()), "queue": pa.array([r[1] for r in rows], pa.string()),
                    "seq": pa.array([r[2] for r in rows], pa.int64()),
                    "t": pa.array([r[4] if r[0] == DELIVERY else None for r in rows], pa.int64()),
                    "consumer": pa.array([r[3] if r[0] == DELIVERY else None for r in rows], pa.int32()),
                    "gt": pa.array([0] * n, pa.int64()), "gm": pa.array([0] * n, pa.int64()),
                    "fm": pa.array([1] * n, pa.int64()), "red": pa.array([False] * n)})
    got = sum_counts(r for b in check_messages(frozenset({0}), iter(tbl.to_batches()), readers) for r in b.to_pylist())
    return got[group]


def test_two_competing_consumers_interleaving_are_in_order_each() -> None:
    # consumer 0 gets the even messages at once, consumer 1 the odd ones 25 ms late: received as 0 2 1 4 3 6 5 …
    rows = [(CANDIDATE, "q", k, -1, 0) for k in range(10)]
    rows += [(DELIVERY, "q", k, k % 2, k * 10 + (25 if k % 2 else 0)) for k in range(10)]
    got = _check(rows)
    assert (got["reordered"], got["duplicated"], got["lost"], got["expected"]) == (0, 0, 0, 10)
    # a real swap within one consumer still counts
    swapped = [(s, q, k, c, {4: 61, 6: 40}.get(k, t) if s == DELIVERY else t) for s, q, k, c, t in rows]
    assert _check(swapped)["reordered"] == 1


def test_plain_readers_of_a_stream_each_expect_every_message() -> None:
    rows = [(CANDIDATE, "s", k, -1, 0) for k in range(10)]
    rows += [(DELIVERY, "s", k, c, k * 10 + 25 * c) for c in (0, 1) for k in range(10) if (c, k) != (1, 4)]
    rows.append((DELIVERY, "s", 7, 0, 95))               # consumer 0 reads 7 again after 9
    readers: Readers = {0: {"s": (0, 1)}}
    got = _check(rows, readers)
    assert {k: got[k] for k in ("expected", "consumed_unique", "duplicated", "lost", "reordered")} == {
        "expected": 20, "consumed_unique": 19, "duplicated": 1, "lost": 1, "reordered": 1}
    # one queue-wide reader (before): consumer 1's copies duplicate consumer 0's and hide its gap
    old = _check(rows)
    assert (old["expected"], old["consumed_unique"], old["duplicated"], old["lost"]) == (10, 10, 9, 0)
    # unknown routes (a super stream's expected copies): one per reader of the run, in any of its queues
    anywhere = [(s, None if s == CANDIDATE else q, k, c, t) for s, q, k, c, t in rows]
    assert _check(anywhere, readers)["lost"] == 1 and _check(anywhere, readers)["expected"] == 20
    # the fault window and the faulted cluster's run count the same copies (one implementation)
    figures = ("expected", "consumed_unique", "duplicated", "lost", "reordered")
    for group in ((FAULT_GROUP, 0), (RUN_GROUP, 0)):
        wide = _check(rows, readers, group)
        assert {k: wide[k] for k in figures} == {k: got[k] for k in figures}


def _workload(**over: Any) -> Any:
    data: dict[str, Any] = {"name": "rd", "clusters": [{"name": "c", "uris": ["amqp://guest:guest@h:5672/"]}],
                            "rate": 10, "duration": 1, "queues": {"pattern": "s-%d", "from": 1, "to": 2, "type": "stream"},
                            "producers": 2, "consumers": 3}
    data.update(over)
    return workload_from_dict(data)


def _recorded(w: Any) -> dict[str, tuple[int, ...]]:
    return stream_readers(w.model_dump(mode="json", by_alias=True), w.resolved_driver())


def test_stream_readers_follow_the_plans_consumers(tmp_path: Path) -> None:
    w = _workload()
    placed: dict[str, list[int]] = {}
    for task in plan(w, "c", 2, "r", str(tmp_path)):
        for c in task.consumers:
            placed.setdefault(c.queue, []).append(c.consumer_id)
    assert _recorded(w) == {q: tuple(sorted(cs)) for q, cs in placed.items()} == {"s-1": (0, 2), "s-2": (1,)}
    # a super stream: every consumer reads every partition, its queue is the super stream's name
    assert _recorded(_workload(queues={"name": "orders", "type": "stream", "super_stream": {"partitions": 3}})) == {
        "orders": (0, 1, 2)}


def test_consumers_that_share_messages_are_one_reader() -> None:
    assert _recorded(_workload(queues={"name": "q", "type": "quorum"})) == {}
    assert _recorded(_workload(consumer={"single_active": True})) == {}           # the stream driver's group
    sac = _workload(consumer={"single_active": True}).model_dump(mode="json", by_alias=True)
    assert stream_readers(sac, "amqp091") == {"s-1": (0, 2), "s-2": (1,)}        # ignored by the other drivers
    assert stream_readers({"queues": {"type": "stream", "no-such-field": 1}, "consumers": 2}, "stream") == {}
    assert stream_readers({}, None) == {}
