"""A stream workload through the executor runtime (stamp, recorder, Parquet) without Spark."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rbench.config.load import workload_from_dict
from rbench.config.types import ClusterTarget
from rbench.drivers.stream import StreamDriver
from rbench.plan import plan
from rbench.runtime.task import run_task
from tests.broker import on_both_brokers
from tests.loops import LoopRunner
from tests.runhelpers import keys, read, workload_dict

pytestmark = pytest.mark.timeout(120)
amqp_url, stream_url = on_both_brokers.amqp_url, on_both_brokers.stream_url     # fixtures: the broker row's URLs


def _delete(run: LoopRunner, stream_url: str, names: list[str]) -> None:
    async def go() -> None:
        d = StreamDriver()
        await d.open(ClusterTarget("local", (), stream_uris=(stream_url,)))
        try:
            await d.delete_streams(names)
        finally:
            await d.aclose()
    run(go())


@pytest.mark.loops("uvloop")
@pytest.mark.parametrize("fmt", ["amqp", "binary"])
def test_stream_workload_consumes_every_message_once_in_order(fmt: str, amqp_url: str, stream_url: str, unique_name: str,
                                                              tmp_path: Path, run: LoopRunner) -> None:
    """run_task always runs on uvloop; only the clean-up takes `run`, so this runs on uvloop only."""
    # message counts, not a duration: a loaded machine must not change how many are published
    data = workload_dict(amqp_url, unique_name, driver="stream", producers=2, consumers=2, rate=1000,
                         publisher={"confirm": True, "confirm_window": 64, "message_format": fmt,
                                    "message_count": 600},
                         consumer={"prefetch": 3, "multi_ack_every": 0, "message_count": 600})
    del data["duration"]
    data["queues"] = {"pattern": f"{unique_name}-%d", "from": 1, "to": 2, "type": "stream"}
    data["clusters"][0]["stream_uris"] = [stream_url]
    w = workload_from_dict(data)
    (p,) = plan(w, "local", 1, "run", str(tmp_path))
    try:
        result = run_task(p)
    finally:
        _delete(run, stream_url, [f"{unique_name}-1", f"{unique_name}-2"])
    published, consumed = read(tmp_path / "run", "published"), read(tmp_path / "run", "consumed")
    assert result["published"] == published.num_rows == 2 * 600
    assert set(published["outcome"].to_pylist()) == {"ack"}
    counts = Counter(keys(consumed))
    assert set(counts) == set(keys(published)) and max(counts.values()) == 1
    for producer in (0, 1):                      # per stream, in publishing order
        seqs = [s for (pr, s) in keys(consumed) if pr == producer]
        assert seqs == sorted(seqs) == list(range(600))
