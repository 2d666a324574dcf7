"""A restarted barrier stage in run.json and in what the reduce reads (no Spark, no broker).

The standalone-cluster test (tests/spark/test_executor_loss.py) produces the real thing; these
pin the rules: which attempt counts, how the others are described, and that the reduce reads
exactly the attempts run.json names even when a superseded attempt committed too.
"""
from __future__ import annotations

import json
from pathlib import Path

from rbench.coordinator.attempts import describe, restart_line
from rbench.live.control import StartRound, TaskAttempt
from rbench.samples.attempts import restarted_stage_note
from rbench.samples.layout import COMMITTED, attempt_dir, committed_parts
from rbench.samples.record import RunRecord
from rbench.samples.tasks import TaskResult


def _seen(task: int, attempt: int, start: int | None, final: bool, closed: bool = True) -> TaskAttempt:
    a = TaskAttempt("c1", task, attempt, host="h", pid=1000 + attempt, start=start, final=final,
                    closed_at=1.0 if closed else None)
    a.reported["published"] = 10 * attempt
    return a


SEEN = [_seen(0, 3, 0, final=False), _seen(1, 4, 0, final=False), _seen(0, 5, 1, final=True), _seen(1, 6, 1, final=True)]
STARTS = [StartRound(0, {0: 3, 1: 4}, 111), StartRound(1, {0: 5, 1: 6}, 222, waited_s=2.5)]
RESULTS_JSON = [{"task": 0, "attempt": 5, "t0_ns": 222}, {"task": 1, "attempt": 6, "t0_ns": 222}]
RESULTS = [TaskResult.from_json(r) for r in RESULTS_JSON]
SPARK = [
    {"stage_attempt": 0, "task": 0, "attempt": 3, "status": "failed", "executor": "0", "host": "h",
     "reason": "SparkException: Python worker exited unexpectedly (crashed)"},
    {"stage_attempt": 0, "task": 1, "attempt": 4, "status": "killed", "executor": "0", "host": "h",
     "reason": "Stage cancelled: Task ShuffleMapTask(0, 0) from barrier stage ShuffleMapStage 0 failed."},
    {"stage_attempt": 1, "task": 0, "attempt": 5, "status": "running", "executor": "0", "host": "h", "reason": None},
    {"stage_attempt": 1, "task": 1, "attempt": 6, "status": "success", "executor": "0", "host": "h", "reason": None},
]


def test_run_json_names_the_counted_attempt_and_why_the_earlier_one_failed() -> None:
    first, second = describe(RESULTS, SEEN, STARTS, SPARK)
    assert (first.stage_attempt, first.counted, first.t0_ns, first.outcome) == (0, False, 111, "failed")
    assert first.reason == "task 0 (attempt 3) failed: SparkException: Python worker exited unexpectedly (crashed)"
    assert [(t.task, t.attempt, t.status) for t in first.tasks] == [(0, 3, "failed"), (1, 4, "killed")]
    assert first.tasks[0].pid == 1003 and first.tasks[0].reported["published"] == 30
    assert not first.tasks[0].final_report and first.tasks[0].reached_t0
    assert (second.stage_attempt, second.counted, second.t0_ns, second.reason) == (1, True, 222, None)
    assert [t.status for t in second.tasks] == ["counted", "counted"]


def test_without_sparks_view_attempts_are_grouped_by_the_start_they_reached() -> None:
    lost_early = _seen(1, 2, None, final=False)            # died before the start gate of the first attempt
    first, second, third = describe(RESULTS, [lost_early, *SEEN], STARTS, [])
    assert first.t0_ns is None and [t.attempt for t in first.tasks] == [2]
    assert "was lost: its control connection closed without a final report" in first.reason
    assert [t.attempt for t in second.tasks] == [3, 4] and second.stage_attempt is None
    assert third.counted and third.t0_ns == 222


def test_a_run_that_failed_counts_no_attempt() -> None:
    attempts = describe([], SEEN[:2], STARTS[:1], SPARK[:2])
    assert len(attempts) == 1 and not attempts[0].counted and attempts[0].outcome == "failed"
    note = restarted_stage_note("c1", attempts + attempts)
    assert note is not None and "none counted (the stage failed)" in note


def test_restart_and_summary_lines_say_what_counts() -> None:
    line = restart_line("c1", STARTS[1], SEEN[:2])
    assert "earlier task attempt(s) 3 (task 0, lost), 4 (task 1, lost)" in line and "waited 2.5 s" in line
    assert "only this attempt's samples count" in line
    note = restarted_stage_note("c1", describe(RESULTS, SEEN, STARTS, SPARK))
    assert note == ("cluster c1: the Spark stage ran 2 times (attempt 1: task 0 (attempt 3) failed: SparkException: "
                    "Python worker exited unexpectedly (crashed)); counted: attempt 2 (task attempts 5, 6), "
                    "with its own t0 and step windows")
    assert restarted_stage_note("c1", describe(RESULTS, SEEN[2:], STARTS[1:], SPARK[2:])) is None


def _attempt(root: Path, task: int, attempt: int, committed: bool) -> None:
    folder = attempt_dir(root, "r", "published", "c1", task, attempt)
    folder.mkdir(parents=True)
    (folder / "part-00000.parquet").write_bytes(b"")
    if committed:
        (folder / COMMITTED).write_text(json.dumps({"rows": 0, "parts": 1, "interrupted": False}))


def test_the_reduce_reads_the_attempts_run_json_counts_not_the_highest_committed(tmp_path: Path) -> None:
    # task 1's stage attempt 0 finished and committed (attempt 4) before its sibling died; the restarted stage's
    # attempts are 5 and 6. Then a later, committed attempt 7 of task 1 (say a fetch failure re-ran it)
    # must not be mixed in: run.json names 5 and 6, whose t0 its step windows are.
    for task, attempt, committed in [(0, 3, False), (1, 4, True), (0, 5, True), (1, 6, True), (1, 7, True)]:
        _attempt(tmp_path, task, attempt, committed)
    counted = RunRecord.from_json({"clusters": [{"name": "c1", "task_results": RESULTS_JSON},
                                                {"name": "c2", "task_results": [{"task": 0}]}]}).counted_attempts()
    assert counted == {("c1", 0): 5, ("c1", 1): 6}
    files, notes = committed_parts(tmp_path / "r", "r", "published", ["c1"], counted)
    assert sorted(Path(f).parent.name for f in files) == ["attempt-5", "attempt-6"]
    assert any("attempt(s) [3] ignored: run.json counts attempt 5" in n for n in notes)
    assert any("attempt(s) [4, 7] ignored: run.json counts attempt 6" in n for n in notes)
    # an older run.json (no attempts in task_results): the highest committed attempt of each task, as before
    files, _ = committed_parts(tmp_path / "r", "r", "published", ["c1"])
    assert sorted(Path(f).parent.name for f in files) == ["attempt-5", "attempt-7"]


def test_a_counted_attempt_that_did_not_commit_is_missing_not_replaced(tmp_path: Path) -> None:
    _attempt(tmp_path, 0, 3, committed=True)
    _attempt(tmp_path, 0, 5, committed=False)
    files, notes = committed_parts(tmp_path / "r", "r", "published", ["c1"], {("c1", 0): 5})
    assert files == [] and any("attempt 5, the one run.json counts, is not committed" in n for n in notes)


def test_a_task_that_named_its_error_failed_with_that_error_even_if_spark_says_killed() -> None:
    named = _seen(0, 3, 0, final=True)
    named.error = "PreconditionFailed: declare queue 'q' (Queue.Declare): 406 PRECONDITION_FAILED"
    spark = [{**SPARK[0], "status": "killed", "reason": "Stage cancelled: [SPARK_JOB_CANCELLED] Job 0 cancelled"}]
    (only,) = describe([], [named], STARTS[:1], spark)
    assert only.tasks[0].status == "failed"
    assert only.reason == f"task 0 (attempt 3) failed: {named.error}"
