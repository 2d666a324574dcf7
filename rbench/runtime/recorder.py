"""Per-task sample recorder: one row per published and per consumed message.

The hot path appends to typed `array.array` columns (no per-row objects). Once a
second the task calls `tick()`, which hands complete rows to a writer thread as one
Parquet part file whenever 65,536 rows or 5 s have gathered, so memory stays bounded
and a hard kill loses at most one part. Published rows wait in the buffer until their
confirm arrives (or times out), which the confirm window bounds. `close()` writes the
last parts and the attempt's `_COMMITTED` marker, also when the run was interrupted.
"""
from __future__ import annotations

import json
import os
import time
from array import array
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rbench.runtime.stamp import STAMP

ROWS_PER_PART = 65_536
SECONDS_PER_PART = 5.0

OUTCOME_NAMES = ("ack", "nack", "returned", "timeout", "unconfirmed", "pending")
ACK, NACK, RETURNED, TIMEOUT, UNCONFIRMED, PENDING = range(6)

PUBLISHED_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("cluster", pa.string()), ("step", pa.int32()), ("task", pa.int32()),
    ("producer", pa.int32()), ("queue", pa.string()), ("seq", pa.int64()), ("size", pa.int32()),
    ("t_intended", pa.int64()), ("t_sent", pa.int64()), ("t_confirmed", pa.int64()), ("outcome", pa.string()),
])
CONSUMED_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("cluster", pa.string()), ("step", pa.int32()), ("task", pa.int32()),
    ("consumer", pa.int32()), ("queue", pa.string()), ("producer", pa.int32()), ("seq", pa.int64()),
    ("size", pa.int32()), ("t_intended", pa.int64()), ("t_sent", pa.int64()), ("t_received", pa.int64()),
    ("redelivered", pa.bool_()),
])


def _constant(value: str, n: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value], pa.string())).cast(pa.string())


def attempt_dir(out_dir: str | os.PathLike[str], run_id: str, kind: str, cluster: str, task: int, attempt: int) -> Path:
    return Path(out_dir) / run_id / kind / cluster / f"task-{task:05d}" / f"attempt-{attempt}"


class _PartSink:
    """Numbered Parquet part files in one attempt folder, written on a background thread."""

    def __init__(self, folder: Path, schema: pa.Schema, pool: ThreadPoolExecutor) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.pool = pool
        self.parts = 0
        self.rows = 0
        self._pending: list[Future[None]] = []

    def submit(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        path = self.folder / f"part-{self.parts:05d}.parquet"
        self.parts += 1
        self.rows += table.num_rows
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self.pool.submit(self._write, table, path))

    @staticmethod
    def _write(table: pa.Table, path: Path) -> None:
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)        # a part is either complete or absent

    def finish(self, interrupted: bool, commit: bool) -> None:
        for f in self._pending:
            f.result()
        if not commit:
            return
        marker = {"rows": self.rows, "parts": self.parts, "interrupted": interrupted}
        (self.folder / "_COMMITTED").write_text(json.dumps(marker))


class Recorder:
    """Collects one task attempt's samples; not thread-safe (the task's event loop owns it)."""

    def __init__(self, out_dir: str, run_id: str, cluster: str, task: int, attempt: int,
                 queues: list[str], step_offsets_ns: list[int], confirm_timeout_ns: int | None) -> None:
        self.run_id, self.cluster, self.task = run_id, cluster, task
        self.queues = queues
        self._queue_index = {q: i for i, q in enumerate(queues)}
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"rbench-writer-{task}")
        self._published_sink = _PartSink(attempt_dir(out_dir, run_id, "published", cluster, task, attempt), PUBLISHED_SCHEMA, self._pool)
        self._consumed_sink = _PartSink(attempt_dir(out_dir, run_id, "consumed", cluster, task, attempt), CONSUMED_SCHEMA, self._pool)
        self._step_offsets_ns = np.asarray(step_offsets_ns, dtype=np.int64)
        self.t0_ns = 0
        self.confirm_timeout_ns = confirm_timeout_ns
        self._new_published()
        self._new_consumed()
        self._pending: dict[int, int] = {}     # (producer << 32 | seq) → absolute row index
        self._pub_base = 0                     # absolute index of buffer row 0
        self._last_flush = time.monotonic()
        self._progress_from = 0                # consumed buffer row where the next progress slice starts
        self.confirm_latencies = array("q")    # confirm − sent of confirms since the last progress read
        self.counts = {"published": 0, "confirmed": 0, "nacked": 0, "returned": 0, "consumed": 0, "timeout": 0}

    # ---- columns -------------------------------------------------------------------------
    def _new_published(self) -> None:
        self.p_producer, self.p_queue, self.p_size = array("i"), array("h"), array("i")
        self.p_seq, self.p_intended, self.p_sent, self.p_confirmed = array("q"), array("q"), array("q"), array("q")
        self.p_outcome = array("b")

    def _new_consumed(self) -> None:
        self.c_consumer, self.c_queue, self.c_producer, self.c_size = array("i"), array("h"), array("i"), array("i")
        self.c_seq, self.c_intended, self.c_sent, self.c_received = array("q"), array("q"), array("q"), array("q")
        self.c_redelivered = array("b")

    def queue_index(self, queue: str) -> int:
        if queue not in self._queue_index:
            self._queue_index[queue] = len(self.queues)
            self.queues.append(queue)
        return self._queue_index[queue]

    # ---- hot path --------------------------------------------------------------------------
    def published(self, producer: int, queue_idx: int, seq: int, size: int, t_intended: int, t_sent: int, confirm: bool) -> None:
        self.p_producer.append(producer)
        self.p_queue.append(queue_idx)
        self.p_seq.append(seq)
        self.p_size.append(size)
        self.p_intended.append(t_intended)
        self.p_sent.append(t_sent)
        self.p_confirmed.append(0)
        if confirm:
            self.p_outcome.append(PENDING)
            self._pending[(producer << 32) | seq] = self._pub_base + len(self.p_seq) - 1
        else:
            self.p_outcome.append(UNCONFIRMED)
        self.counts["published"] += 1

    def confirmed(self, producer: int, seq: int, acked: bool, t_ns: int) -> None:
        row = self._pending.pop((producer << 32) | seq, None)
        if row is None:              # late confirm after a timeout, or a duplicate
            return
        i = row - self._pub_base
        self.p_confirmed[i] = t_ns
        self.confirm_latencies.append(t_ns - self.p_sent[i])
        if self.p_outcome[i] != RETURNED:
            self.p_outcome[i] = ACK if acked else NACK
        self.counts["confirmed" if acked else "nacked"] += 1

    def returned(self, body: bytes | memoryview, t_ns: int) -> None:
        try:
            producer, seq, _, _ = STAMP.unpack_from(body, 0)
        except Exception:
            return
        self.counts["returned"] += 1
        row = self._pending.get((producer << 32) | seq)
        if row is not None:
            self.p_outcome[row - self._pub_base] = RETURNED
        else:   # confirms off: find it among buffered rows (rare path: unroutable messages)
            for i in range(len(self.p_seq) - 1, -1, -1):
                if self.p_producer[i] == producer and self.p_seq[i] == seq:
                    self.p_outcome[i] = RETURNED
                    break

    def consumed(self, consumer: int, queue_idx: int, body: bytes | memoryview, redelivered: bool, t_received: int) -> tuple[int, int] | None:
        """Record one delivery; returns (producer, seq) or None for a body without a stamp."""
        try:
            producer, seq, t_intended, t_sent = STAMP.unpack_from(body, 0)
        except Exception:
            return None
        self.c_consumer.append(consumer)
        self.c_queue.append(queue_idx)
        self.c_producer.append(producer)
        self.c_seq.append(seq)
        self.c_size.append(len(body))
        self.c_intended.append(t_intended)
        self.c_sent.append(t_sent)
        self.c_received.append(t_received)
        self.c_redelivered.append(1 if redelivered else 0)
        self.counts["consumed"] += 1
        return producer, seq

    # ---- periodic --------------------------------------------------------------------------
    def take_latencies(self) -> tuple[np.ndarray, np.ndarray]:
        """(end-to-end, confirm) latencies in ns of what arrived since the last call."""
        start = self._progress_from
        self._progress_from = len(self.c_seq)
        confirms = np.frombuffer(self.confirm_latencies, dtype=np.int64).copy()
        self.confirm_latencies = array("q")
        if start >= len(self.c_seq):
            return np.empty(0, dtype=np.int64), confirms
        received = np.frombuffer(self.c_received, dtype=np.int64)[start:]
        intended = np.frombuffer(self.c_intended, dtype=np.int64)[start:]
        return received - intended, confirms

    def expire_confirms(self, now_ns: int) -> None:
        if self.confirm_timeout_ns is None or not self._pending:
            return
        sent = self.p_sent
        base = self._pub_base
        expired = [k for k, row in self._pending.items() if now_ns - sent[row - base] > self.confirm_timeout_ns]
        for key in expired:
            row = self._pending.pop(key) - base
            if self.p_outcome[row] != RETURNED:
                self.p_outcome[row] = TIMEOUT
            self.counts["timeout"] += 1

    def tick(self, force: bool = False) -> None:
        """Flush complete rows as a part when enough have gathered (or `force`)."""
        now = time.monotonic()
        due = force or now - self._last_flush >= SECONDS_PER_PART
        if due or len(self.p_seq) >= ROWS_PER_PART:
            self._flush_published()
        if due or len(self.c_seq) >= ROWS_PER_PART:
            self._flush_consumed()
        if due:
            self._last_flush = now

    def _steps(self, intended: np.ndarray) -> np.ndarray:
        if self._step_offsets_ns.size <= 1:
            return np.zeros(intended.size, dtype=np.int32)
        idx = np.searchsorted(self.t0_ns + self._step_offsets_ns, intended, side="right") - 1
        return np.clip(idx, 0, self._step_offsets_ns.size - 1).astype(np.int32)

    def _queue_names(self, idx: array) -> pa.Array:
        indices = pa.array(np.frombuffer(idx, dtype=np.int16).astype(np.int32))
        return pa.DictionaryArray.from_arrays(indices, pa.array(self.queues, pa.string())).cast(pa.string())

    def _flush_published(self) -> None:
        n = len(self.p_seq)
        if self._pending:
            n = min(n, min(self._pending.values()) - self._pub_base)
        if n <= 0:
            return
        cut = {name: getattr(self, name) for name in ("p_producer", "p_queue", "p_size", "p_seq", "p_intended", "p_sent", "p_confirmed", "p_outcome")}
        for name, col in cut.items():
            setattr(self, name, col[n:])
        self._pub_base += n
        intended = np.frombuffer(cut["p_intended"], dtype=np.int64)[:n]
        confirmed = np.frombuffer(cut["p_confirmed"], dtype=np.int64)[:n]
        outcome = np.frombuffer(cut["p_outcome"], dtype=np.int8)[:n]
        table = pa.table({
            "run_id": _constant(self.run_id, n),
            "cluster": _constant(self.cluster, n),
            "step": pa.array(self._steps(intended)),
            "task": pa.array(np.full(n, self.task, dtype=np.int32)),
            "producer": pa.array(np.frombuffer(cut["p_producer"], dtype=np.int32)[:n]),
            "queue": self._queue_names(cut["p_queue"][:n]),
            "seq": pa.array(np.frombuffer(cut["p_seq"], dtype=np.int64)[:n]),
            "size": pa.array(np.frombuffer(cut["p_size"], dtype=np.int32)[:n]),
            "t_intended": pa.array(intended),
            "t_sent": pa.array(np.frombuffer(cut["p_sent"], dtype=np.int64)[:n]),
            "t_confirmed": pa.array(confirmed, mask=confirmed == 0),
            "outcome": pa.DictionaryArray.from_arrays(pa.array(outcome.astype(np.int32)), pa.array(OUTCOME_NAMES)).cast(pa.string()),
        }, schema=PUBLISHED_SCHEMA)
        self._published_sink.submit(table)

    def _flush_consumed(self) -> None:
        n = len(self.c_seq)
        if n == 0:
            return
        cut = {name: getattr(self, name) for name in ("c_consumer", "c_queue", "c_producer", "c_size", "c_seq", "c_intended", "c_sent", "c_received", "c_redelivered")}
        self._new_consumed()
        self._progress_from = max(0, self._progress_from - n)
        intended = np.frombuffer(cut["c_intended"], dtype=np.int64)
        table = pa.table({
            "run_id": _constant(self.run_id, n),
            "cluster": _constant(self.cluster, n),
            "step": pa.array(self._steps(intended)),
            "task": pa.array(np.full(n, self.task, dtype=np.int32)),
            "consumer": pa.array(np.frombuffer(cut["c_consumer"], dtype=np.int32)),
            "queue": self._queue_names(cut["c_queue"]),
            "producer": pa.array(np.frombuffer(cut["c_producer"], dtype=np.int32)),
            "seq": pa.array(np.frombuffer(cut["c_seq"], dtype=np.int64)),
            "size": pa.array(np.frombuffer(cut["c_size"], dtype=np.int32)),
            "t_intended": pa.array(intended),
            "t_sent": pa.array(np.frombuffer(cut["c_sent"], dtype=np.int64)),
            "t_received": pa.array(np.frombuffer(cut["c_received"], dtype=np.int64)),
            "redelivered": pa.array(np.frombuffer(cut["c_redelivered"], dtype=np.int8).astype(bool)),
        }, schema=CONSUMED_SCHEMA)
        self._consumed_sink.submit(table)

    def close(self, interrupted: bool, commit: bool = True) -> dict[str, int]:
        """Time out what is still unconfirmed, write everything, commit the attempt (unless it failed)."""
        for key, row in list(self._pending.items()):
            i = row - self._pub_base
            if self.p_outcome[i] != RETURNED:
                self.p_outcome[i] = TIMEOUT
            self.counts["timeout"] += 1
        self._pending.clear()
        self._flush_published()
        self._flush_consumed()
        self._published_sink.finish(interrupted, commit)
        self._consumed_sink.finish(interrupted, commit)
        self._pool.shutdown(wait=True)
        return {"published_rows": self._published_sink.rows, "consumed_rows": self._consumed_sink.rows, **self.counts}
