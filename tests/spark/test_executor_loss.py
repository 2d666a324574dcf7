"""A task's Python worker killed mid-run on a standalone cluster: the stage restarts and nothing counts twice.
And the other side: a task that fails with an error it can name is not run again (local session).

spark-submit of jobs/run.py, 2 tasks against the local broker. When the first attempt of task 0
has written its first samples (the load is running), the test SIGKILLs the Python worker that
runs it: the pid comes from the attempt's own ``_ATTEMPT`` file (docs/parquet.md), so the process
killed is exactly the one running that task attempt. Spark fails the barrier stage, kills task 1
and runs both tasks again as new attempts; the run completes, run.json names both stage attempts
(the first failed, and why; the second counted, with its t0), and the reduce reads each (cluster,
task) once: the samples of the counted attempts, with the dead attempt's messages that were still
in the queues counted as stale, not as deliveries or duplicates.
"""
from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from rbench.config.load import workload_from_dict
from rbench.config.types import ClusterTarget
from rbench.coordinator.run import run_workload
from rbench.coordinator.summary import print_summary
from rbench.drivers.amqp091 import Amqp091Driver
from rbench.errors import RbenchError
from rbench.reduce.job import reduce_runs
from rbench.samples.layout import COMMITTED, committed_parts
from rbench.samples.record import RunRecord
from tests.runhelpers import keys, run_json, workload_dict
from tests.standalone import ROOT, SPARK_SUBMIT, spark_submit_env, wait_for


def _read(files: list[str]) -> pa.Table:
    return pa.concat_tables([pq.read_table(f) for f in files])


@pytest.mark.timeout(420)
def test_a_killed_python_worker_restarts_the_stage_and_nothing_counts_twice(
        standalone: str, spark: Any, amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    # queues that outlive their consumers, and acks every 50 messages: the killed task's unacked deliveries go
    # back to its queue, so the restarted attempt finds the dead attempt's messages there (stale)
    workload = workload_dict(amqp_url, unique_name, rate=200, duration=8,
                             queues={"auto_delete": False}, consumer={"prefetch": 200, "multi_ack_every": 50})
    f = tmp_path / "w.yaml"
    f.write_text(json.dumps(workload))
    out = tmp_path / "out"
    proc = subprocess.Popen([str(SPARK_SUBMIT), "--master", standalone, "--conf", "spark.driver.host=127.0.0.1",
                             str(ROOT / "jobs" / "run.py"), str(f), "--out", str(out), "--no-reduce"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=spark_submit_env())
    try:
        marker = wait_for("task 0's first attempt", lambda: next(out.glob("*/published/local/task-00000/attempt-*/_ATTEMPT"), None),
                           proc, 180)
        first = marker.parent
        wait_for("task 0's first samples", lambda: next(first.glob("part-*.parquet"), None), proc, 60)
        pid = int(json.loads(marker.read_text())["pid"])
        assert not (first / COMMITTED).exists(), "the first attempt ended before the kill: the load was too short"
        os.kill(pid, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stdout[-2000:] + stderr[-3000:]
    (run_dir,) = out.iterdir()
    info = run_json(run_dir)
    cluster = info["clusters"][0]
    assert info["status"] == "complete" and cluster["status"] == "complete"
    assert info["stage_attempts_allowed"] == 2

    # run.json: two runs of the stage; the first failed because task 0's worker died, the second counted
    dead, counted = cluster["stage_attempts"]
    killed_attempt = int(first.name.split("-")[1])
    assert not dead["counted"] and dead["outcome"] == "failed" and dead["reason"].startswith(f"task 0 (attempt {killed_attempt})")
    assert "Python worker exited unexpectedly" in dead["reason"], dead["reason"]
    by_task = {t["task"]: t for t in dead["tasks"]}
    assert by_task[0]["status"] == "failed" and by_task[0]["pid"] == pid and by_task[0]["reached_t0"]
    assert by_task[1]["status"] == "killed"                   # Spark killed the other task of the stage
    assert counted["counted"] and counted["t0_ns"] == cluster["t0_ns"] > dead["t0_ns"]
    results = {r["task"]: r["attempt"] for r in cluster["task_results"]}
    assert {t["task"]: t["attempt"] for t in counted["tasks"]} == results
    assert min(results.values()) > max(t["attempt"] for t in dead["tasks"])
    assert "Spark restarted the stage" in stdout and "the Spark stage ran 2 times" in stdout

    # each (cluster, task) is read once: the counted attempts; the dead ones are there, uncommitted, ignored
    counted_ids = RunRecord.from_json(info).counted_attempts()
    assert counted_ids == {("local", t): a for t, a in results.items()}
    for kind in ("published", "consumed"):
        for task, attempts in ((0, {killed_attempt, results[0]}), (1, {by_task[1]["attempt"], results[1]})):
            folders = {int(p.name.split("-")[1]) for p in (run_dir / kind / "local" / f"task-{task:05d}").iterdir()}
            assert folders == attempts
    pub_files, _ = committed_parts(run_dir, run_dir.name, "published", ["local"], counted_ids)
    con_files, _ = committed_parts(run_dir, run_dir.name, "consumed", ["local"], counted_ids)
    published, consumed = _read(pub_files), _read(con_files)
    # the counted attempts published each producer's sequence numbers once, from 0 (a loaded machine may fall
    # behind the schedule and send fewer: docs/timing.md)
    for producer in set(published["producer"].to_pylist()):
        mine = published.filter(pc.equal(published["producer"], producer))
        assert sorted(mine["seq"].to_pylist()) == list(range(mine.num_rows))
    assert 0 < published.num_rows <= 2 * 200 * 8
    t0 = cluster["t0_ns"]
    fresh = consumed.filter(pc.greater_equal(consumed["t_intended"], t0))
    stale = consumed.num_rows - fresh.num_rows        # the dead attempt's messages left in the queues
    # the dead attempt used the same producer ids and sequence numbers: only t0 tells them apart
    assert Counter(keys(fresh)) == Counter(keys(published)), "a message lost or counted twice"
    # the reduce says the same: no loss, no duplicate, the stale ones set apart (on the tests' shared local
    # session, warm in a full run, rather than on the standalone executors)
    reduced = reduce_runs([run_dir], session=spark)
    assert sum(s["lost"] for s in reduced.steps) == 0 and sum(s["duplicated"] for s in reduced.steps) == 0
    assert [c["stale"] for c in reduced.clusters] == [stale]
    notes = (run_dir / "report" / "leaderboard.md").read_text()
    assert "the Spark stage ran 2 times" in notes
    assert (f"{stale:,} stale deliveries ignored" in notes) == (stale > 0)
    summary = io.StringIO()
    print_summary(run_dir, reduced, out=summary)
    assert "lost 0, duplicated 0" in summary.getvalue()
    print(f"killed pid {pid} (task 0, attempt {killed_attempt}); counted attempts {results}; "
          f"stale deliveries {stale}; {consumed.num_rows} consumed rows")


def _with_driver(url: str, fn: Callable[[Amqp091Driver], Awaitable[object]]) -> None:
    async def main() -> None:
        d = Amqp091Driver()
        await d.open(ClusterTarget("t", (url,)))
        try:
            await fn(d)
        finally:
            await d.aclose()
    asyncio.run(main())


def test_an_error_the_task_names_ends_the_run_without_a_restart(spark: Any, amqp_url: str, unique_name: str,
                                                                 tmp_path: Path) -> None:
    """A broker refusal would happen again: the stage is not run a second time, the run fails with the task's line."""
    queue = f"{unique_name}-1"
    _with_driver(amqp_url, lambda d: d.queue_declare(queue, durable=False, arguments={"x-max-length": 10}))
    try:
        w = workload_from_dict(workload_dict(amqp_url, unique_name, driver="amqp091", producers=1, consumers=1,
                                             queues={"from": 1, "to": 1}, duration=5))
        started = time.monotonic()
        with pytest.raises(RbenchError, match="PRECONDITION_FAILED") as caught:
            run_workload(w, tmp_path, spark, tasks=1, progress=False)
        took = time.monotonic() - started
    finally:
        _with_driver(amqp_url, lambda d: d.delete_queues([queue]))
    assert "\n" not in str(caught.value) and "Spark" not in str(caught.value)      # the task's own one line
    (run_dir,) = tmp_path.iterdir()
    info = run_json(run_dir)
    assert info["status"] == "failed"
    (only,) = info["clusters"][0]["stage_attempts"]            # no second run of the stage
    assert not only["counted"] and "PRECONDITION_FAILED" in only["reason"]
    print(f"failed in {took:.1f} s: {caught.value}")
