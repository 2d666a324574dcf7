"""Churn (issue 32): a task opens and closes connections at R/s during a step, against both brokers.

The broker's own list is the witness that the churned connections are real and are closed: the
management API lists the run's connections named `churn-K` while the step runs and none after the task.
Rates are low (20/s for 2 s); nothing here asserts a speed.
"""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from rbench.config.load import workload_from_dict
from rbench.plan import plan
from rbench.samples.churn import ChurnStats
from tests.broker.test_connections import connection_names, run_watched
from tests.brokers import Broker
from tests.runhelpers import read, workload_dict

pytestmark = pytest.mark.timeout(180)


def test_churn_step_opens_and_closes_connections_at_its_rate(broker: Broker, unique_name: str, tmp_path: Path) -> None:
    w = workload_from_dict(workload_dict(
        broker.amqp_url, unique_name, driver="amqp091", producers=1, consumers=1, rate=None, duration=None,
        rate_steps=[{"rate": 20, "duration": 2}, {"rate": 20, "duration": 2,
                                                   "churn": {"rate": "20/s", "channel": True, "declare": True}}],
        queues={"pattern": f"{unique_name}-%d", "from": 1, "to": 1}))
    (task,) = plan(w, "local", 1, f"ch{uuid.uuid4().hex[:8]}", str(tmp_path))
    assert task.steps[0].churn is None and task.steps[1].churn is not None
    result, _ = run_watched(broker, task, lambda names: False, stop=False)
    stats = ChurnStats.from_json(result["churn"], "churn")
    assert not stats.failed_at_us and not stats.skipped_at_us
    assert len(stats.at_us) == 40                               # 20/s over the 2 s step, each one opened and closed
    assert all(2_000_000 <= at < 4_000_000 for at in stats.at_us)   # inside the churned step only
    assert all(0 < c <= y for c, y in zip(stats.connect_us, stats.cycle_us))
    assert not [n for n in connection_names(broker, task.run_id) if " churn-" in n]   # none left open
    assert read(tmp_path / task.run_id, "published").num_rows == result["published"] > 0
