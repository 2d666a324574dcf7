"""Stream filtering and super streams through the executor runtime, on both brokers (3.10 refuses filtering)."""
from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rbench.config.load import workload_from_dict
from rbench.config.stream_filter import FilterSpread
from rbench.config.types import ClusterTarget, ConsumerSpec
from rbench.coordinator.cleanup import Snapshot, delete_created
from rbench.drivers.replies import NotFound
from rbench.drivers.stream import StreamDriver
from rbench.drivers.stream_super import partition_of
from rbench.errors import BrokerError
from rbench.plan import plan
from rbench.runtime.stamp import read_stamp
from rbench.runtime.task import run_task
from tests.broker import on_both_brokers
from tests.brokers import Broker
from tests.loops import LoopRunner
from tests.runhelpers import keys, read, workload_dict

pytestmark = [pytest.mark.timeout(120), pytest.mark.loops("uvloop")]
amqp_url, stream_url = on_both_brokers.amqp_url, on_both_brokers.stream_url     # fixtures: the broker row's URLs

PER_PRODUCER = 1000       # SLOTS: the spread is exact over it


def _workload(amqp_url: str, stream_url: str, name: str, **over: Any) -> Any:
    data = workload_dict(amqp_url, name, driver="stream", producers=2, consumers=1, rate=2000,
                         publisher={"confirm": True, "confirm_window": 64, "message_count": PER_PRODUCER},
                         consumer={"prefetch": 3, "multi_ack_every": 0})
    del data["duration"]
    data["queues"] = {"name": name, "type": "stream"}
    data["clusters"][0]["stream_uris"] = [stream_url]
    for key, value in over.items():
        data[key] = {**data.get(key, {}), **value}
    return workload_from_dict(data)


def _on_driver(run: LoopRunner, stream_url: str, amqp_url: str, job: Any) -> Any:
    async def go() -> Any:
        d = StreamDriver()
        await d.open(ClusterTarget("local", (amqp_url,), stream_uris=(stream_url,)))
        try:
            return await job(d)
        finally:
            await d.aclose()
    return run(go())


def test_a_filtering_consumer_gets_exactly_its_values_and_counts_what_it_dropped(
        broker: Broker, amqp_url: str, stream_url: str, unique_name: str, tmp_path: Path, run: LoopRunner) -> None:
    w = _workload(amqp_url, stream_url, unique_name,
                  publisher={"filter": {"values": ["eu", "us", "asia"], "weights": [1, 1, 2]}},
                  consumer={"filter": ["eu"]})
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    try:
        if broker.version_prefix == "3.10":
            with pytest.raises(BrokerError, match=r"stream filtering needs RabbitMQ 3\.13 or later; this broker is 3\.10"):
                run_task(p)
            return
        result = run_task(p)
    finally:
        _on_driver(run, stream_url, amqp_url, lambda d: d.delete_streams([unique_name]))
    spread = FilterSpread.of(["eu", "us", "asia"], [1, 1, 2])
    published, consumed = read(tmp_path / "run", "published"), read(tmp_path / "run", "consumed")
    assert result["published"] == published.num_rows == 2 * PER_PRODUCER
    wanted = {k for k in keys(published) if spread.value(*k) == "eu"}
    assert len(wanted) == 2 * PER_PRODUCER // 4          # a quarter of the slots, exactly
    got = Counter(keys(consumed))
    assert set(got) == wanted and max(got.values()) == 1   # nothing else handed on, nothing twice
    # the broker's bloom filter is per chunk: what it sent besides is dropped client-side, and only that
    assert 0 <= result["filtered"] <= 2 * PER_PRODUCER - len(wanted)


def test_a_super_stream_routes_by_key_hash_and_the_run_deletes_it(
        broker: Broker, amqp_url: str, stream_url: str, unique_name: str, tmp_path: Path, run: LoopRunner) -> None:
    w = _workload(amqp_url, stream_url, unique_name, queues={"super_stream": {"partitions": 3, "routing_keys": 50}})
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    parts = [f"{unique_name}-{i}" for i in range(3)]
    try:
        result = run_task(p)

        async def read_partition(d: StreamDriver, part: str, expect: int) -> list[tuple[int, int]]:
            got: list[tuple[int, int]] = []
            c = await d.consumer(ConsumerSpec(0, part, offset="first"), lambda body, _r, _t: got.append(read_stamp(body)[:2]))
            for _ in range(100):
                if len(got) >= expect:
                    break
                await asyncio.sleep(0.05)
            await c.aclose()
            return got

        published = read(tmp_path / "run", "published")
        by_part = Counter(partition_of(str(seq % 50), 3) for _, seq in keys(published))
        for i, part in enumerate(parts):        # each partition holds exactly the messages whose key hashes to it
            stamps = _on_driver(run, stream_url, amqp_url, lambda d, part=part, n=by_part[i]: read_partition(d, part, n))
            assert len(stamps) == by_part[i] and all(partition_of(str(s % 50), 3) == i for _, s in stamps)
        consumed = read(tmp_path / "run", "consumed")
        assert result["published"] == 2 * PER_PRODUCER and Counter(keys(consumed)) == Counter(keys(published))
        for (_, seq), queue in zip(keys(consumed), consumed["queue"].to_pylist()):   # under its partition
            assert queue == parts[partition_of(str(seq % 50), 3)]
    finally:
        deleted = delete_created(w, Snapshot(existed={"local": set()}))
    assert deleted == {"local": parts}

    async def gone(d: StreamDriver) -> None:
        from rbench.drivers.amqp091 import Amqp091Driver

        for part in parts:
            with pytest.raises(NotFound):
                amqp = Amqp091Driver()
                await amqp.open(ClusterTarget("check", (amqp_url,)))
                try:
                    await amqp.queue_declare(part, passive=True)
                finally:
                    await amqp.aclose()
    _on_driver(run, stream_url, amqp_url, gone)


def test_single_active_consumers_of_a_super_stream_share_its_partitions(
        broker: Broker, amqp_url: str, stream_url: str, unique_name: str, tmp_path: Path, run: LoopRunner) -> None:
    if broker.version_prefix == "3.10":
        pytest.skip("single active consumer needs RabbitMQ 3.11 (3.10's refusal: test_stream_driver)")
    w = _workload(amqp_url, stream_url, unique_name, queues={"super_stream": {"partitions": 2}},
                  consumer={"single_active": True})
    data = w.model_dump(by_alias=True)
    data["consumers"] = 2
    w = workload_from_dict(data)
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    try:
        result = run_task(p)
    finally:
        _on_driver(run, stream_url, amqp_url, lambda d: d.delete_super_streams([unique_name], 2))
    published, consumed = read(tmp_path / "run", "published"), read(tmp_path / "run", "consumed")
    assert result["published"] == 2 * PER_PRODUCER
    assert Counter(keys(consumed)) == Counter(keys(published))      # each message once, across the two members
