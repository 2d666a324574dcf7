"""The compiled recorder core (ext/runtime/recorder.pyx) and the Recorder built on it: no network."""
from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from rbench.runtime._recorder import ConfirmSink, ConsumerTap, RecorderCore, Stamper, strings
from rbench.runtime.recorder import Recorder
from rbench.runtime.stamp import STAMP, new_payload
from rbench.samples.schema import (  # noqa: F401
    ACK,
    CONNECTION_LOST,
    CONSUMED_SCHEMA,
    MAY_BE_DELIVERED,
    NACK,
    OUTCOMES,
    PENDING,
    PUBLISHED_SCHEMA,
    RETURNED,
    TIMEOUT,
    UNCONFIRMED,
)


def published(core: RecorderCore) -> dict[str, np.ndarray]:
    """Take every flushable published row as numpy columns."""
    names = ("producer", "queue", "size", "seq", "t_intended", "t_sent", "t_confirmed", "outcome")
    dtypes = {"q": np.int64, "i": np.int32, "h": np.int16, "b": np.int8}
    cols = core.take_published(core.flushable_published())
    return {n: np.frombuffer(c, dtype=dtypes[c.typecode]) for n, c in zip(names, cols)}


def stamp(producer: int, seq: int, ti: int = 1, ts: int = 2, size: int = 24) -> bytes:
    body = new_payload(size)
    STAMP.pack_into(body, 0, producer, seq, ti, ts)
    return bytes(body)


def test_confirm_ack_nack_and_latency() -> None:
    core = RecorderCore()
    for seq in range(3):
        core.published(7, 0, seq, 24, 100 + seq, 200 + seq, True)
    core.confirmed(7, 0, True, 1_000)
    core.confirmed(7, 2, False, 2_000)
    assert (core.n_published, core.n_confirmed, core.n_nacked, core.pending) == (3, 1, 1, 1)
    assert core.flushable_published() == 1          # row 1 still waits for its confirm
    assert list(np.frombuffer(core.take_confirm_latencies(), np.int64)) == [800, 1798]
    assert len(core.take_confirm_latencies()) == 0
    core.confirmed(7, 1, True, 3_000)
    p = published(core)
    assert list(p["outcome"]) == [ACK, ACK, NACK]
    assert list(p["t_confirmed"]) == [1_000, 3_000, 2_000]
    assert list(p["seq"]) == [0, 1, 2] and list(p["producer"]) == [7, 7, 7]


def test_late_and_duplicate_confirms_are_ignored() -> None:
    core = RecorderCore()
    core.published(1, 0, 5, 24, 0, 10, True)
    core.confirmed(1, 5, True, 20)
    core.confirmed(1, 5, False, 30)       # duplicate
    core.confirmed(1, 6, True, 30)        # never published
    core.confirmed(2, 5, True, 30)        # other producer
    assert (core.n_confirmed, core.n_nacked) == (1, 0)
    p = published(core)
    assert list(p["outcome"]) == [ACK] and list(p["t_confirmed"]) == [20]


def test_unconfirmed_rows_do_not_wait() -> None:
    core = RecorderCore()
    core.published(1, 0, 0, 24, 0, 1, False)
    assert core.pending == 0 and core.flushable_published() == 1
    assert list(published(core)["outcome"]) == [UNCONFIRMED]


def test_pending_map_grows_and_matches_a_dict_under_random_order() -> None:
    rng = random.Random(5)
    core = RecorderCore(pending_capacity=4)
    start_cap = core.pending_capacity
    keys = [(p, s) for p in range(4) for s in range(5_000)]
    for i, (p, s) in enumerate(keys):
        core.published(p, 0, s, 24, i, i, True)
    assert core.pending == len(keys) and core.pending_capacity > start_cap
    order = keys[:]
    rng.shuffle(order)
    for p, s in order[: len(order) // 2]:
        core.confirmed(p, s, True, 10**9)
    # interleave new publishes with the remaining confirms (backward-shift deletes + inserts)
    for i, (p, s) in enumerate(order[len(order) // 2:]):
        core.confirmed(p, s, True, 10**9)
        core.published(9, 0, i, 24, 0, 0, True)
    for i in range(len(order) // 2):
        core.confirmed(9, i, False, 10**9)
    assert core.pending == 0
    p = published(core)
    assert p["seq"].size == len(keys) + len(order) // 2
    assert (p["outcome"][: len(keys)] == ACK).all() and (p["outcome"][len(keys):] == NACK).all()
    assert (p["t_confirmed"] == 10**9).all()


def test_map_against_dict_model() -> None:
    rng = random.Random(11)
    core = RecorderCore(pending_capacity=2)
    model: set[tuple[int, int]] = set()
    seqs = {p: 0 for p in range(3)}
    for _ in range(20_000):
        if model and rng.random() < 0.5:
            key = rng.choice(sorted(model)) if rng.random() < 0.9 else (rng.randrange(3), rng.randrange(10**6, 2 * 10**6))
            core.confirmed(key[0], key[1], True, 1)
            model.discard(key)
        else:
            p = rng.randrange(3)
            core.published(p, 0, seqs[p], 24, 0, 0, True)
            model.add((p, seqs[p]))
            seqs[p] += 1
        assert core.pending == len(model)
    assert core.n_confirmed == core.n_published - len(model)


def test_flush_with_pending_rows_keeps_them_and_their_confirms_land() -> None:
    core = RecorderCore()
    for seq in range(10):
        core.published(1, 0, seq, 24, seq, seq, True)
    for seq in (0, 1, 2, 4, 5):
        core.confirmed(1, seq, True, 100 + seq)
    assert core.flushable_published() == 3
    first = published(core)
    assert list(first["seq"]) == [0, 1, 2] and core.published_base == 3 and core.published_rows == 7
    for seq in range(10, 3000):             # grow past the buffers' first capacity after a take
        core.published(1, 0, seq, 24, seq, seq, False)
    for seq in (3, 6, 7, 8, 9):
        core.confirmed(1, seq, seq != 7, 200 + seq)
    rest = published(core)
    assert list(rest["seq"]) == list(range(3, 3000))
    assert list(rest["outcome"][:7]) == [ACK, ACK, ACK, ACK, NACK, ACK, ACK]
    assert list(rest["t_confirmed"][:7]) == [203, 104, 105, 206, 207, 208, 209]
    assert core.published_rows == 0 and core.flushable_published() == 0


def test_take_published_refuses_more_rows_than_buffered() -> None:
    core = RecorderCore()
    core.published(1, 0, 0, 24, 0, 0, False)
    with pytest.raises(ValueError):
        core.take_published(2)


def test_timeouts_and_confirms_after_them() -> None:
    core = RecorderCore()
    core.published(1, 0, 0, 24, 0, 1_000, True)
    core.published(1, 0, 1, 24, 0, 5_000, True)
    assert core.expire(6_000, 4_000) == 1              # only seq 0 is older than 4 µs
    core.confirmed(1, 0, True, 7_000)                  # late: ignored
    assert (core.n_timeout, core.n_confirmed, core.pending) == (1, 0, 1)
    assert core.expire_all() == 1 and core.pending == 0
    p = published(core)
    assert list(p["outcome"]) == [TIMEOUT, TIMEOUT] and list(p["t_confirmed"]) == [0, 0]


def test_returned_rows() -> None:
    core = RecorderCore()
    core.published(3, 0, 0, 24, 0, 0, True)
    core.published(3, 0, 1, 24, 0, 0, False)
    assert core.returned(stamp(3, 0), 5) is True        # pending: found through the map
    assert core.returned(memoryview(stamp(3, 1)), 5) is True   # confirms off: found by scanning
    assert core.returned(b"short", 5) is False
    assert core.returned(None, 5) is False
    core.confirmed(3, 0, True, 9)                       # the ack that follows a return keeps "returned"
    assert core.n_returned == 2
    p = published(core)
    assert list(p["outcome"]) == [RETURNED, RETURNED] and list(p["t_confirmed"]) == [9, 0]


def test_consumed_unpacks_the_stamp_from_any_buffer() -> None:
    core = RecorderCore()
    body = stamp(2**32 - 1, 2**32 - 1, -5, 2**62, size=100)
    assert core.consumed(4, 1, body, True, 77) == (2**32 - 1, 2**32 - 1)
    assert core.consumed(4, 1, memoryview(body), False, 78) == (2**32 - 1, 2**32 - 1)
    assert core.consumed(4, 1, bytearray(body[:24]), False, 79) is not None
    assert core.consumed(4, 1, b"x" * 23, False, 80) is None
    assert core.consumed(4, 1, None, False, 80) is None          # not a buffer: ignored, as a short body
    assert core.n_consumed == 3
    names = ("consumer", "queue", "producer", "size", "seq", "t_intended", "t_sent", "t_received", "redelivered")
    dtypes = {"q": np.int64, "i": np.int32, "h": np.int16, "b": np.int8}
    e2e = np.frombuffer(core.take_e2e(), np.int64)
    assert list(e2e) == [82, 83, 84]
    c = {n: np.frombuffer(col, dtype=dtypes[col.typecode]) for n, col in zip(names, core.take_consumed())}
    assert list(c["size"]) == [100, 100, 24] and list(c["redelivered"]) == [1, 0, 0]
    assert list(c["seq"]) == [2**32 - 1] * 3 and list(c["t_intended"]) == [-5] * 3 and list(c["t_sent"]) == [2**62] * 3
    assert list(c["producer"].astype(np.uint32)) == [2**32 - 1] * 3
    assert core.consumed_rows == 0 and len(core.take_e2e()) == 0


def test_e2e_progress_survives_a_flush() -> None:
    core = RecorderCore()
    core.consumed(0, 0, stamp(1, 0, ti=10), False, 15)
    core.take_consumed()
    core.consumed(0, 0, stamp(1, 1, ti=10), False, 30)
    assert list(np.frombuffer(core.take_e2e(), np.int64)) == [20]


def test_stamper_writes_the_stamp_and_the_row_in_one_call() -> None:
    core = RecorderCore()
    body = new_payload(40)
    s = Stamper(core, body, 6, 2, True)
    t_sent = s.stamp(0, 123, 2**63 - 1)
    assert t_sent > 0 and STAMP.unpack_from(body, 0) == (6, 0, 123, t_sent)
    t_now = s.stamp_now(1, 2**63 - 1)
    assert STAMP.unpack_from(body, 0) == (6, 1, t_now, t_now)
    assert s.stamp(2, 0, 1) == 0 and s.stamp_now(2, 1) == 0        # past not_after: nothing written
    assert STAMP.unpack_from(body, 0)[1] == 1 and core.n_published == 2
    s.unstamp()                                                   # the publish of seq 1 failed
    assert (core.n_published, core.pending) == (1, 1)
    with pytest.raises(OverflowError):
        s.stamp(2**32, 0, 2**63 - 1)
    core.confirmed(6, 0, True, t_sent + 1)
    p = published(core)
    assert list(p["seq"]) == [0] and list(p["size"]) == [40] and list(p["queue"]) == [2]
    assert list(p["t_intended"]) == [123] and list(p["t_sent"]) == [t_sent]
    with pytest.raises(ValueError):
        Stamper(core, bytearray(10), 1, 0, False)


def test_confirm_sink_and_consumer_tap() -> None:
    returned: list[object] = []

    class Face:
        def returned(self, body: bytes, t_ns: int) -> None:
            returned.append((body, t_ns))

    core = RecorderCore()
    sink = ConfirmSink(core, Face(), 3)
    core.published(3, 0, 0, 24, 0, 0, True)
    sink.on_confirm(0, True, 50)
    sink.on_return(b"abc", 60)
    assert core.n_confirmed == 1 and returned == [(b"abc", 60)]

    done = asyncio.Event()
    tap = ConsumerTap(core, None, 1, 0, 2, done)
    tap(stamp(3, 0), False, 1)
    tap(b"no stamp", False, 2)                # counted, not recorded
    assert tap.count == 2 and done.is_set()
    tap(stamp(3, 1), False, 3)                # past the limit: ignored
    assert tap.count == 2 and core.n_consumed == 1
    free = ConsumerTap(core, None, 1, 0, None, asyncio.Event())
    for i in range(5):
        free(stamp(3, i), False, i)
    assert free.count == 5 and not free.done.is_set() and free.limit is None


def test_strings_builds_arrow_buffers() -> None:
    core = RecorderCore()
    for i in (0, 1, 1, 0):
        core.published(0, i, 0, 24, 0, 0, False)
    queue = core.take_published(4)[1]
    offsets, data = strings(queue, ["a", "bé"])
    assert list(np.frombuffer(offsets, np.int32)) == [0, 1, 4, 7, 8] and data == "abébéa".encode()
    with pytest.raises(IndexError):
        strings(queue, ["only one"])


def test_recorder_writes_parts_with_the_contract_schema(tmp_path: Path) -> None:
    rec = Recorder(str(tmp_path), "r1", "c1", 3, 0, ["q0", "q1"], [0, 1_000_000_000], None)
    rec.t0_ns = 10_000_000_000
    sink = ConfirmSink(rec.core, rec, 1)
    st = rec.stamper(new_payload(24), 1, rec.queue_index("q1"), True)
    sent = [st.stamp(seq, rec.t0_ns + seq * 600_000_000, 2**63 - 1) for seq in range(3)]
    sink.on_confirm(0, True, sent[0] + 10)
    rec.returned(stamp(1, 1), 5)
    rec.published(1, 0, 9, 30, rec.t0_ns, rec.t0_ns, False)
    rec.consumed(2, rec.queue_index("q2"), stamp(1, 0, ti=rec.t0_ns + 1_500_000_000, ts=7), True, rec.t0_ns + 2_000_000_000)
    e2e, confirms = rec.take_latencies()
    assert list(e2e) == [500_000_000] and list(confirms) == [10]
    rec.tick(force=True)                      # seq 1 and 2 are pending: only seq 0 is flushed
    counts = rec.close(interrupted=False)
    assert counts["timeout"] == 2 and counts["published"] == 4 and counts["returned"] == 1
    assert counts["published_rows"] == 4 and counts["consumed_rows"] == 1
    base = tmp_path / "r1"
    pub = pq.read_table(base / "published" / "c1" / "task-00003" / "attempt-0").sort_by("seq")
    con = pq.read_table(base / "consumed" / "c1" / "task-00003" / "attempt-0")
    assert pub.schema.equals(PUBLISHED_SCHEMA) and con.schema.equals(CONSUMED_SCHEMA)
    assert pub["outcome"].to_pylist() == ["ack", "returned", "timeout", "unconfirmed"]
    assert pub["queue"].to_pylist() == ["q1", "q1", "q1", "q0"]
    assert pub["step"].to_pylist() == [0, 0, 1, 0]
    assert pub["t_confirmed"].to_pylist() == [sent[0] + 10, None, None, None]
    assert pub["size"].to_pylist() == [24, 24, 24, 30] and set(pub["run_id"].to_pylist()) == {"r1"}
    assert con.to_pylist() == [{"run_id": "r1", "cluster": "c1", "step": 1, "task": 3, "consumer": 2, "queue": "q2",
                                "producer": 1, "seq": 0, "size": 24, "t_intended": rec.t0_ns + 1_500_000_000,
                                "t_sent": 7, "t_received": rec.t0_ns + 2_000_000_000, "redelivered": True}]
    marker = json.loads((base / "published" / "c1" / "task-00003" / "attempt-0" / "_COMMITTED").read_text())
    assert marker == {"rows": 4, "parts": 2, "interrupted": False}
    assert set(OUTCOMES) >= set(pub["outcome"].to_pylist())


def test_a_lost_connection_marks_what_waits_for_its_confirm_connection_lost(tmp_path: Path) -> None:
    rec = Recorder(str(tmp_path), "r1", "c1", 0, 0, ["q"], [0], 30_000_000_000)
    sink = ConfirmSink(rec.core, rec, 1)
    st = rec.stamper(new_payload(24), 1, 0, True)
    sent = [st.stamp(seq, 1_000 + seq, 2**63 - 1) for seq in range(4)]
    sink.on_confirm(0, True, sent[0] + 10)
    rec.returned(stamp(1, 2), 5)              # returned, its ack not in yet: stays "returned"
    rec.published(1, 0, 9, 24, 0, 0, False)   # confirms off: nothing to lose, stays "unconfirmed"
    assert rec.lose_in_flight() == 3 and rec.core.pending == 0
    assert rec.lose_in_flight() == 0          # counted once
    sink.on_confirm(1, True, sent[1] + 20)    # a confirm cannot come any more; if one did, it is ignored
    counts = rec.close(interrupted=False)
    assert counts["connection_lost"] == 3 and counts["timeout"] == 0 and counts["confirmed"] == 1
    pub = pq.read_table(tmp_path / "r1" / "published" / "c1" / "task-00000" / "attempt-0").sort_by("seq")
    assert pub["outcome"].to_pylist() == ["ack", "connection_lost", "returned", "connection_lost", "unconfirmed"]
    assert pub["t_confirmed"].to_pylist() == [sent[0] + 10, None, None, None, None]
    assert OUTCOMES.index("connection_lost") == CONNECTION_LOST and "connection_lost" in MAY_BE_DELIVERED
