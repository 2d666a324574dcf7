"""One step of a cluster in run.json: what was planned, when it really ran, and the window it is measured over.

Its own module so that the window rules (rbench.samples.windows) and the run record
(rbench.samples.record) share one definition of a step without the record growing past a screenful.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rbench.samples.fields import Fields


@dataclass(frozen=True)
class StepRecord:
    """One step of a cluster: planned (offset, duration, rate) and, once the load ran, its real window."""

    step: int                               # 0-based (rbench.samples.conventions)
    rate_per_producer: float | None         # None: as fast as possible
    target_rate: float | None               # all producers together
    duration_s: float
    offset_s: float | None = None           # planned start, s after t0 (older runs: not recorded)
    start_ns: int | None = None             # the real window [start, end); None: the step never ran
    end_ns: int | None = None
    planned_start_ns: int | None = None
    planned_end_ns: int | None = None
    status: str | None = None               # STEP_COMPLETE, STEP_CUT or STEP_NOT_RUN (rbench.samples.runinfo)
    cut_by: str | None = None               # why a cut or not-run step stopped (STOPPED_BY_*)
    skipped_disconnected: int = 0           # schedule slots not sent while a task was disconnected
    measure_start_ns: int | None = None     # the measurement window (rbench.samples.runinfo.set_windows); None:
    measure_end_ns: int | None = None       # older runs, [start + warm-up, end)
    measure_note: str | None = None         # why the window is not [start + warm-up, end), in words
    churn_per_task: float | None = None     # connections each task opened and closed per second (None: no churn)
    churn_does: str | None = None           # what each churned connection did, e.g. "open, channel, close"
    extra: Mapping[str, Any] = field(default_factory=dict)

    JSON_KEYS: ClassVar[tuple[str, ...]] = (
        "step", "rate_per_producer", "target_rate", "offset_s", "duration_s", "start_ns", "end_ns", "planned_start_ns",
        "planned_end_ns", "status", "cut_by", "skipped_disconnected", "measure_start_ns", "measure_end_ns", "measure_note",
        "churn_per_task", "churn_does")

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "rate_per_producer": self.rate_per_producer, "target_rate": self.target_rate,
                "offset_s": self.offset_s, "duration_s": self.duration_s, "start_ns": self.start_ns,
                "end_ns": self.end_ns, "planned_start_ns": self.planned_start_ns, "planned_end_ns": self.planned_end_ns,
                "status": self.status, "cut_by": self.cut_by, "skipped_disconnected": self.skipped_disconnected,
                "measure_start_ns": self.measure_start_ns, "measure_end_ns": self.measure_end_ns,
                "measure_note": self.measure_note, "churn_per_task": self.churn_per_task,
                "churn_does": self.churn_does, **self.extra}

    @classmethod
    def from_json(cls, data: object, where: str) -> StepRecord:
        f = Fields(data, where)
        return cls(step=f.req_int("step", 0), rate_per_producer=f.opt_num("rate_per_producer"),
                   target_rate=f.opt_num("target_rate"), duration_s=f.num("duration_s", 0),
                   offset_s=f.opt_num("offset_s"), start_ns=f.opt_int("start_ns"), end_ns=f.opt_int("end_ns"),
                   planned_start_ns=f.opt_int("planned_start_ns"), planned_end_ns=f.opt_int("planned_end_ns"),
                   status=f.opt_text("status"), cut_by=f.opt_text("cut_by"),
                   skipped_disconnected=f.req_int("skipped_disconnected", 0),
                   measure_start_ns=f.opt_int("measure_start_ns"), measure_end_ns=f.opt_int("measure_end_ns"),
                   measure_note=f.opt_text("measure_note"), churn_per_task=f.opt_num("churn_per_task"),
                   churn_does=f.opt_text("churn_does"), extra=f.extra(cls.JSON_KEYS))

    @property
    def window(self) -> tuple[int, int] | None:
        """The step's real [start, end) in ns; None when it never ran."""
        return None if self.start_ns is None or self.end_ns is None else (self.start_ns, self.end_ns)

    def measured(self, warmup_s: float) -> tuple[int, int] | None:
        """The measurement window [start, end) in ns: run.json's, else (older runs) [start + warm-up, end)."""
        if self.start_ns is None or self.end_ns is None:
            return None
        start = self.measure_start_ns if self.measure_start_ns is not None else self.start_ns + int(warmup_s * 1e9)
        return start, self.measure_end_ns if self.measure_end_ns is not None else self.end_ns
