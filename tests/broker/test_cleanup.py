"""What a run declares is deleted afterwards unless queues.keep; what existed before is never touched;
what a run killed outright left behind is deleted by the next run (rbench.coordinator.orphans).

Against the real broker (issue 11: `perftest -qa x-queue-type=stream` left its stream behind).
"""
from __future__ import annotations

import asyncio
import io
import json
import os
import time
from pathlib import Path
from typing import Any

from rbench.config.load import workload_from_dict
from rbench.config.model import Workload
from rbench.config.types import ClusterTarget
from rbench.config.uri import mask_uri
from rbench.coordinator import orphans
from rbench.coordinator.cleanup import delete_created, snapshot
from rbench.drivers.amqp091 import Amqp091Driver
from rbench.drivers.replies import NotFound
from rbench.perftest import grammar, mapping


def perftest_workload(amqp_url: str, *argv: str) -> Workload:
    mapped = mapping.to_workload(grammar.parse(["-h", amqp_url, "-z", "1", *argv]))
    return workload_from_dict(mapped.workload, source="perftest options")


async def _with_driver(url: str, fn: Any) -> Any:
    d = Amqp091Driver()
    await d.open(ClusterTarget("t", (url,)))
    try:
        return await fn(d)
    finally:
        await d.aclose()


def exists(url: str, name: str) -> bool:
    async def check(d: Amqp091Driver) -> bool:
        try:
            await d.queue_declare(name, passive=True)
            return True
        except NotFound:
            return False
    return bool(asyncio.run(_with_driver(url, check)))


def declare(url: str, name: str, arguments: dict[str, Any] | None = None) -> None:
    asyncio.run(_with_driver(url, lambda d: d.queue_declare(name, arguments=arguments)))


def test_a_stream_the_run_declared_is_deleted(amqp_url: str, unique_name: str) -> None:
    w = perftest_workload(amqp_url, "-qa", "x-queue-type=stream", "-u", unique_name)
    assert w.queues.type == "stream" and not w.queues.keep
    before = snapshot(w)
    declare(amqp_url, unique_name, {"x-queue-type": "stream"})        # what the run's task declares
    assert exists(amqp_url, unique_name)
    assert delete_created(w, before) == {"default": [unique_name]}
    assert not exists(amqp_url, unique_name)


def test_a_queue_that_existed_before_the_run_is_kept(amqp_url: str, unique_name: str) -> None:
    declare(amqp_url, unique_name)
    w = perftest_workload(amqp_url, "-u", unique_name)
    before = snapshot(w)
    assert delete_created(w, before) == {"default": []}
    assert exists(amqp_url, unique_name)                             # the session fixture deletes it


def test_keep_leaves_what_the_run_declared(amqp_url: str, unique_name: str) -> None:
    data = perftest_workload(amqp_url, "-u", unique_name, "-qq").model_dump(by_alias=True)
    data["queues"]["keep"] = True
    w = workload_from_dict(data)
    before = snapshot(w)
    assert before is None
    declare(amqp_url, unique_name, {"x-queue-type": "quorum"})
    assert delete_created(w, before) == {}
    assert exists(amqp_url, unique_name)


def test_perftest_auto_delete_false_keeps_the_queues(amqp_url: str, unique_name: str) -> None:
    assert perftest_workload(amqp_url, "-u", unique_name, "-ad", "false").queues.keep
    assert not perftest_workload(amqp_url, "-u", unique_name).queues.keep


def _orphaned_run(root: Path, run_id: str, workload: Workload, uris: list[str], created: dict[str, list[str]]) -> Path:
    """A run.json left `running` by a coordinator on another host whose heartbeat stopped two minutes ago."""
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": run_id, "status": "running", "workload_name": workload.name, "ended_at": None,
        "coordinator": {"hostname": "gone-pod", "pid": 1},
        "clusters": [{"name": "default", "status": "running", "uris": uris}], "queues_created": created}))
    alive = run_dir / orphans.ALIVE_FILE
    alive.touch()
    t = time.time() - 120
    os.utime(alive, (t, t))
    return run_dir


def test_the_next_run_deletes_what_an_orphaned_run_created_on_the_same_cluster(
        amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    w = perftest_workload(amqp_url, "-u", unique_name)
    other = f"{unique_name}-before"                                 # existed before that run: not in queues_created
    declare(amqp_url, unique_name)
    declare(amqp_url, other)
    try:
        run_dir = _orphaned_run(tmp_path, "r1", w, [mask_uri(amqp_url)], {"default": [unique_name]})
        out = io.StringIO()
        (tidied,) = orphans.tidy(w, tmp_path, out)
        assert tidied.run_id == "r1" and json.loads((run_dir / "run.json").read_text())["status"] == "killed"
        assert not exists(amqp_url, unique_name) and exists(amqp_url, other)
        line = out.getvalue()
        assert line.count("\n") == 1 and "deleted its 1 queue(s) on cluster default" in line, line
        assert "guest:guest" not in line
    finally:
        asyncio.run(_with_driver(amqp_url, lambda d: d.delete_queues([unique_name, other])))


def test_an_orphaned_run_on_other_addresses_is_marked_but_its_queues_are_not_touched(
        amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    w = perftest_workload(amqp_url, "-u", unique_name)
    declare(amqp_url, unique_name)
    try:
        run_dir = _orphaned_run(tmp_path, "r2", w, ["amqp://guest:***@broker-b:5672/"], {"default": [unique_name]})
        out = io.StringIO()
        assert len(orphans.tidy(w, tmp_path, out)) == 1
        assert json.loads((run_dir / "run.json").read_text())["status"] == "killed"
        assert exists(amqp_url, unique_name)
        assert "no queues of its own to delete" in out.getvalue()
    finally:
        asyncio.run(_with_driver(amqp_url, lambda d: d.delete_queues([unique_name])))
