"""What a run declares is deleted afterwards unless queues.keep; what existed before is never touched.

Against the real broker (issue 11: `perftest -qa x-queue-type=stream` left its stream behind).
"""
from __future__ import annotations

import asyncio
from typing import Any

from rbench.config.load import workload_from_dict
from rbench.config.model import Workload
from rbench.config.types import ClusterTarget
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
