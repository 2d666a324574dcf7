"""run.json's ``stage_attempts``: every time Spark ran a cluster's barrier stage, and which run counts.

The coordinator (rbench.coordinator.attempts) builds these from Spark's status store and the control
channel; the end-of-run summary and the reduce's notes read them back (:func:`restarted_stage_note`).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rbench.samples.fields import Fields

COUNTED, FAILED = "counted", "failed"


@dataclass(frozen=True)
class TaskAttemptRecord:
    """One Spark task attempt of a stage attempt: how it ended and what it reported."""

    task: int
    attempt: int                       # Spark's task attempt id: the attempt-A folder of its samples
    status: str                        # counted, failed, killed, ended, lost, unknown (or Spark's word)
    reason: str | None = None          # why it did not count, one line
    executor: str | None = None
    host: str | None = None
    pid: int | None = None
    reached_t0: bool = False           # it took part in a start-gate round
    final_report: bool = False         # it sent its final progress line: it ended by itself
    reported: Mapping[str, float] | None = None    # its live counts on the control channel (None: never seen there)

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "attempt": self.attempt, "status": self.status, "reason": self.reason,
                "executor": self.executor, "host": self.host, "pid": self.pid, "reached_t0": self.reached_t0,
                "final_report": self.final_report, "reported": None if self.reported is None else dict(self.reported)}

    @classmethod
    def from_json(cls, data: object, where: str) -> TaskAttemptRecord:
        f = Fields(data, where)
        return cls(task=f.req_int("task"), attempt=f.req_int("attempt"), status=f.text("status"),
                   reason=f.opt_text("reason"), executor=f.opt_text("executor"), host=f.opt_text("host"),
                   pid=f.opt_int("pid"), reached_t0=f.flag("reached_t0"), final_report=f.flag("final_report"),
                   reported=None if f.obj("reported") is None else f.numbers("reported"))


@dataclass(frozen=True)
class StageAttempt:
    """One run of a cluster's barrier stage, oldest first in run.json."""

    stage_attempt: int | None          # Spark's number (None: Spark's view was unavailable)
    counted: bool
    t0_ns: int | None                  # None: it never reached the start gate
    outcome: str                       # COUNTED or FAILED
    reason: str | None                 # why it did not count
    tasks: tuple[TaskAttemptRecord, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"stage_attempt": self.stage_attempt, "counted": self.counted, "t0_ns": self.t0_ns,
                "outcome": self.outcome, "reason": self.reason, "tasks": [t.to_json() for t in self.tasks]}

    @classmethod
    def from_json(cls, data: object, where: str) -> StageAttempt:
        f = Fields(data, where)
        return cls(stage_attempt=f.opt_int("stage_attempt"), counted=f.flag("counted"), t0_ns=f.opt_int("t0_ns"),
                   outcome=f.text("outcome"), reason=f.opt_text("reason"),
                   tasks=tuple(TaskAttemptRecord.from_json(e, w) for w, e in f.entries("tasks")))


def restarted_stage_note(cluster: str, attempts: tuple[StageAttempt, ...] | list[StageAttempt]) -> str | None:
    """One line for a cluster whose Spark stage ran more than once (the end-of-run summary, the reduce's notes)."""
    if len(attempts) < 2:
        return None
    why = "; ".join(f"attempt {n + 1}: {a.reason or a.outcome}" for n, a in enumerate(attempts) if not a.counted)
    counted = next((a for a in attempts if a.counted), None)
    which = ("none counted (the stage failed)" if counted is None else
             f"counted: attempt {list(attempts).index(counted) + 1} (task attempts "
             f"{', '.join(str(t.attempt) for t in counted.tasks)}), with its own t0 and step windows")
    return f"cluster {cluster}: the Spark stage ran {len(attempts)} times ({why}); {which}"
