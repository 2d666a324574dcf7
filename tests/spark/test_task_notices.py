"""A warning an executor's code logs reaches the user's terminal once per cluster (rbench.runtime.notices), not only
the executor's log: issue 29's exchange that exists with the other durability, used as it is, was said only in
the Spark log."""
from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

from rbench.config.load import workload_from_dict
from rbench.coordinator.run import run_workload
from tests.brokers import RABBITMQ_3
from tests.runhelpers import delete_queues, workload_dict


def test_an_exchange_used_as_it_is_is_said_in_the_terminal_once(spark, unique_name: str, tmp_path: Path) -> None:
    from tests.broker.test_exchange_durability import _admin, predeclare

    broker = RABBITMQ_3
    broker.require()
    name = re.sub(r"[^A-Za-z0-9_.:-]", "-", unique_name)
    predeclare(broker, name, durable=True)                      # PerfTest (or an earlier rbench) ran first
    try:
        w = workload_from_dict(workload_dict(broker.amqp_url, name, driver="amqp091", producers=2, consumers=1,
                                             rate=100, duration=1, exchange={"name": name, "durable": False},
                                             queues={"pattern": f"{name}-%d", "from": 1, "to": 2}))
        out = io.StringIO()
        result = run_workload(w, tmp_path, spark, out=out, tasks=2, progress=False)
    finally:
        delete_queues(broker.amqp_url, [f"{name}-1", f"{name}-2"])
        asyncio.run(_admin(broker, lambda d: d.delete_exchange(name)))
    assert result.status == "complete"
    said = [line for line in out.getvalue().splitlines() if f"exchange '{name}' already exists durable" in line]
    # two tasks, each declaring: one line, prefixed as every warning of the run
    assert len(said) == 1 and said[0].startswith("rbench: warning: cluster local: "), out.getvalue()
