"""The Parquet contract between a run and its reduce (docs/parquet.md).

One row per published message and one per consumed message. Times are int64 ns from
``time.time_ns()``. The recorder writes these schemas and the reduce reads them; neither
restates them.
"""
from __future__ import annotations

import pyarrow as pa

# What became of a published message, as the ``outcome`` column spells it: the one list of outcome
# codes (docs/parquet.md). The recorder's C core keeps the index into CORE_OUTCOMES (its enum in
# ext/runtime/recorder.pyx, checked against these by tests/unit/test_outcome_codes.py); PENDING, a
# message still waiting for its confirm, is never written.
# connection_lost: published, no confirm yet, and then the connection died (the task rode through
# the loss, docs/drivers.md): the broker may or may not have it; rbench does not send it again.
OUTCOMES: tuple[str, ...] = ("ack", "nack", "returned", "timeout", "unconfirmed", "connection_lost")
CORE_OUTCOMES: tuple[str, ...] = (*OUTCOMES, "pending")
ACK, NACK, RETURNED, TIMEOUT, UNCONFIRMED, CONNECTION_LOST, PENDING = range(len(CORE_OUTCOMES))
# outcomes whose message may have reached a queue (consumed, it counts as delivered)
MAY_BE_DELIVERED: tuple[str, ...] = tuple(OUTCOMES[i] for i in (ACK, UNCONFIRMED, CONNECTION_LOST))
# a loss is one of these never consumed: confirmed, or sent without confirms. A message in flight at a
# connection cut was never confirmed, so the broker owed nothing for it: not a loss when it never arrives
MAY_BE_LOST: tuple[str, ...] = tuple(OUTCOMES[i] for i in (ACK, UNCONFIRMED))

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
KINDS: tuple[str, ...] = ("published", "consumed")
