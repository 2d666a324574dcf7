"""Where messages go on the broker: the queues (type, naming, arguments) and the exchange."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

from rbench.config.base import MAX_COUNT, StrictModel

QueueType = Literal["classic", "quorum", "stream"]


class SuperStream(StrictModel):
    """A super stream (partitioned stream): the queue name is the super stream's, its partitions NAME-0 … NAME-(P-1)."""

    partitions: int = Field(ge=1, le=256, description="Partition streams of the super stream.")
    routing_keys: int = Field(default=1000, ge=1, le=MAX_COUNT,
                              description="Message n of a producer has routing key str(n mod routing_keys); the key's "
                                          "murmur3 hash picks its partition, as RabbitMQ's Java stream client does.")


class Queues(StrictModel):
    """Which queues, of which type, with which arguments (PerfTest -u / --queue-pattern / -qa)."""

    name: str | None = Field(default=None, description="A single queue name (PerfTest -u).")
    pattern: str | None = Field(default=None, description="printf-style pattern with %d, e.g. perf-test-%d.")
    from_: int = Field(default=1, alias="from", ge=0, le=10**9)
    to: int = Field(default=1, ge=0, le=10**9)
    type: QueueType = "classic"
    durable: bool = True
    auto_delete: bool = False
    exclusive: bool = False
    predeclared: bool = Field(default=False, description="Queues exist already: do not declare them; they are still bound "
                                                   "to the exchange unless bind is false, as PerfTest -p binds them.")
    keep: bool = Field(default=False, description="Leave the queues (streams) this run created on the broker; by default "
                                                   "they are deleted after the run (queues that existed before are never deleted).")
    bind: bool = Field(default=True, description="Bind each queue to the exchange with its routing key (PerfTest -sb turns it off).")
    super_stream: SuperStream | None = Field(default=None, description="Streams: the queue is a super stream of this many partitions (docs/streams.md).")
    arguments: dict[str, Any] = Field(default_factory=dict,
                                      description="Extra x-arguments, e.g. x-quorum-initial-group-size, x-max-in-memory-length.")

    @model_validator(mode="after")
    def _one_naming(self) -> Queues:
        if self.name and self.pattern:
            raise ValueError("give either name or pattern, not both")
        if self.pattern is not None:
            if "%d" not in self.pattern:
                raise ValueError("pattern: expected a pattern containing %d, e.g. perf-test-%d")
            if self.to < self.from_:
                raise ValueError(f"to: expected a number >= from ({self.from_}), got {self.to}")
            if self.to - self.from_ + 1 > MAX_COUNT:
                raise ValueError(f"to: expected at most {MAX_COUNT} queues (from {self.from_} to {self.from_ + MAX_COUNT - 1}), "
                                 f"got {self.to - self.from_ + 1}")
        if self.type != "classic" and (not self.durable or self.auto_delete or self.exclusive):
            raise ValueError(f"durable: {self.type} queues are always durable, never auto-delete or exclusive")
        if self.super_stream is not None and (self.type != "stream" or self.pattern is not None):
            raise ValueError("super_stream: needs type: stream and one queue name (the super stream's), not a pattern")
        if "x-queue-type" in self.arguments and self.arguments["x-queue-type"] != self.type:
            raise ValueError("arguments.x-queue-type: conflicts with type; set type instead")
        return self

    def count(self) -> int:
        """How many queues ``names`` gives, without building them."""
        return self.to - self.from_ + 1 if self.pattern is not None else 1

    def names(self, workload_name: str) -> list[str]:
        if self.pattern is not None:
            return [self.pattern.replace("%d", str(i)) for i in range(self.from_, self.to + 1)]
        return [self.name or f"rbench-{workload_name}"]

    def partitions(self, name: str) -> tuple[str, ...]:
        """The partition streams of super stream ``name`` (none for a plain queue), in partition order."""
        if self.super_stream is None:
            return ()
        return tuple(f"{name}-{i}" for i in range(self.super_stream.partitions))

    def broker_arguments(self) -> dict[str, Any]:
        args = dict(self.arguments)
        if self.type != "classic":
            args["x-queue-type"] = self.type
        return args


def client_queue(names: Sequence[str], client: int) -> str:
    """The queue producer or consumer ``client`` uses: client i takes queue i mod Q, as PerfTest spreads them.
    rbench.plan places the clients by it; the reduce reads by it which consumers read a stream."""
    return names[client % len(names)]


class Exchange(StrictModel):
    name: str = Field(default="direct", description='"" publishes through the default exchange.')
    type: str = Field(default="direct", pattern=r"^[A-Za-z0-9_.:-]+$",
                      description="direct, fanout, topic, headers or any type a broker plugin adds (x-consistent-hash …).")
    durable: bool = Field(default=True, description=(
        "Durable by default, as PerfTest (2.20 and later) declares its exchange, so rbench runs and PerfTest runs "
        "share the exchange 'direct' on one broker. An exchange that already exists with the other durability is "
        "used as it is (a passive declare and one warning) instead of refused (406 inequivalent arg 'durable'). "
        "It does not affect what survives a restart: that is the queue's durability and the message's persistence."))
