"""What every part of the workload model shares: the strict base model and the size limits.

The limits are far beyond any run a coordinator can drive and low enough that a typo
(queues.to: 1e12) is refused at validation instead of exhausting memory.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# RabbitMQ's max_message_size default in 3.8-3.13 (134217728 bytes, checked on 3.10.8 with
# `rabbitmqctl eval 'application:get_env(rabbit, max_message_size).'`); 4.0 lowered it to 16 MiB.
DEFAULT_MAX_MESSAGE_SIZE = 128 * 1024 * 1024
MAX_PORT = 65535
MAX_PREFETCH = 65535                 # basic.qos prefetch-count is a short
# sizes of what one run plans and holds in memory
MAX_COUNT = 100_000
MAX_STEPS = 10_000


class StrictModel(BaseModel):
    """Unknown fields are refused, a validated model never changes, aliases (from, for) and names both read."""

    # inf and nan are never a rate, size or duration (they used to pass and crash the planner)
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)
