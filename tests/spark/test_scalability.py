"""`rbench scalability` on the real broker through the shared local[2] Spark session.

Small sweeps (-b 2 -x 3 -y 2 -c 2: queues 1, 2, 4; bindings 1, 2), each a few seconds: the broker's
routed counter moves by n × q per level, two tasks split the queues without overlap, and nothing
the sweep declared is left afterwards, also after a memory alarm and after an interrupt.
"""
from __future__ import annotations

import _thread
import asyncio
import base64
import json
import os
import signal
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from rbench.config.types import ClusterTarget
from rbench.drivers.amqp091 import Amqp091Driver
from rbench.scenarios.scalability.output import ROWS, SWEEP_JSON
from rbench.scenarios.scalability.plan import Level, SweepSpec, queue_name, share
from rbench.scenarios.scalability.sweep import Sweep, spark_submitter
from tests.conftest import TEST_PREFIX

API = os.environ.get("RBENCH_MANAGEMENT_URL", "http://127.0.0.1:15672/api")


def _api(path: str) -> Any:
    auth = "Basic " + base64.b64encode(b"guest:guest").decode()
    request = urllib.request.Request(f"{API}{path}", headers={"Authorization": auth})
    return json.loads(urllib.request.urlopen(request, timeout=10).read())


def _names(kind: str, prefix: str) -> list[str]:
    """Queues or exchanges on the broker whose name starts with prefix (the metadata store: no stats delay)."""
    return sorted(o["name"] for o in _api(f"/{kind}/%2F?columns=name") if o["name"].startswith(prefix))


def _queue_messages(amqp_url: str, names: list[str]) -> int:
    """Messages in these queues, from queue.declare-ok (exact, unlike the management API's 5 s statistics)."""
    async def count() -> int:
        driver = Amqp091Driver()
        await driver.open(ClusterTarget("test", (amqp_url,)))
        try:
            return sum([(await driver.queue_declare(name, passive=True))[1] for name in names])
        finally:
            await driver.aclose()

    return asyncio.run(count())


def _sweep(spark: Any, amqp_url: str, tmp_path: Path, **kw: Any) -> Sweep:
    spec = SweepSpec(uri=amqp_url, base=2, x=3, y=kw.pop("y", 2), cap=kw.pop("cap", 3), messages=kw.pop("messages", 40),
                     tasks=kw.pop("tasks", 1), name_prefix=f"{TEST_PREFIX}scal-", label="test")
    submit, cancel = spark_submitter(spark, spec.tasks)
    return Sweep(spec, submit, tmp_path, echo=lambda _line: None, cancel=cancel, **kw)


def test_one_task_routes_n_times_q_per_level_and_leaves_nothing(spark: Any, amqp_url: str, tmp_path: Path) -> None:
    seen: dict[tuple[int, int], list[str]] = {}

    def after(level: Level, phase: str, rows: list[dict[str, Any]]) -> None:
        if phase == "create":
            seen[(level.queues, level.bindings)] = _names("queues", sweep.prefix)
        if phase == "route":       # x-message-ttl 0: the queues keep nothing of the probe
            assert _queue_messages(amqp_url, seen[(level.queues, level.bindings)]) == 0

    sweep = _sweep(spark, amqp_url, tmp_path, cap=2, after_phase=after)
    result = sweep.run()
    assert result.status == "complete" and not result.notes
    # every level exists with exactly its q queues once created
    assert {key: len(names) for key, names in seen.items()} == {(1, 1): 1, (2, 1): 2, (4, 1): 4, (1, 2): 1, (2, 2): 2}
    assert seen[(4, 1)] == [queue_name(sweep.prefix, 1, i) for i in range(4)]
    rows = pq.read_table(result.run_dir / ROWS).to_pylist()
    routes = [r for r in rows if r["phase"] == "route"]
    assert len(routes) == 5
    for r in routes:
        assert r["routed_counted"] == r["routed_expected"] == 40 * r["queues"], r
    baselines = [r for r in rows if r["phase"] == "baseline"]
    assert [r["returned"] for r in baselines] == [40] * 5        # every unbound mandatory publish came back
    assert {r["phase"] for r in rows} == {"create", "route", "baseline", "delete"}
    assert all(r["us_per_op"] > 0 for r in rows)
    assert _names("queues", sweep.prefix) == [] and _names("exchanges", sweep.prefix) == []
    assert json.loads((result.run_dir / SWEEP_JSON).read_text())["status"] == "complete"
    for name in ("scalability.md", "report.html", "create.png", "route.png", "delete.png"):
        assert (result.run_dir / "report" / name).stat().st_size > 0


def test_two_tasks_split_the_queues_without_overlap(spark: Any, amqp_url: str, tmp_path: Path) -> None:
    counts: dict[int, int] = {}

    def after(level: Level, phase: str, rows: list[dict[str, Any]]) -> None:
        if phase == "create":
            counts[level.queues] = len(_names("queues", sweep.prefix))
            # each task declared its own share, and the shares add up to what the level added
            assert {r["task"]: r["ops"] for r in rows} == {t: len(share(level.previous_queues, level.queues, t, 2))
                                                           for t in range(2)}
            assert sum(r["ops"] for r in rows) == level.added

    sweep = _sweep(spark, amqp_url, tmp_path, tasks=2, y=1, after_phase=after)
    result = sweep.run()
    assert result.status == "complete"
    # q declares in total and q distinct queues on the broker: no queue was declared by both tasks
    assert counts == {1: 1, 2: 2, 4: 4}
    rows = pq.read_table(result.run_dir / ROWS).to_pylist()
    assert {r["task"] for r in rows} == {0, 1}
    for r in (r for r in rows if r["phase"] == "route"):
        assert r["routed_counted"] == 40 * r["queues"]
    assert _names("queues", sweep.prefix) == [] and _names("exchanges", sweep.prefix) == []


def test_memory_alarm_ends_the_sweep_keeping_the_levels_done(spark: Any, amqp_url: str, tmp_path: Path) -> None:
    checks = iter([False, False, True])     # the broker's alarm, as the sweep reads it before each level
    sweep = _sweep(spark, amqp_url, tmp_path, y=1, alarm=lambda: next(checks, True))
    result = sweep.run()
    assert result.status == "memory-alarm" and "memory alarm" in result.notes[0]
    rows = pq.read_table(result.run_dir / ROWS).to_pylist()
    assert sorted({(r["queues"], r["phase"]) for r in rows}) == [
        (1, "baseline"), (1, "create"), (1, "delete"), (1, "route"),
        (2, "baseline"), (2, "create"), (2, "delete"), (2, "route")]
    assert _names("queues", sweep.prefix) == [] and _names("exchanges", sweep.prefix) == []


def test_interrupt_mid_sweep_deletes_everything(spark: Any, amqp_url: str, tmp_path: Path) -> None:
    armed: list[threading.Timer] = []

    def after(level: Level, phase: str, rows: list[dict[str, Any]]) -> None:
        if armed:          # the next stages ran faster than the timer: the Ctrl-C lands here, between stages,
            time.sleep(10)  # not in a later test
        if phase == "create" and level.queues == 2:   # Ctrl-C while the next stages run
            armed.append(threading.Timer(0.2, _thread.interrupt_main))
            armed[0].start()

    sweep = _sweep(spark, amqp_url, tmp_path, y=1, after_phase=after)
    # interrupt_main does nothing while SIGINT is ignored or default (an earlier test in the session may have left
    # it so): Python's own Ctrl-C handler, as a terminal user's process has it
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            sweep.run()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert sweep.result.status == "interrupted"
    assert _names("queues", sweep.prefix) == [] and _names("exchanges", sweep.prefix) == []
    assert json.loads((sweep.run_dir / SWEEP_JSON).read_text())["status"] == "interrupted"
    # the session still runs stages afterwards
    assert spark.sparkContext.parallelize([1, 2], 2).sum() == 3
