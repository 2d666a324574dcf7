"""The broker sampler against the real broker: what it writes, and one line when a port does not answer."""
from __future__ import annotations

import io
import socket
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from rbench.config.model import BrokerMetrics
from rbench.config.types import ClusterTarget
from rbench.coordinator.broker import BrokerSampler, parse_prometheus
from rbench.samples.broker import CONNECTION_MEMORY, UNROUTABLE_DROPPED, UNROUTABLE_RETURNED, read_broker
from tests.brokers import Broker


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])        # nothing listens once the socket is closed


def _sample(tmp_path: Path, amqp_url: str, queue: str, cfg: BrokerMetrics, samples: int) -> tuple[BrokerSampler, str]:
    """Sample until ``samples`` samples were taken (or 30 s passed: a loaded machine answers slowly)."""
    out = io.StringIO()
    target = ClusterTarget(name="local", uris=(amqp_url,))
    sampler = BrokerSampler(tmp_path, "run-x", target, [queue], cfg, out).start()
    deadline = time.monotonic() + 30
    while sampler.samples < samples and time.monotonic() < deadline:
        time.sleep(0.1)
    sampler.stop()
    return sampler, out.getvalue()


def test_every_source_samples_node_and_queue_figures(tmp_path: Path, amqp_url: str, unique_name: str) -> None:
    import asyncio

    from rbench.drivers.amqp091 import Amqp091Driver

    async def declare() -> None:
        d = Amqp091Driver()
        await d.open(ClusterTarget(name="local", uris=(amqp_url,)))
        await d.queue_declare(unique_name, durable=False)
        await d.aclose()
    asyncio.run(declare())
    sampler, printed = _sample(tmp_path, amqp_url, unique_name, BrokerMetrics(interval=0.5), 3)
    assert printed == ""
    table = read_broker(tmp_path, "local")
    got = {(s, m) for s, m in zip(table["source"].to_pylist(), table["metric"].to_pylist())}
    # (the management API lists a new queue only after the broker's next statistics emission, up to 5 s: the AMQP
    # passive declare sees it at once)
    for expected in [("management", "mem_used_bytes"), ("management", "fd_used"), ("prometheus", "resident_memory_bytes"),
                     ("prometheus", "erlang_runtime_seconds_total"), ("amqp", "messages_ready"),
                     ("proc", "cpu_seconds_total")]:
        assert expected in got, expected
    assert sampler.samples >= 3 and sampler.summary().to_json()["sources"] == ["management", "prometheus", "amqp"]
    queue_rows = table.filter(pc.equal(table["source"], "amqp"))
    assert set(queue_rows["queue"].to_pylist()) == {unique_name}
    cpu = table.filter(pc.equal(table["metric"], "cpu_seconds_total"))["value"].to_pylist()
    assert cpu == sorted(cpu) and cpu[0] > 0                       # a counter of the beam process


def test_unreachable_ports_cost_one_warning_line(tmp_path: Path, amqp_url: str, unique_name: str) -> None:
    port = _closed_port()
    cfg = BrokerMetrics(interval=0.3, management_port=port, prometheus_port=port)
    sampler, printed = _sample(tmp_path, amqp_url, unique_name, cfg, 2)
    lines = printed.splitlines()
    assert len(lines) == 1, printed
    assert "cluster local: broker metrics unreachable (management:" in lines[0] and "prometheus:" in lines[0]
    assert "guest" not in printed
    summary = sampler.summary().to_json()          # as run.json keeps it
    assert set(summary["unreachable"]) == {"management", "prometheus"} and summary["sources"] == ["amqp"]


def test_prometheus_text_format() -> None:
    text = ('# HELP x y\nrabbitmq_identity_info{rabbitmq_node="rabbit@h",rabbitmq_cluster="a,b"} 1\n'
            'erlang_vm_statistics_runtime_milliseconds 6119\nrabbitmq_queue_messages{queue="q",vhost="/"} 3 1700\n')
    assert parse_prometheus(text) == [
        ("rabbitmq_identity_info", {"rabbitmq_node": "rabbit@h", "rabbitmq_cluster": "a,b"}, 1.0),
        ("erlang_vm_statistics_runtime_milliseconds", {}, 6119.0),
        ("rabbitmq_queue_messages", {"queue": "q", "vhost": "/"}, 3.0)]


def test_listed_endpoints_are_each_sampled_and_management_falls_over(tmp_path: Path, amqp_url: str,
                                                                    unique_name: str) -> None:
    """Nodes sharing a host on other ports (the local cluster): every listed Prometheus endpoint is one
    node's, and the first management API that answers speaks for the cluster."""
    dead = _closed_port()
    cfg = BrokerMetrics(interval=0.5, management_urls=[f"http://127.0.0.1:{dead}/api", "http://127.0.0.1:15672/api/"],
                        prometheus_urls=[f"http://127.0.0.1:{dead}/metrics", "http://127.0.0.1:15692/metrics"])
    sampler, printed = _sample(tmp_path, amqp_url, unique_name, cfg, 2)
    assert printed == "" and sampler.summary().to_json()["sources"] == ["management", "prometheus", "amqp"]
    table = read_broker(tmp_path, "local")
    sources = set(table["source"].to_pylist())
    assert {"management", "prometheus"} <= sources
    prom_nodes = set(table.filter(pc.equal(table["source"], "prometheus"))["node"].to_pylist())
    assert len(prom_nodes) == 1 and next(iter(prom_nodes)).startswith("rabbit@")   # the live node, by its name


def test_unroutable_counters_are_one_figure_per_node_on_both_brokers(tmp_path: Path, broker: Broker,
                                                                    unique_name: str) -> None:
    """Prometheus gives rabbitmq_global_messages_unroutable_*_total once per protocol (3.10: amqp091 and stream;
    4.0: amqp10 too); the sampler writes their sum, one row per node and sample, and a last sample at stop."""
    cfg = BrokerMetrics(interval=0.3, management_port=broker.management_port, prometheus_port=broker.prometheus_port)
    sampler, printed = _sample(tmp_path, broker.amqp_url, unique_name, cfg, 2)
    assert printed == ""
    table = read_broker(tmp_path, "local")
    for metric in (UNROUTABLE_DROPPED, UNROUTABLE_RETURNED):
        rows = table.filter(pc.equal(table["metric"], metric))
        assert set(rows["source"].to_pylist()) == {"prometheus"}
        times = rows["t_ns"].to_pylist()
        assert len(times) == len(set(times)) == sampler.samples >= 3       # 2 taken before stop(), 1 at it
        assert all(v >= 0 for v in rows["value"].to_pylist())


def test_the_memory_breakdown_of_connections_is_sampled_on_both_brokers(tmp_path: Path, broker: Broker,
                                                                        unique_name: str) -> None:
    """/api/nodes/NAME/memory (3.10 and 4.0): the four connection categories per node, only when asked (runs with
    idle connections), stamped with the time of a sample the sampler took; the node figures stay as they were."""
    cfg = BrokerMetrics(interval=0.3, management_port=broker.management_port, prometheus_port=broker.prometheus_port)
    target = ClusterTarget(name="local", uris=(broker.amqp_url,))
    sampler = BrokerSampler(tmp_path, "run-x", target, [unique_name], cfg, io.StringIO(), memory_breakdown=True).start()
    deadline = time.monotonic() + 30
    while sampler.samples < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    sampler.stop()
    table = read_broker(tmp_path, "local")
    breakdown = table.filter(pc.is_in(table["metric"], pa.array(CONNECTION_MEMORY)))
    assert set(breakdown["metric"].to_pylist()) == set(CONNECTION_MEMORY)
    assert set(breakdown["source"].to_pylist()) == {"management"}
    assert all(v >= 0 for v in breakdown["value"].to_pylist())
    sampled_at = set(table.filter(pc.equal(table["metric"], "mem_used_bytes"))["t_ns"].to_pylist())
    assert set(breakdown["t_ns"].to_pylist()) <= sampled_at
    plain = tmp_path / "plain"
    _sample(plain, broker.amqp_url, unique_name, cfg, 2)
    assert not set(read_broker(plain, "local")["metric"].to_pylist()) & set(CONNECTION_MEMORY)
