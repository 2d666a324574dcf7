"""Fault executors (command templates, the local script's mapping) and the coordinator's fault
controller, with harmless commands (true, false, sleep) and a fake executor: no broker."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from rbench.config.types import FaultControlPlan, FaultPlan
from rbench.coordinator.faults import FaultController
from rbench.errors import SinkError
from rbench.faults.executor import ActionResult, CommandExecutor, LocalExecutor, make_executor, run_command, script_path
from rbench.faults.terms import layout_of_ports, local_index, local_node, local_node_names
from rbench.samples.faults import FaultRecord
from rbench.samples.record import read_faults


def executor(commands: dict[str, str], timeout_s: float = 10.0) -> CommandExecutor:
    return CommandExecutor("prod", commands, {"mq1": {"host": "10.0.0.1"}, "odd": {"host": "a b; echo injected"}}, timeout_s)


# ---- command executor -------------------------------------------------------------------------
def test_a_succeeding_command_is_an_ok_action_with_its_times_and_output() -> None:
    r = executor({"kill": "echo killing {node} on {host} of {cluster}"}).run("kill", "mq1")
    assert r.ok and r.error is None
    assert r.output.strip() == "killing mq1 on 10.0.0.1 of prod"
    assert r.t_start_ns <= r.t_end_ns and r.command == "echo killing mq1 on 10.0.0.1 of prod"


def test_a_failing_command_is_a_failed_action_with_a_one_line_reason() -> None:
    r = executor({"stop": "echo first; echo 'no such host' >&2; false"}).run("stop", "mq1")
    assert not r.ok
    assert r.error == "stop mq1: exit 1: no such host"


def test_a_command_that_hangs_is_killed_at_the_timeout_with_its_children() -> None:
    started = time.monotonic()
    r = executor({"pause": "sleep 30 & sleep 30; echo never"}, timeout_s=0.5).run("pause", "mq1")
    assert time.monotonic() - started < 5                  # the backgrounded sleep does not hold the pipe open
    assert not r.ok and r.error == "pause mq1: timed out after 0.5 s"
    assert "never" not in r.output


def test_placeholder_values_are_shell_quoted() -> None:
    r = executor({"kill": "echo {host}"}).run("kill", "odd")
    assert r.ok and r.output.strip() == "a b; echo injected"


@pytest.mark.parametrize("name", ["a; rm -rf /", "$(touch {canary})", "`touch {canary}`", "x && touch {canary}",
                                  "it's", "a b\nc", "*", "-rf", '"q"', "\\", "{{x}}", ""])
def test_a_node_name_is_one_argument_to_the_template_whatever_it_holds(name: str, tmp_path: Path) -> None:
    """issue 29: the command sees each value as exactly one argument, and nothing in it runs."""
    canary = tmp_path / "ran"
    name = name.replace("{canary}", str(canary))
    cluster = f"c; touch {canary}"
    ex = CommandExecutor(cluster, {"kill": "printf '<%s>\\n' {node} {cluster} {host}"}, {name: {"host": name}}, 10)
    r = ex.run("kill", name)
    assert r.ok, r.error
    assert r.output == f"<{name}>\n<{cluster}>\n<{name}>\n"          # three placeholders: three arguments
    assert not canary.exists()


def test_a_placeholder_inside_quotes_is_a_failed_action_not_a_run_command(tmp_path: Path) -> None:
    canary = tmp_path / "ran"
    ex = CommandExecutor("c", {"kill": 'sh -c "echo {node}"'}, {f"$(touch {canary})": {}}, 10)
    r = ex.run("kill", f"$(touch {canary})")
    assert not r.ok and "{node} is inside quotes" in (r.error or "") and not canary.exists()


def test_output_and_errors_are_masked() -> None:
    r = executor({"kill": "echo amqp://admin:s3cret@mq1:5672/ >&2; exit 3"}).run("kill", "mq1")
    assert "s3cret" not in (r.error or "") and "s3cret" not in r.output
    assert r.error is not None and r.error.startswith("kill mq1: exit 3: ")


def test_a_missing_verb_is_a_failed_action_not_an_exception() -> None:
    r = executor({"kill": "true"}).run("resume", "mq1")
    assert not r.ok and r.error == "resume mq1: fault_control.command.resume is not given"


def test_run_command_reports_a_command_it_cannot_start() -> None:
    r = run_command("kill", "n", ["/nonexistent/binary"], 5)
    assert not r.ok and r.error is not None and r.error.startswith("kill n: cannot run")


def test_make_executor_builds_each_kind() -> None:
    local = make_executor(FaultControlPlan(kind="local", timeout_s=300), "local")
    assert isinstance(local, LocalExecutor) and local.timeout_s == 300
    cmd = make_executor(FaultControlPlan(kind="command", commands=(("kill", "echo {node} {host}"),),
                                         nodes=(("mq1", (("host", "h1"),)),), timeout_s=7), "prod")
    assert isinstance(cmd, CommandExecutor) and cmd.command("kill", "mq1") == "echo mq1 h1"


# ---- the local script --------------------------------------------------------------------------
def test_local_names_follow_the_script_layout() -> None:
    """The Python side repeats only the naming rule; cluster.sh info (no RabbitMQ needed) is its source."""
    info = subprocess.run(["bash", str(script_path()), "info", "3"], capture_output=True, text=True, check=True).stdout
    lines = info.splitlines()
    assert [line.split()[0] for line in lines] == [f"{n}@localhost" for n in local_node_names(3)]
    assert "amqp=5702" in lines[1] and "management=15702" in lines[1] and "prometheus=15792" in lines[1]
    assert "stream=5562" in lines[1] and "dist=25702" in lines[1]
    assert [local_index(n) for n in ("rabbit-2", "rabbit-2@localhost", "rabbit-0", "rabbit-2@other", "mq1")] == \
        [2, 2, None, None, None]


def _ports(info: str) -> set[int]:
    return {int(word.split("=")[1]) for line in info.splitlines() for word in line.split()
            if word.split("=")[0] in ("amqp", "management", "prometheus", "stream", "dist")}


def test_the_rabbitmq_4_layout_clashes_with_neither_the_3_layout_nor_broker4() -> None:
    """RBENCH_CLUSTER_VERSION=4: nodes rabbit4-i on ports of their own, so both clusters can run side by side."""
    env = {**os.environ, "RBENCH_CLUSTER_VERSION": "4"}
    env.pop("RBENCH_CLUSTER_DIR", None)
    four = subprocess.run(["bash", str(script_path()), "info", "9"], capture_output=True, text=True, check=True, env=env).stdout
    three = subprocess.run(["bash", str(script_path()), "info", "9"], capture_output=True, text=True, check=True,
                           env={k: v for k, v in env.items() if k != "RBENCH_CLUSTER_VERSION"}).stdout
    assert four.splitlines()[1].split()[0] == "rabbit4-2@localhost"
    assert "amqp=5722 management=15722 prometheus=15822 stream=5572 dist=25722" in four.splitlines()[1]
    assert "/tmp/rbench-cluster4/rabbit4-2" in four.splitlines()[1]
    # the Python side's naming and AMQP port rules follow each layout
    for layout, info in (("3", three), ("4", four)):
        for line in info.splitlines():
            node = local_node(line.split()[0])
            assert node is not None and node.layout == layout and node.erlang_name == line.split()[0]
            assert f"amqp={node.amqp_port} " in line
    assert local_node_names(3, "4") == ("rabbit4-1", "rabbit4-2", "rabbit4-3")
    assert [layout_of_ports(p) for p in ([5701, 5703], [5721, 5722, 5723], [5701, 5721], [5672], [])] == \
        ["3", "4", None, None, None]
    broker4 = {5680, 5580, 15680, 15780, 25680}             # scripts/broker4.sh's single node
    assert len(_ports(four)) == len(_ports(three)) == 45
    assert not _ports(four) & _ports(three) and not _ports(four) & broker4 and not _ports(three) & broker4
    bad = subprocess.run(["bash", str(script_path()), "info"], capture_output=True, text=True,
                         env={**env, "RBENCH_CLUSTER_VERSION": "5"})
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "RBENCH_CLUSTER_VERSION" in bad.stderr


def test_local_executor_maps_verbs_to_script_commands() -> None:
    ex = LocalExecutor(60)
    assert ex.argv("kill", "rabbit-2")[2:] == ["kill", "2"]
    assert [ex.argv(v, "rabbit-3@localhost")[2] for v in ("start", "stop", "pause", "resume")] == \
        ["start-node", "stop-node", "pause", "resume"]
    with pytest.raises(ValueError):
        ex.argv("kill", "mq1")
    # rabbit4-i: node i of the RabbitMQ 4.0 cluster, the same script run with its layout
    assert ex.argv("kill", "rabbit4-2@localhost")[2:] == ["kill", "2"]
    assert ex.env("rabbit4-2") == {"RBENCH_CLUSTER_VERSION": "4"} and ex.env("rabbit-2") == {"RBENCH_CLUSTER_VERSION": "3"}


def test_local_check_names_the_nodes_that_are_not_running(tmp_path: Path) -> None:
    fake = tmp_path / "cluster.sh"
    fake.write_text('echo "rabbit-1@localhost running pid 10"; echo "rabbit-2@localhost stopped"; '
                    'echo "rabbit-3@localhost paused pid 12"; exit 3\n')
    ex = LocalExecutor(60, script=fake)
    assert ex.check(["rabbit-1"]) is None
    assert ex.check(["rabbit-1", "rabbit-2@localhost"]) == ("rabbit-2@localhost not running on this machine (stopped); "
                                                            "start the local cluster with scripts/cluster.sh start")
    assert (ex.check(["rabbit-3"]) or "").startswith("rabbit-3@localhost not running on this machine (paused pid 12)")


def test_local_check_asks_each_layouts_cluster(tmp_path: Path) -> None:
    """rabbit4-i is looked up in the 4.0 cluster's status (the script run with RBENCH_CLUSTER_VERSION=4)."""
    fake = tmp_path / "cluster.sh"
    fake.write_text('if [ "$RBENCH_CLUSTER_VERSION" = 4 ]; then echo "rabbit4-1@localhost running pid 20"; '
                    'echo "rabbit4-2@localhost stopped"; else echo "rabbit-2@localhost running pid 11"; fi\n')
    ex = LocalExecutor(60, script=fake)
    assert ex.check(["rabbit4-1", "rabbit-2"]) is None
    assert ex.check(["rabbit-2", "rabbit4-2@localhost"]) == (
        "rabbit4-2@localhost not running on this machine (stopped); start the local cluster with "
        "RBENCH_CLUSTER_VERSION=4 scripts/cluster.sh start")
    killed = ex.run("kill", "rabbit4-2")          # the fake prints the 4.0 cluster's status for any verb
    assert killed.ok and "rabbit4-2@localhost stopped" in killed.output


def test_the_script_refuses_bad_arguments_in_one_line() -> None:
    for args in (["kill", "x"], ["status", "99"], ["frobnicate"]):
        r = subprocess.run(["bash", str(script_path()), *args], capture_output=True, text=True)
        assert r.returncode != 0
    r = subprocess.run(["bash", str(script_path()), "kill", "x"], capture_output=True, text=True)
    assert r.stderr.strip() == "cluster: expected a node number from 1 to 9 (rabbit-I), got 'x'"


def test_the_checkout_script_runs_the_packaged_one() -> None:
    wrapper = Path(__file__).resolve().parents[2] / "scripts" / "cluster.sh"
    out = subprocess.run(["bash", str(wrapper), "uris", "2"], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["amqp://127.0.0.1:5701", "amqp://127.0.0.1:5702"]


# ---- the controller ----------------------------------------------------------------------------
class FakeExecutor:
    """Records (verb, node, wall time) of every call; ``fail`` verbs fail; ``slow`` verbs take 0.2 s."""

    timeout_s = 5.0

    def __init__(self, fail: tuple[str, ...] = (), slow: tuple[str, ...] = ()) -> None:
        self.calls: list[tuple[str, str, int]] = []
        self.fail, self.slow = fail, slow
        self.lock = threading.Lock()
        self.busy = 0
        self.overlapped = False

    def run(self, verb: str, node: str) -> ActionResult:
        t0 = time.time_ns()
        with self.lock:
            self.busy += 1
            self.overlapped |= self.busy > 1
            self.calls.append((verb, node, t0))
        if verb in self.slow:
            time.sleep(0.2)
        with self.lock:
            self.busy -= 1
        ok = verb not in self.fail
        return ActionResult(verb, node, f"{verb} {node}", ok, None if ok else f"{verb} {node}: exit 1", t0, time.time_ns(), "")

    def check(self, nodes: list[str]) -> str | None:
        return None


def controller(faults: list[FaultPlan], ex: FakeExecutor, t0: list[int | None], log: Path | None = None) -> FaultController:
    return FaultController("local", tuple(faults), ex, lambda: t0[0], out=None, log_path=log).start()


def test_faults_run_at_their_time_after_t0_and_bring_the_node_back() -> None:
    ex = FakeExecutor()
    t0: list[int | None] = [None]
    c = controller([FaultPlan(0, "kill", "rabbit-2", 0.2, 0.3), FaultPlan(1, "restart", "rabbit-3", 0.1, None)], ex, t0)
    time.sleep(0.2)
    assert ex.calls == []                              # nothing before the load starts
    t0[0] = time.time_ns()
    time.sleep(0.8)
    records = [r.to_json() for r in c.stop()]        # as run.json keeps them
    assert [(v, n) for v, n, _ in ex.calls] == [("stop", "rabbit-3"), ("start", "rabbit-3"), ("kill", "rabbit-2"),
                                                  ("start", "rabbit-2")]
    kill = next(r for r in records if r["index"] == 0)
    assert set(kill) == {"cluster", "index", "action", "node", "at_s", "restart_after_s", "t_start_ns", "t_end_ns",
                         "t_back_start_ns", "t_back_end_ns", "ok", "error"}
    assert abs((kill["t_start_ns"] - t0[0]) / 1e9 - 0.2) < 0.05
    assert abs((kill["t_back_start_ns"] - t0[0]) / 1e9 - 0.5) < 0.05
    assert kill["ok"] and kill["error"] is None and kill["restart_after_s"] == 0.3
    restart = next(r for r in records if r["index"] == 1)
    assert restart["t_end_ns"] <= restart["t_back_start_ns"] <= restart["t_back_end_ns"]
    assert [r["index"] for r in records] == [1, 0]     # in the order they started


def test_a_node_still_down_when_the_run_ends_is_brought_back_then() -> None:
    ex = FakeExecutor()
    t0: list[int | None] = [time.time_ns()]
    c = controller([FaultPlan(0, "pause", "rabbit-2", 0.0, None), FaultPlan(1, "stop", "rabbit-3", 0.0, 60.0),
                    FaultPlan(2, "kill", "rabbit-1", 60.0, 5.0)], ex, t0)
    time.sleep(0.3)
    assert sorted((v, n) for v, n, _ in ex.calls) == [("pause", "rabbit-2"), ("stop", "rabbit-3")]
    stopped = time.time_ns()
    records = [r.to_json() for r in c.stop()]        # as run.json keeps them
    assert sorted((v, n) for v, n, _ in ex.calls[2:]) == [("resume", "rabbit-2"), ("start", "rabbit-3")]
    assert all(r["t_back_start_ns"] >= stopped for r in records)
    assert sorted(r["index"] for r in records) == [0, 1]           # the kill at 60 s never started: no record


def test_a_failed_fault_is_recorded_and_the_node_is_still_brought_back() -> None:
    ex = FakeExecutor(fail=("kill",))
    c = controller([FaultPlan(0, "kill", "rabbit-2", 0.0, 0.1)], ex, [time.time_ns()])
    time.sleep(0.3)
    (record,) = [r.to_json() for r in c.stop()]
    assert [v for v, _, _ in ex.calls] == ["kill", "start"]
    assert record["ok"] is False and record["error"] == "kill rabbit-2: exit 1"


def test_actions_on_one_node_do_not_overlap() -> None:
    ex = FakeExecutor(slow=("stop", "start"))
    c = controller([FaultPlan(0, "restart", "rabbit-2", 0.0, None), FaultPlan(1, "kill", "rabbit-2@localhost", 0.05, 0.01)],
                   ex, [time.time_ns()])
    time.sleep(1.2)
    c.stop()
    assert len(ex.calls) == 4 and not ex.overlapped


def test_the_fault_log_keeps_every_command(tmp_path: Path) -> None:
    ex = FakeExecutor()
    c = controller([FaultPlan(0, "kill", "rabbit-2", 0.0, 0.05)], ex, [time.time_ns()], tmp_path / "faults" / "local.log")
    time.sleep(0.3)
    c.stop()
    log = (tmp_path / "faults" / "local.log").read_text()
    assert "kill rabbit-2: kill rabbit-2" in log and "start rabbit-2" in log


# ---- run.json's records ------------------------------------------------------------------------
def test_read_faults_reads_run_json_back_typed(tmp_path: Path) -> None:
    ex = FakeExecutor()
    c = controller([FaultPlan(0, "kill", "rabbit-2", 0.0, 0.05)], ex, [time.time_ns()])
    time.sleep(0.3)
    records = [r.to_json() for r in c.stop()]        # as run.json keeps them
    (tmp_path / "run.json").write_text(json.dumps({"faults": records + [dict(records[0], cluster="other")]}))
    (r,) = read_faults(tmp_path, cluster="local")
    assert isinstance(r, FaultRecord) and r.action == "kill" and r.node == "rabbit-2" and r.ok
    assert r.down_ns[1] is not None and r.down_ns[1] > r.down_ns[0]
    assert len(read_faults(tmp_path / "run.json")) == 2
    assert read_faults({"run_id": "before faults existed"}) == []


def test_read_faults_names_a_bad_field(tmp_path: Path) -> None:
    good = {"cluster": "c", "index": 0, "action": "kill", "node": "n", "at_s": 1, "restart_after_s": None,
            "t_start_ns": 1, "t_end_ns": 2, "t_back_start_ns": None, "t_back_end_ns": None, "ok": False, "error": "x"}
    assert read_faults({"faults": [good]})[0].at_s == 1.0
    with pytest.raises(SinkError, match=r"faults\[0\]\.t_end_ns: expected int"):
        read_faults({"faults": [dict(good, t_end_ns="2")]})
    with pytest.raises(SinkError, match=r"faults\[0\]\.ok: missing"):
        read_faults({"faults": [{k: v for k, v in good.items() if k != "ok"}]})
    with pytest.raises(SinkError, match=r"faults\[0\]\.action: expected one of"):
        read_faults({"faults": [dict(good, action="explode")]})
    with pytest.raises(SinkError, match="cannot read"):
        read_faults(tmp_path / "missing")
