"""run.json's ``stage_attempts``: every time Spark ran a cluster's barrier stage, and which run counts.

A lost task or executor makes Spark run the whole barrier stage again (docs/cluster.md, "When
an executor dies"): the load starts again from step 1 with a new t0, and only the last attempt's
samples count. run.json must say so, or a reader cannot tell a clean run from one that was
restarted. Two sources, joined by task attempt id (the ``attempt-A`` folder of the samples):

* Spark's status store (``rbench.spark.stage_tasks``): which stage attempt each task attempt
  belonged to, how it ended (success, failed, killed) and Spark's reason;
* the control channel (``rbench.live.control``): what each task attempt reported, whether it
  reached the start gate (its t0), whether it sent its final report or vanished, its host and pid.

Spark's view is an internal API; without it the attempts are grouped by the start-gate round
they reached, which the control channel always knows.
"""
from __future__ import annotations

from typing import Any

from rbench.live.control import StartRound, TaskAttempt
from rbench.samples.attempts import COUNTED, FAILED, StageAttempt, TaskAttemptRecord
from rbench.samples.tasks import TaskResult


def _status(attempt: int, counted: set[int], spark: dict[str, Any] | None, seen: TaskAttempt | None) -> str:
    if attempt in counted:
        return COUNTED
    if seen is not None and seen.error is not None:
        return "failed"                # with an error it named (the driver then cancelled the stage: Spark says killed)
    if spark is not None and spark.get("status") not in (None, "running", "unknown"):
        return str(spark["status"])
    if seen is not None and seen.final:
        return "ended"                 # it finished by itself, but another task of its stage attempt failed
    if seen is not None and seen.closed_at is not None:
        return "lost"                  # its connection closed without a final report: its process died
    return "unknown"


def _reason(tasks: list[TaskAttemptRecord]) -> str | None:
    """Why a stage attempt did not count: its first failed task, else its first lost one."""
    for t in tasks:
        if t.status == "failed":
            return f"task {t.task} (attempt {t.attempt}) failed: {t.reason or 'no reason given'}"
    for t in tasks:
        if t.status == "lost":
            return (f"task {t.task} (attempt {t.attempt}) was lost: its control connection closed without a "
                    f"final report (its Python worker or executor died)")
    for t in tasks:
        if t.status == "killed":
            return f"Spark killed its tasks: {t.reason or 'another task of the stage failed'}"
    return None


def describe(results: list[TaskResult], seen: list[TaskAttempt], starts: list[StartRound],
             spark: list[dict[str, Any]]) -> list[StageAttempt]:
    """One entry per stage attempt, oldest first: its t0, whether it counted, and why not; its task attempts.

    ``results`` are what the stage returned (the counted attempt's tasks; empty when it failed),
    ``seen``/``starts`` the control channel's records, ``spark`` ``rbench.spark.stage_tasks``."""
    counted = {r.attempt for r in results if r.attempt is not None}
    by_id = {a.attempt: a for a in seen}
    spark_by_id = {int(t["attempt"]): t for t in spark}
    round_of = {a: s for s in starts for a in s.attempts.values()}
    ids = sorted(set(by_id) | set(spark_by_id) | counted)
    use_spark = bool(ids) and all(i in spark_by_id for i in ids)

    def group(i: int) -> float:
        if use_spark:
            return float(spark_by_id[i]["stage_attempt"])
        if i in round_of:
            return float(round_of[i].index)
        # never reached the start gate: it comes before the first later start (attempt ids only grow)
        later = [s.index for s in starts if min(s.attempts.values(), default=i + 1) > i]
        return (min(later) if later else len(starts)) - 0.5

    groups: dict[float, list[TaskAttemptRecord]] = {}
    for i in ids:
        seen_i, spark_i = by_id.get(i), spark_by_id.get(i)
        task = seen_i.task if seen_i is not None else int(spark_i["task"]) if spark_i is not None else -1
        spark_reason, executor, spark_host = (None, None, None) if spark_i is None else (
            spark_i.get("reason"), spark_i.get("executor"), spark_i.get("host"))
        groups.setdefault(group(i), []).append(TaskAttemptRecord(
            task=task, attempt=i, status=_status(i, counted, spark_i, seen_i),
            reason=None if i in counted else (seen_i.error if seen_i is not None and seen_i.error else spark_reason),
            executor=executor,
            host=(seen_i.host if seen_i is not None and seen_i.host else None) or spark_host,
            pid=None if seen_i is None else seen_i.pid,
            reached_t0=i in round_of,
            final_report=seen_i is not None and seen_i.final,
            reported=None if seen_i is None else dict(seen_i.reported),
        ))
    out: list[StageAttempt] = []
    for key, tasks in sorted(groups.items()):
        tasks.sort(key=lambda t: (t.task, t.attempt))
        t0s = {round_of[t.attempt].t0_ns for t in tasks if t.attempt in round_of}
        is_counted = any(t.status == COUNTED for t in tasks)
        out.append(StageAttempt(
            stage_attempt=int(key) if use_spark else None,
            counted=is_counted,
            t0_ns=min(t0s) if t0s else None,
            outcome=COUNTED if is_counted else FAILED,
            reason=None if is_counted else _reason(tasks),
            tasks=tuple(tasks),
        ))
    return out


def restart_line(cluster: str, start: StartRound, superseded: list[TaskAttempt]) -> str:
    """What the coordinator prints when the start gate opens for a restarted stage."""
    ended = ", ".join(f"{a.attempt} (task {a.task}{'' if a.final else ', lost'})" for a in superseded)
    waited = ""
    if start.still_connected:
        waited = f"; attempt(s) {start.still_connected} were still connected after {start.waited_s:.0f} s"
    elif start.waited_s >= 0.5:
        waited = f"; waited {start.waited_s:.1f} s for them to end"
    return (f"rbench: cluster {cluster}: Spark restarted the stage; earlier task attempt(s) {ended}{waited}. The load "
            f"starts again from step 1 (new t0); only this attempt's samples count")
