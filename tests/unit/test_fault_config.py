"""Workload faults: validation (one line naming the field) and the plan's per-cluster faults."""
from __future__ import annotations

from typing import Any

import pytest

from rbench.config.load import workload_from_dict
from rbench.errors import ConfigError
from rbench.plan import fault_plan

LOCAL = {"name": "local", "uris": [f"amqp://127.0.0.1:{5700 + i}" for i in (1, 2, 3)], "nodes": 3}
LOCAL4 = {"name": "local4", "uris": [f"amqp://127.0.0.1:{5720 + i}" for i in (1, 2, 3)], "nodes": 3}
REMOTE = {"name": "prod", "uris": ["amqp://mq1.example.com", "amqp://mq2.example.com"], "nodes": 2,
          "fault_control": {"command": {"kill": "ssh {host} sudo pkill -9 -f beam.smp",
                                        "start": "ssh {host} sudo systemctl start rabbitmq-server"},
                            "nodes": {"mq1": {"host": "mq1.example.com"}, "mq2": {"host": "mq2.example.com"}},
                            "timeout": "30s"}}


def workload(faults: list[dict[str, Any]], clusters: list[dict[str, Any]] | None = None, **extra: Any) -> Any:
    data = {"name": "f", "clusters": clusters or [LOCAL], "rate": 10, "duration": "40s", "faults": faults, **extra}
    return workload_from_dict(data)


def refused(faults: list[dict[str, Any]], clusters: list[dict[str, Any]] | None = None, **extra: Any) -> str:
    with pytest.raises(ConfigError) as exc:
        workload(faults, clusters, **extra)
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_a_valid_fault_list_parses_with_durations() -> None:
    w = workload([{"at": "10s", "action": "kill", "node": "rabbit-2", "restart_after": "10s"},
                  {"at": 25, "action": "pause", "node": "rabbit-3@localhost", "restart_after": "500ms"},
                  {"at": "30s", "action": "restart", "node": "rabbit-1"}])
    assert [(f.at, f.action, f.restart_after) for f in w.faults] == [(10.0, "kill", 10.0), (25.0, "pause", 0.5),
                                                                     (30.0, "restart", None)]


def test_a_fault_after_the_end_of_the_run_is_refused_naming_the_field() -> None:
    assert refused([{"at": "90s", "action": "kill", "node": "rabbit-2", "restart_after": "20s"}]) == \
        "workload: faults[0].at: expected a duration inside the run (0–40 s), got 90s"
    assert "faults[0].at" in refused([{"at": "40s", "action": "kill", "node": "rabbit-2"}])


def test_a_node_the_executor_does_not_have_is_refused_with_the_nodes_it_has() -> None:
    message = refused([{"at": 5, "action": "kill", "node": "rabbit-4"}])
    assert message.startswith("workload: faults[0].node: expected a node of cluster local: rabbit-1, rabbit-2, rabbit-3")
    assert message.endswith("got rabbit-4")
    # the local cluster's nodes follow the cluster's node count (default 1)
    assert "faults[0].node" in refused([{"at": 5, "action": "kill", "node": "rabbit-2"}], [dict(LOCAL, nodes=1)])


def test_local_faults_are_refused_for_a_cluster_on_other_hosts() -> None:
    remote_local = {"name": "far", "uris": ["amqp://mq1.example.com"], "nodes": 3}
    message = refused([{"at": 5, "action": "kill", "node": "rabbit-2"}], [remote_local])
    assert "faults[0].node" in message and "URIs name other hosts" in message


def test_unknown_action_and_cluster_are_refused() -> None:
    assert "faults.0.action" in refused([{"at": 5, "action": "explode", "node": "rabbit-2"}])
    assert refused([{"at": 5, "action": "kill", "node": "rabbit-2", "cluster": "nope"}]) == \
        "workload: faults[0].cluster: no cluster named 'nope' (clusters: local)"


def test_restart_takes_no_restart_after() -> None:
    assert "faults[0].restart_after" in refused([{"at": 5, "action": "restart", "node": "rabbit-2", "restart_after": 3}])


def test_two_faults_on_one_node_may_not_overlap() -> None:
    message = refused([{"at": 10, "action": "kill", "node": "rabbit-2", "restart_after": 20},
                       {"at": 15, "action": "pause", "node": "rabbit-2@localhost", "restart_after": 1}])
    assert message.startswith("workload: faults[1].at: rabbit-2@localhost of cluster local is down from faults[0]")
    # without restart_after the node is down until the end of the run
    assert "until the end of the run" in refused([{"at": 10, "action": "stop", "node": "rabbit-2"},
                                                  {"at": 30, "action": "restart", "node": "rabbit-2"}])
    # one after the other, or on different nodes, is fine
    workload([{"at": 10, "action": "kill", "node": "rabbit-2", "restart_after": 5},
              {"at": 15, "action": "pause", "node": "rabbit-2", "restart_after": 1},
              {"at": 15, "action": "kill", "node": "rabbit-3"}])


def test_rate_search_runs_take_no_faults() -> None:
    message = refused([{"at": 5, "action": "kill", "node": "rabbit-2"}], rate=None, duration=None,
                      rate_search={"start": 10, "max": 100, "step": "20s"})
    assert message.startswith("workload: faults: not with rate_search")


def test_command_control_needs_the_verbs_its_faults_use() -> None:
    ok = workload([{"at": 5, "action": "kill", "node": "mq2", "restart_after": 5}], [REMOTE])
    assert ok.faults[0].node == "mq2"
    assert refused([{"at": 5, "action": "pause", "node": "mq2"}], [REMOTE]) == \
        "workload: faults[0].action: pause needs clusters[0].fault_control.command.pause (cluster prod), which is not given"


def test_command_templates_are_checked_against_the_nodes_placeholders() -> None:
    bad_name = dict(REMOTE, fault_control=dict(REMOTE["fault_control"], command={"kill": "ssh {hots} pkill beam"}))
    assert "nodes: mq1 gives no 'hots', which command.kill uses" in refused([], [bad_name])
    bad_brace = dict(REMOTE, fault_control=dict(REMOTE["fault_control"], command={"kill": "kubectl get -o {.items"}))
    assert "command.kill" in refused([], [bad_brace])
    literal = dict(REMOTE, fault_control=dict(REMOTE["fault_control"], command={"kill": "echo {{x}} {node} {cluster}"}))
    workload([], [literal])
    listed = dict(REMOTE, fault_control={"command": {"kill": "kubectl delete pod {node}"}, "nodes": ["rabbitmq-0"]})
    assert workload([], [listed]).clusters[0].fault_nodes() == ("rabbitmq-0",)


@pytest.mark.parametrize("template", ['ssh {host} "sudo pkill -f {node}"', "ssh {host} 'pkill {node}'",
                                      'echo "a \\" {node}"'])
def test_a_placeholder_inside_quotes_is_refused_at_validation(template: str) -> None:
    """Inside quotes the value's own shell quoting does not hold (a $(…) in a node name would run)."""
    quoted = dict(REMOTE, fault_control=dict(REMOTE["fault_control"], command={"kill": template}))
    assert "command.kill: {" in refused([], [quoted]) and "is inside quotes" in refused([], [quoted])
    bare = dict(REMOTE, fault_control=dict(REMOTE["fault_control"], command={"kill": "printf '<%s>' {node} \\' {host}"}))
    workload([], [bare])


def test_default_cluster_is_every_cluster_with_the_node_and_the_plan_says_so() -> None:
    other = dict(LOCAL, name="local-b")
    w = workload([{"at": 5, "action": "kill", "node": "rabbit-2", "restart_after": 10},
                  {"at": 6, "action": "kill", "node": "mq1", "restart_after": 10},
                  {"at": 7, "action": "pause", "node": "rabbit-3", "cluster": "local-b"}], [LOCAL, other, REMOTE])
    faults, control = fault_plan(w, "local")
    assert [(f.index, f.action, f.node, f.at_s, f.restart_after_s) for f in faults] == [(0, "kill", "rabbit-2", 5.0, 10.0)]
    assert control is not None and control.kind == "local"
    assert [f.index for f in fault_plan(w, "local-b")[0]] == [0, 2]
    faults, control = fault_plan(w, "prod")
    assert [f.index for f in faults] == [1]
    assert control is not None and control.kind == "command" and control.timeout_s == 30.0
    assert dict(control.nodes)["mq1"] == (("host", "mq1.example.com"),)
    assert fault_plan(workload([]), "local") == ((), None)


def test_rabbit4_nodes_are_the_rabbitmq_4_clusters_and_the_uris_ports_say_which() -> None:
    """rabbit4-i names node i of the local 4.0 cluster (cluster.sh with RBENCH_CLUSTER_VERSION=4); a fault on
    one layout's node in a cluster whose URIs name the other layout's ports would hit the wrong cluster."""
    w = workload([{"at": 5, "action": "kill", "node": "rabbit4-2", "restart_after": 5},
                  {"at": 12, "action": "pause", "node": "rabbit4-2@localhost", "restart_after": 1, "cluster": "local4"},
                  {"at": 7, "action": "stop", "node": "rabbit-3", "restart_after": 1}], [LOCAL, LOCAL4])
    assert w.clusters[1].fault_nodes() == ("rabbit4-1", "rabbit4-2", "rabbit4-3")
    assert [f.node for f in fault_plan(w, "local4")[0]] == ["rabbit4-2", "rabbit4-2@localhost"]
    assert [f.node for f in fault_plan(w, "local")[0]] == ["rabbit-3"]
    # the same node twice at once is one node, whichever way it is written
    assert "down from faults[0]" in refused([{"at": 5, "action": "kill", "node": "rabbit4-2", "restart_after": 5},
                                             {"at": 6, "action": "pause", "node": "rabbit4-2@localhost"}], [LOCAL4])
    message = refused([{"at": 5, "action": "kill", "node": "rabbit-2"}], [LOCAL4])
    assert message == ("workload: faults[0].node: expected a node of cluster local4: rabbit4-1, rabbit4-2, rabbit4-3 "
                       "(the local cluster's nodes up to nodes: 3, RabbitMQ 4.0's, as its URIs' ports say), got rabbit-2")
    assert "cluster local: rabbit-1, rabbit-2, rabbit-3" in refused([{"at": 5, "action": "kill", "node": "rabbit4-1"}])
    # URIs on no layout's ports (a single broker): either name is taken as it says
    single = {"name": "one", "uris": ["amqp://127.0.0.1:5672"], "nodes": 1}
    assert workload([{"at": 5, "action": "kill", "node": "rabbit4-1"}], [single]).clusters[0].fault_nodes() == \
        ("rabbit-1", "rabbit4-1")
