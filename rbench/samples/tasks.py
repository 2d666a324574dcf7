"""What one Spark task returned at the end of its stage, as run.json keeps it (each cluster's ``task_results``).

The executor builds the result as a plain dict (rbench.runtime.task: the executor side imports no
record type and stays as it is); the coordinator parses it here the moment the stage returns, so
everything after (run.json, the end-of-run summary, the reduce's self-check and counted attempts)
reads typed fields. Keys this rbench does not know are kept (``extra``) and written back unchanged.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from rbench.errors import SinkError
from rbench.samples.churn import ChurnStats
from rbench.samples.connections import ConnectStats
from rbench.samples.fields import Fields
from rbench.samples.reconnects import Reconnect


@dataclass(frozen=True)
class TaskCounts:
    """Every message a task counted, warm-up included (the recorder's totals)."""

    published: int = 0
    confirmed: int = 0
    nacked: int = 0
    returned: int = 0
    consumed: int = 0
    timeout: int = 0
    connection_lost: int = 0

    def __add__(self, other: TaskCounts) -> TaskCounts:
        return TaskCounts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(TaskCounts)))

    @staticmethod
    def total(counts: Iterable[TaskCounts]) -> TaskCounts:
        out = TaskCounts()
        for c in counts:
            out = out + c
        return out


# the task instant at which its publishers were settled and its consumers had every message (runtime.drain): the
# last message in; --timings measures the summary's wait from it
DRAINED = "drained: publishers settled, consumers have every message"

COUNT_KEYS = tuple(f.name for f in fields(TaskCounts))
TASK_RESULT_KEYS = ("cluster", "task", "attempt", "interrupted", "t0_ns", "unconfirmed_at_end", "load_end_ns", "stopped_by",
         "consumed_before_t0", "producers", "producers_due_ns", "producers_first_stop_ns", "instants", "self_check", "published_rows", "consumed_rows", *COUNT_KEYS,
         "reconnects", "skipped_disconnected", "connect", "filtered", "churn")


@dataclass(frozen=True)
class TaskResult:
    """One task attempt's result. Fields an older run.json lacks are None (or empty)."""

    cluster: str | None = None
    task: int | None = None
    attempt: int | None = None          # Spark's task attempt id: the attempt-A folder whose samples count
    interrupted: bool = False
    t0_ns: int | None = None
    unconfirmed_at_end: int | None = None
    load_end_ns: int | None = None      # when this task's load stopped
    stopped_by: str | None = None       # why (rbench.samples.runinfo STOPPED_BY_*)
    consumed_before_t0: int | None = None
    producers: int | None = None        # publishers this task ran (0: consumers only)
    producers_due_ns: int | None = None         # the latest producer's first scheduled send (rbench.runtime.publishers)
    producers_first_stop_ns: int | None = None  # when the task's first producer stopped
    instants: Mapping[str, float] = field(default_factory=dict)          # what happened when (epoch s), for --timings
    self_check: Mapping[int, Mapping[str, float]] = field(default_factory=dict)   # step → the generator self-check
    published_rows: int | None = None
    consumed_rows: int | None = None
    counts: TaskCounts = TaskCounts()
    reconnects: tuple[Reconnect, ...] = ()
    skipped_disconnected: tuple[int, ...] = ()   # per step: schedule slots not sent while disconnected
    connect: ConnectStats | None = None          # its connections: opened, idle, latencies (None: before issue 32)
    filtered: int | None = None                  # stream filtering: deliveries its consumers dropped (not consumed)
    churn: ChurnStats | None = None              # connections it opened and closed during the load (None: no churn)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "task": self.task, "attempt": self.attempt, "interrupted": self.interrupted,
                "t0_ns": self.t0_ns, "unconfirmed_at_end": self.unconfirmed_at_end, "load_end_ns": self.load_end_ns,
                "stopped_by": self.stopped_by, "consumed_before_t0": self.consumed_before_t0,
                "producers": self.producers, "producers_due_ns": self.producers_due_ns,
                "producers_first_stop_ns": self.producers_first_stop_ns, "instants": dict(self.instants),
                "self_check": {str(step): dict(f) for step, f in self.self_check.items()},
                "published_rows": self.published_rows, "consumed_rows": self.consumed_rows,
                **{k: getattr(self.counts, k) for k in COUNT_KEYS},
                "reconnects": [r.to_json() for r in self.reconnects],
                "skipped_disconnected": list(self.skipped_disconnected),
                "connect": None if self.connect is None else self.connect.to_json(), "filtered": self.filtered,
                "churn": None if self.churn is None else self.churn.to_json(), **self.extra}

    @classmethod
    def from_json(cls, data: object, where: str = "task result") -> TaskResult:
        """One result as the executor returned it (int step keys) or as run.json keeps it (string step keys)."""
        f = Fields(data, where)
        checks = f.obj("self_check")
        self_check: dict[int, Mapping[str, float]] = {}
        if checks is not None:
            for step in checks.data:
                try:
                    self_check[int(step)] = checks.numbers(step)
                except ValueError:
                    raise SinkError(f"run.json: {checks.at(str(step))}: expected a step number") from None
        return cls(cluster=f.opt_text("cluster"), task=f.opt_int("task"), attempt=f.opt_int("attempt"),
                   interrupted=f.flag("interrupted"), t0_ns=f.opt_int("t0_ns"),
                   unconfirmed_at_end=f.opt_int("unconfirmed_at_end"), load_end_ns=f.opt_int("load_end_ns"),
                   stopped_by=f.opt_text("stopped_by"), consumed_before_t0=f.opt_int("consumed_before_t0"),
                   producers=f.opt_int("producers"), producers_due_ns=f.opt_int("producers_due_ns"),
                   producers_first_stop_ns=f.opt_int("producers_first_stop_ns"), instants=f.numbers("instants"), self_check=self_check,
                   published_rows=f.opt_int("published_rows"), consumed_rows=f.opt_int("consumed_rows"),
                   counts=TaskCounts(*(f.req_int(k, 0) for k in COUNT_KEYS)),
                   reconnects=tuple(Reconnect.from_json(e, w) for w, e in f.entries("reconnects")),
                   skipped_disconnected=f.ints("skipped_disconnected"),
                   connect=_connect(f), filtered=f.opt_int("filtered"), churn=_churn(f),
                   extra=f.extra(TASK_RESULT_KEYS))


def _connect(f: Fields) -> ConnectStats | None:
    c = f.obj("connect")
    return None if c is None else ConnectStats.from_json(c.data, f.at("connect"))


def _churn(f: Fields) -> ChurnStats | None:
    c = f.obj("churn")
    return None if c is None else ChurnStats.from_json(c.data, f.at("churn"))
