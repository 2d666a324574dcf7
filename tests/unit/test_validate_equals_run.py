"""Property: `rbench validate` refuses whatever `rbench plan` and `rbench run` would refuse before Spark starts.

Workloads are generated over the settings that interact (drivers, publisher and consumer options,
queue naming and types, faults, steps, rate searches, task counts, exit_when); each one that loads
must then plan, for every cluster, at the task counts a run could pick (1, 2 or 64 slots, the
workload's own count) and as a rate search's first probe. The converse is pinned for each refusal
the planner used to make on its own: validate exits 2 with one line naming the field.
Derandomized with no deadline, so CI sees the same cases every run.
"""
from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rbench.cli import main
from rbench.config.load import load_workload, workload_from_dict
from rbench.config.model import Workload
from rbench.errors import ConfigError
from rbench.plan import default_task_count, plan_run

CASES = 1500
SETTINGS = dict(derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
URI = "amqp://guest:guest@127.0.0.1:5672/"
BODY_FILE = __file__          # a file that exists: whether a path is readable is the host's answer, not the workload's
SLOTS = (1, 2, 64)


def some(options: dict[str, list[Any]], at_most: int) -> st.SearchStrategy[dict[str, Any]]:
    """Up to ``at_most`` of ``options``' settings, each with one of its values (a few at a time, so that the
    rules each workload meets or breaks are the ones under test, not a pile-up of unrelated ones)."""
    keys = sorted(options)
    return st.lists(st.sampled_from(keys), max_size=at_most, unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries({k: st.sampled_from(options[k]) for k in chosen}))


PUBLISHER = {
    "confirm": [True, False], "confirm_window": [0, 10], "mandatory": [True], "persistent": [True],
    "message_count": [1, 100], "content_type": ["text/plain"], "properties": [{"priority": 1}, {"headers": {"a": 1}}],
    "random_routing_key": [True], "routing_key_cache": [0, 5], "tx_size": [0, 3], "body_files": [[BODY_FILE]],
    "json_body": [True], "json_body_fields": [1, 20], "json_bodies": [1, 5], "message_format": ["binary"],
}
CONSUMER = {
    "prefetch": [0, 100], "auto_ack": [True, False], "multi_ack_every": [0, 10], "processing_delay": [0, 0.001],
    "message_count": [1, 100], "rate": [None, 10.0], "global_prefetch": [0, 5], "nack": [True], "requeue": [False],
    "arguments": [{"x-priority": 5}], "tx_size": [0, 3],
    "single_active": [True], "offset": ["next", "offset:5"],
    "pause": [None, {"at": 1, "for": 1}, {"at": 0, "until_backlog": 10}],
}
QUEUE_NAMING: list[dict[str, Any]] = [{}, {"name": "orders"}, {"pattern": "q-%d", "from": 0, "to": 0},
                                      {"pattern": "q-%d", "from": 1, "to": 2}, {"pattern": "q-%d", "from": 1, "to": 3},
                                      {"pattern": "q-%d", "from": 2, "to": 7}]
QUEUE_KIND = {"type": ["classic", "quorum", "stream"], "durable": [False], "auto_delete": [True], "exclusive": [True],
              "predeclared": [True], "bind": [False]}
EXCHANGE = {"name": ["", "direct", "fan"], "type": ["direct", "fanout", "topic", "headers"]}
FAULT = {"at": [0, 1, 3, 20], "action": ["kill", "stop", "pause", "restart"],
         "node": ["rabbit-1", "rabbit-2", "rabbit-3", "rabbit-9"], "restart_after": [None, 1, 2]}
rate_step = st.fixed_dictionaries({"rate": st.sampled_from([None, 10.0, 100.0]),
                                   "duration": st.sampled_from([0.5, 1, 2, 5])})
schedule = st.one_of(
    st.fixed_dictionaries({"duration": st.sampled_from([1, 5, 30])}, optional={"rate": st.sampled_from([50.0])}),
    st.fixed_dictionaries({"rate_steps": st.lists(rate_step, min_size=1, max_size=3)}),
    st.fixed_dictionaries({"variable_rate": st.lists(rate_step, min_size=1, max_size=3),
                           "duration": st.sampled_from([1, 5, 30])}),
    st.fixed_dictionaries({"rate_search": st.fixed_dictionaries({"start": st.sampled_from([10.0, 100.0]),
                                                                 "max": st.just(800.0),
                                                                 "step": st.sampled_from([1, 5])})}),
    st.just({}),                                    # no length at all: refused unless publisher.message_count
)
clients = st.one_of(
    st.fixed_dictionaries({"producers": st.integers(0, 6), "consumers": st.integers(0, 6)}),
    st.fixed_dictionaries({"producers": st.integers(0, 6), "consumers_per_queue": st.integers(1, 3)}),
)


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": "prop", "clusters": [{"name": "a", "uris": [URI], "nodes": 3}],
                           **draw(schedule), **draw(clients)}
    doc["queues"] = {**draw(st.sampled_from(QUEUE_NAMING)), **draw(some(QUEUE_KIND, 2))}
    doc["publisher"] = draw(some(PUBLISHER, 3))
    doc["consumer"] = {**draw(some(CONSUMER, 3)), **draw(st.sampled_from([{}, {"exit_when": "empty"},
                                                                          {"exit_when": "idle"}]))}
    doc["exchange"] = draw(some(EXCHANGE, 2))
    doc.update(draw(some({
        "driver": ["amqp091", "aiopika", "stream", "amqp10"], "size": [0, 1000], "routing_key": ["k", "a.b"],
        "warmup": [0.5, 2], "tasks": [1, 2, 3, 8], "colocate": [False], "variable_size": [[{"size": 100, "duration": 1}]],
        "faults": [[]],
    }, 4)))
    doc.update(draw(some({"connections": ["per_client", "per_task", 2], "idle_connections": [0, 5],
                          "connect_rate": ["50/s", 20], "producer_channels": [1, 2], "consumer_channels": [2]}, 2)))
    if draw(st.integers(0, 3)) == 0:
        doc["faults"] = draw(st.lists(some(FAULT, 4).map(lambda f: {"at": 1, "action": "kill", "node": "rabbit-2", **f}), max_size=2))
    return doc


def loaded(doc: dict[str, Any]) -> Workload | None:
    """The workload, or None when loading refuses it (with one line that names a field)."""
    try:
        return workload_from_dict(doc, source="w.yaml")
    except ConfigError as exc:
        line = str(exc)
        assert "\n" not in line and line.startswith("w.yaml: "), line
        return None


def plan_every_way(w: Workload) -> None:
    """Plan ``w`` as `rbench plan` and `rbench run` would: each task count a run may pick, a rate search's probe."""
    counts = {default_task_count(w, slots) for slots in SLOTS}
    variants = [w]
    if w.rate_search is not None:      # as coordinator.rate_search makes each probe
        variants.append(w.model_copy(update={"rate_search": None, "rate": w.rate_search.start,
                                             "duration": w.rate_search.step}))
    for v in variants:
        for n in counts:
            plan_run(v, "prop-run", "/tmp/rbench-prop", {c.name: n for c in v.clusters})


@settings(max_examples=CASES, **SETTINGS)
@given(workloads())
def test_a_workload_that_loads_is_never_refused_by_the_planner(doc: dict[str, Any]) -> None:
    w = loaded(doc)
    if w is not None:
        plan_every_way(w)


def test_the_generator_reaches_both_sides() -> None:
    """The property is not vacuous: generated workloads load, and are refused by each rule the planner used to make."""
    loads = 0
    refused: set[str] = set()

    @settings(max_examples=CASES, **SETTINGS)
    @given(workloads())
    def count(doc: dict[str, Any]) -> None:
        nonlocal loads
        try:
            workload_from_dict(doc, source="w.yaml")
            loads += 1
        except ConfigError as exc:
            refused.add(str(exc).removeprefix("w.yaml: ").split(":")[0])

    count()
    assert loads >= CASES // 3, loads
    moved = {"publisher.tx_size", "publisher.properties", "consumer.auto_ack", "consumer.pause", "consumer.exit_when",
             "tasks", "variable_size", "publisher.json_body"}
    assert moved <= refused, sorted(moved - refused)


def validate_line(tmp_path: Path, doc: dict[str, Any]) -> str:
    """The one line `rbench validate` prints for ``doc``, which it must refuse (exit 2)."""
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", str(path)])
    lines = err.getvalue().splitlines()
    assert code == 2 and len(lines) == 1 and not out.getvalue(), (code, out.getvalue(), err.getvalue())
    return lines[0]


BASE: dict[str, Any] = {"name": "t", "clusters": [{"name": "a", "uris": [URI]}], "duration": 5}


@pytest.mark.parametrize(("fields", "starts"), [
    ({"publisher": {"confirm": True, "tx_size": 10}}, "publisher.tx_size: the broker allows transactions or "
                                                      "publisher confirms"),
    ({"driver": "stream", "consumer": {"processing_delay": 0.001}}, "consumer.processing_delay: honoured by"),
    ({"driver": "aiopika", "publisher": {"properties": {"priority": 1}}}, "publisher.properties: honoured by the "
                                                                           "amqp091 driver only"),
    ({"driver": "amqp10", "consumer": {"exit_when": "empty"}}, "consumer.exit_when: empty: honoured by"),
    ({"consumer": {"auto_ack": True, "nack": True}}, "consumer.auto_ack: rate, nack and tx_size need"),
    ({"consumer": {"pause": {"at": 1, "for": 1}}, "queues": {"auto_delete": True}}, "consumer.pause: a paused consumer"),
    ({"consumer": {"pause": {"at": 1, "for": 1}, "auto_ack": True}}, "consumer.pause: auto_ack consumers"),
    ({"publisher": {"json_body": True, "body_files": [BODY_FILE]}}, "publisher.json_body: give json_body or body_files"),
    ({"publisher": {"json_body": True}, "variable_size": [{"size": 10, "duration": 1}]}, "variable_size: file and JSON"),
    ({"tasks": 3, "queues": {"pattern": "q-%d", "to": 2}}, "tasks: 3 tasks but only 2 queue(s)"),
    ({"producers": 2, "consumers": 0, "consumer": {"exit_when": "idle"}}, "consumer.exit_when: Spark task 0 (of 1)"),
    ({"producers": 2, "consumers": 1, "colocate": False, "consumer": {"exit_when": "idle"}},
     "consumer.exit_when: Spark task 1 (of 2) has producers but no consumers"),
    ({"publisher": {"body_files": ["/nonexistent/rbench-body"]}}, "publisher.body_files: cannot read"),
    ({"connections": 0}, "connections: "),
    ({"connections": "per_socket"}, "connections: "),
    ({"connections": "per_task", "producer_channels": 2}, "producer_channels: clients share a connection 2 at a time "
                                                          "only with connections: per_client"),
    ({"driver": "stream", "connections": 2}, "connections: the stream driver opens one connection per producer"),
    ({"driver": "aiopika", "idle_connections": 10}, "idle_connections: honoured by the amqp091 driver only"),
    ({"driver": "stream", "connect_rate": "10/s"}, "connect_rate: honoured by"),
    ({"connect_rate": "fast"}, "connect_rate: "),
    ({"idle_connections": -1}, "idle_connections: "),
])
def test_validate_refuses_what_the_planner_refused(tmp_path: Path, fields: dict[str, Any], starts: str) -> None:
    line = validate_line(tmp_path, {**BASE, **fields})
    assert line.startswith(f"rbench validate: {tmp_path / 'w.yaml'}: {starts}") or \
        line.startswith(f"rbench validate: {starts}"), line


def test_validate_accepts_what_the_planner_accepts(tmp_path: Path) -> None:
    """The rules are not stricter than the split: every queue with a producer has a consumer, so exit_when runs."""
    doc = {**BASE, "producers": 4, "consumers": 2, "queues": {"pattern": "q-%d", "to": 2},
           "consumer": {"exit_when": "idle"}, "publisher": {"confirm": True}}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["validate", str(path)]) == 0
    assert out.getvalue().startswith("ok: t:")
    plan_every_way(workload_from_dict(doc))


def test_a_driver_given_on_the_command_line_is_checked_at_load(tmp_path: Path) -> None:
    """`rbench amqp10 FILE` runs the file with the amqp10 driver: its refusals are made when the file is loaded."""
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({**BASE, "publisher": {"tx_size": 2}}))
    assert load_workload(path).publisher.tx_size == 2
    with pytest.raises(ConfigError, match=r"w.yaml: publisher.tx_size: honoured by the amqp091 driver only "
                                          r"\(this workload uses amqp10\)"):
        load_workload(path, driver="amqp10")
