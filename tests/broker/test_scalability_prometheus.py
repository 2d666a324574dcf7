"""The scalability sweep's Prometheus endpoint is the broker its AMQP URI reached, on 3.10 and 4.0 side by side.

Without --prometheus the sweep guessed the AMQP host at 15692: against 4.0 on 5680 that is 3.10's plugin, so
the routed counter and the memory alarm watched the other broker. The check runs before Spark starts."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rbench.commands.scalability import probe
from rbench.errors import ConfigError
from rbench.scenarios.scalability.broker_check import checked_spec
from rbench.scenarios.scalability.plan import SweepSpec
from tests.brokers import RABBITMQ_3, RABBITMQ_4

ROOT = Path(__file__).resolve().parents[2]


def both() -> None:
    RABBITMQ_3.require()
    RABBITMQ_4.require()


def test_the_guess_of_another_broker_is_refused_in_one_line_naming_both() -> None:
    both()
    spec = SweepSpec(uri=RABBITMQ_4.amqp_url)
    with pytest.raises(ConfigError) as exc:
        checked_spec(spec, probe(spec.uri))
    message = str(exc.value)
    assert "\n" not in message and "guest:guest" not in message
    assert message.startswith("--prometheus (not given: guessed the AMQP host's port 15692): http://127.0.0.1:15692/ "
                              "answers for cluster ")
    assert "node rabbit@localhost" in message and "(RabbitMQ 4.0" in message      # names both brokers
    assert ":5680/" in message and "give --prometheus http://HOST:PORT" in message
    given = SweepSpec(uri=RABBITMQ_4.amqp_url, prometheus=f"http://127.0.0.1:{RABBITMQ_3.prometheus_port}")
    with pytest.raises(ConfigError, match=r"^--prometheus \(given\): "):
        checked_spec(given, probe(given.uri))


@pytest.mark.parametrize("broker", [RABBITMQ_3, RABBITMQ_4], ids=lambda b: b.name)
def test_the_brokers_own_endpoint_passes_and_is_what_the_sweep_reads(broker: object) -> None:
    both()
    uri, port = broker.amqp_url, broker.prometheus_port               # type: ignore[attr-defined]
    spec = checked_spec(SweepSpec(uri=uri, prometheus=f"http://127.0.0.1:{port}"), probe(uri))
    assert spec.prometheus == f"http://127.0.0.1:{port}"
    if broker is RABBITMQ_3:                                         # the guess is right for 3.10 on 5672
        assert checked_spec(SweepSpec(uri=uri), probe(uri)).prometheus == "http://127.0.0.1:15692"


def test_an_endpoint_that_does_not_answer_is_left_to_the_sweeps_note() -> None:
    both()
    spec = checked_spec(SweepSpec(uri=RABBITMQ_4.amqp_url, prometheus="http://127.0.0.1:9"), probe(RABBITMQ_4.amqp_url))
    assert spec.prometheus == "http://127.0.0.1:9"


def test_the_command_refuses_before_spark_starts() -> None:
    both()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "rbench.cli", "scalability", "--uri", RABBITMQ_4.amqp_url, "-x", "2",
                        "-y", "1", "-n", "5", "--out", "/nonexistent-not-written"],
                       capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--prometheus (not given" in r.stderr and "15692" in r.stderr
