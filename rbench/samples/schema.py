"""The Parquet contract between a run and its reduce (docs/parquet.md).

One row per published message and one per consumed message. Times are int64 ns from
``time.time_ns()``. The recorder writes these schemas and the reduce reads them; neither
restates them.
"""
from __future__ import annotations

from typing import Literal

import pyarrow as pa

Outcome = Literal["ack", "nack", "returned", "timeout", "unconfirmed", "connection_lost"]
# What became of a published message, as the ``outcome`` column spells it. The recorder's C core
# keeps the index into this tuple (plus an internal PENDING code that is never written).
# connection_lost: published, no confirm yet, and then the connection died (the task rode through
# the loss, docs/drivers.md): the broker may or may not have it; rbench does not send it again.
OUTCOMES: tuple[str, ...] = ("ack", "nack", "returned", "timeout", "unconfirmed", "connection_lost")
ACK, NACK, RETURNED, TIMEOUT, UNCONFIRMED, CONNECTION_LOST, PENDING = range(7)
# outcomes whose message may have reached a queue (consumed, it counts as delivered)
MAY_BE_DELIVERED: tuple[str, ...] = ("ack", "unconfirmed", "connection_lost")
# a loss is one of these never consumed: confirmed, or sent without confirms. A message in flight at a
# connection cut was never confirmed, so the broker owed nothing for it: not a loss when it never arrives
MAY_BE_LOST: tuple[str, ...] = ("ack", "unconfirmed")

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
