"""Per-task sample recorder: one row per published and per consumed message.

The hot path appends to growable C columns in ``RecorderCore`` (ext/runtime/recorder.pyx; no
per-row objects) and parts are built from them without copies. Once a
second the task calls `tick()`, which hands complete rows to a writer thread as one
Parquet part file whenever 65,536 rows or 5 s have gathered, so memory stays bounded
and a hard kill loses at most one part. Published rows wait in the buffer until their
confirm arrives (or times out), which the confirm window bounds. `close()` writes the
last parts and the attempt's `_COMMITTED` marker, also when the run was interrupted.
"""
from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from rbench.runtime._recorder import Column, RecorderCore, Stamper, strings
from rbench.samples.layout import ATTEMPT_INFO, COMMITTED, attempt_dir
from rbench.samples.schema import CONSUMED_SCHEMA, CORE_OUTCOMES, PUBLISHED_SCHEMA

ROWS_PER_PART = 65_536
SECONDS_PER_PART = 5.0

_DTYPES = {"q": np.int64, "i": np.int32, "h": np.int16, "b": np.int8}
# dictionary pages only where values repeat; on time and seq columns they are all cost
# (built, then abandoned at the 1 MiB limit): this halves the writer's CPU and the file size
_DICTIONARY_COLUMNS = ["run_id", "cluster", "step", "task", "producer", "consumer", "queue", "size", "outcome", "redelivered"]

def _constant(value: str, n: int) -> pa.Array:
    """StringArray of n copies of value, from buffers: pa.scalar/pa.repeat would infer types
    through pyarrow's pandas shim, whose first use imports pandas (~300 ms on the event loop)."""
    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(raw * n))


def warm_up() -> None:
    """Take pyarrow's one-time costs (lazy imports, codec set-up) before the clock starts, not
    at the first flush, where they would stall the event loop and show up as latency."""
    column = np.zeros(1, dtype=np.int64)
    table = pa.table({"s": _constant("x", 1), "i": pa.array(column), "m": pa.array(column, mask=column == 0)})
    pq.write_table(table, pa.BufferOutputStream(), compression="zstd")


def _names(indices: Column, names: list[str] | tuple[str, ...]) -> pa.Array:
    """StringArray of names[indices], built from buffers (no pyarrow.compute: its import alone costs ~70 ms)."""
    offsets, data = strings(indices, names)
    return pa.StringArray.from_buffers(len(indices), pa.py_buffer(offsets), pa.py_buffer(data))


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

    def submit(self, build: Callable[[], pa.Table], rows: int) -> None:
        """Write the part ``build()`` makes, on the writer thread: building the Arrow table from the taken
        columns took 2–4 ms, and on the event loop that made the sends due meanwhile late."""
        if rows == 0:
            return
        path = self.folder / f"part-{self.parts:05d}.parquet"
        self.parts += 1
        self.rows += rows
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self.pool.submit(self._write, build, path))

    @staticmethod
    def _write(build: Callable[[], pa.Table], path: Path) -> None:
        tmp = path.with_suffix(".parquet.tmp")
        pq.write_table(build(), tmp, compression="zstd", use_dictionary=_DICTIONARY_COLUMNS)
        os.replace(tmp, path)        # a part is either complete or absent

    def finish(self, interrupted: bool, commit: bool) -> None:
        for f in self._pending:
            f.result()
        if not commit:
            return
        marker = {"rows": self.rows, "parts": self.parts, "interrupted": interrupted}
        (self.folder / COMMITTED).write_text(json.dumps(marker))


class Recorder:
    """Collects one task attempt's samples; not thread-safe (the task's event loop owns it).

    The per-message work (rows, pending confirms, stamp unpacking) is done by
    ``RecorderCore`` (ext/runtime/recorder.pyx); this class owns files, steps and flush rules.
    """

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
        self.core = RecorderCore()
        self._last_flush = time.monotonic()

    @property
    def counts(self) -> dict[str, int]:
        c = self.core
        return {"published": c.n_published, "confirmed": c.n_confirmed, "nacked": c.n_nacked,
                "returned": c.n_returned, "consumed": c.n_consumed, "timeout": c.n_timeout,
                "connection_lost": c.n_connection_lost}

    def describe(self, info: dict[str, object]) -> None:
        """Write ``_ATTEMPT`` (which process ran this attempt, docs/parquet.md) into both attempt folders."""
        for sink in (self._published_sink, self._consumed_sink):
            (sink.folder / ATTEMPT_INFO).write_text(json.dumps(info))

    def queue_index(self, queue: str) -> int:
        if queue not in self._queue_index:
            self._queue_index[queue] = len(self.queues)
            self.queues.append(queue)
        return self._queue_index[queue]

    # ---- hot path: the runtime calls the core directly (stamper, ProducerSink, consumers.ConsumerState) ----
    def published(self, producer: int, queue_idx: int, seq: int, size: int, t_intended: int, t_sent: int, confirm: bool) -> None:
        self.core.published(producer, queue_idx, seq, size, t_intended, t_sent, confirm)

    def confirmed(self, producer: int, seq: int, acked: bool, t_ns: int) -> None:
        """Late confirms (after a timeout) and duplicates are ignored."""
        self.core.confirmed(producer, seq, acked, t_ns)

    def consumed(self, consumer: int, queue_idx: int, body: bytes | memoryview, redelivered: bool, t_received: int) -> tuple[int, int] | None:
        """Record one delivery; returns (producer, seq) or None for a body without a stamp."""
        return self.core.consumed(consumer, queue_idx, body, redelivered, t_received)

    def returned(self, body: bytes | memoryview, t_ns: int) -> None:
        """Mark the returned message's row "returned"; a body without a stamp is ignored."""
        self.core.returned(body, t_ns)

    def stamper(self, body: bytearray, producer: int, queue_idx: int, confirm: bool) -> Stamper:
        """The producer's one-call path: stamp the body and record its row (see producer.py)."""
        return Stamper(self.core, body, producer, queue_idx, confirm)

    # ---- periodic --------------------------------------------------------------------------
    def take_latencies(self) -> tuple[np.ndarray, np.ndarray]:
        """(end-to-end, confirm) latencies in ns of what arrived since the last call."""
        e2e = np.frombuffer(memoryview(self.core.take_e2e()), dtype=np.int64)
        confirms = np.frombuffer(memoryview(self.core.take_confirm_latencies()), dtype=np.int64)
        return e2e, confirms

    def lose_in_flight(self) -> int:
        """The connection died: every message still waiting for its confirm is ``connection_lost``; how many."""
        return self.core.lose_pending()

    def expire_confirms(self, now_ns: int) -> None:
        if self.confirm_timeout_ns is None:
            return
        self.core.expire(now_ns, self.confirm_timeout_ns)

    def tick(self, force: bool = False) -> None:
        """Flush complete rows as a part when enough have gathered (or `force`)."""
        now = time.monotonic()
        due = force or now - self._last_flush >= SECONDS_PER_PART
        if due or self.core.published_rows >= ROWS_PER_PART:
            self._flush_published()
        if due or self.core.consumed_rows >= ROWS_PER_PART:
            self._flush_consumed()
        if due:
            self._last_flush = now

    def _steps(self, intended: np.ndarray, t0_ns: int) -> np.ndarray:
        if self._step_offsets_ns.size <= 1:
            return np.zeros(intended.size, dtype=np.int32)
        idx = np.searchsorted(t0_ns + self._step_offsets_ns, intended, side="right") - 1
        return np.clip(idx, 0, self._step_offsets_ns.size - 1).astype(np.int32)

    # The event loop only takes the rows out of the core (a C copy); the Arrow table is built on the
    # writer thread from those detached columns and a snapshot of what the table needs (t0, queue names).
    def _flush_published(self) -> None:
        n = self.core.flushable_published()
        if n <= 0:
            return
        cols = self.core.take_published(n)
        self._published_sink.submit(functools.partial(self._published_table, cols, self.t0_ns, tuple(self.queues)), n)

    def _published_table(self, cols: tuple[Column, ...], t0_ns: int, queues: tuple[str, ...]) -> pa.Table:
        producer, _, size, seq, intended, sent, confirmed, _ = (np.frombuffer(memoryview(c), dtype=_DTYPES[c.typecode]) for c in cols)
        queue, outcome = cols[1], cols[7]
        n = seq.size
        return pa.table({
            "run_id": _constant(self.run_id, n),
            "cluster": _constant(self.cluster, n),
            "step": pa.array(self._steps(intended, t0_ns)),
            "task": pa.array(np.full(n, self.task, dtype=np.int32)),
            "producer": pa.array(producer),
            "queue": _names(queue, queues),
            "seq": pa.array(seq),
            "size": pa.array(size),
            "t_intended": pa.array(intended),
            "t_sent": pa.array(sent),
            "t_confirmed": pa.array(confirmed, mask=confirmed == 0),
            "outcome": _names(outcome, CORE_OUTCOMES),
        }, schema=PUBLISHED_SCHEMA)

    def _flush_consumed(self) -> None:
        if self.core.consumed_rows == 0:
            return
        cols = self.core.take_consumed()
        self._consumed_sink.submit(functools.partial(self._consumed_table, cols, self.t0_ns, tuple(self.queues)), len(cols[0]))

    def _consumed_table(self, cols: tuple[Column, ...], t0_ns: int, queues: tuple[str, ...]) -> pa.Table:
        consumer, _, producer, size, seq, intended, sent, received, redelivered = (
            np.frombuffer(memoryview(c), dtype=_DTYPES[c.typecode]) for c in cols)
        queue = cols[1]
        n = seq.size
        return pa.table({
            "run_id": _constant(self.run_id, n),
            "cluster": _constant(self.cluster, n),
            "step": pa.array(self._steps(intended, t0_ns)),
            "task": pa.array(np.full(n, self.task, dtype=np.int32)),
            "consumer": pa.array(consumer),
            "queue": _names(queue, queues),
            "producer": pa.array(producer),
            "seq": pa.array(seq),
            "size": pa.array(size),
            "t_intended": pa.array(intended),
            "t_sent": pa.array(sent),
            "t_received": pa.array(received),
            "redelivered": pa.array(redelivered.astype(bool)),
        }, schema=CONSUMED_SCHEMA)

    def close(self, interrupted: bool, commit: bool = True) -> dict[str, int]:
        """Time out what is still unconfirmed, write everything, commit the attempt (unless it failed)."""
        self.core.expire_all()
        self._flush_published()
        self._flush_consumed()
        self._published_sink.finish(interrupted, commit)
        self._consumed_sink.finish(interrupted, commit)
        self._pool.shutdown(wait=True)
        return {"published_rows": self._published_sink.rows, "consumed_rows": self._consumed_sink.rows, **self.counts}
