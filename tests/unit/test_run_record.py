"""The typed run record (rbench.samples.record): run.json round-trips through it, older files read,
newer ones are refused in one line, and nothing outside rbench/samples/ reads run.json by string key."""
from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from rbench.config.types import ClusterPlan, ClusterTarget, RunPlan, StepWindow
from rbench.errors import SinkError
from rbench.reduce.load import read_run
from rbench.samples import attempts, broker_facts, faults, reconnects, record, tasks
from rbench.samples.record import SCHEMA_VERSION, RunRecord, read_run_record
from rbench.samples.runinfo import STOPPED_BY_INTERRUPT, RunInfo
from rbench.samples.tasks import TaskResult
from tests.synthetic_run import SynthSpec, make_fault_run, make_run

ROOT = Path(__file__).resolve().parents[2]


def _contained(old: Any, new: Any, where: str = "run.json") -> None:
    """Every key and value of ``old`` is in ``new`` (which may hold more keys, written as null or empty)."""
    if isinstance(old, dict):
        assert isinstance(new, dict), where
        for k, v in old.items():
            assert k in new, f"{where}.{k} lost"
            _contained(v, new[k], f"{where}.{k}")
    elif isinstance(old, list):
        assert isinstance(new, list) and len(new) == len(old), where
        for i, (a, b) in enumerate(zip(old, new)):
            _contained(a, b, f"{where}[{i}]")
    else:
        assert old == new and type(old) is type(new), f"{where}: {old!r} became {new!r}"


def _task_result(task: int, attempt: int, t0: int) -> dict[str, Any]:
    """A result as rbench.runtime.task returns it (int step keys in self_check)."""
    return {"cluster": "c", "task": task, "attempt": attempt, "interrupted": False, "t0_ns": t0, "unconfirmed_at_end": 0,
            "load_end_ns": t0 + 7 * 10**9, "stopped_by": "interrupt", "consumed_before_t0": 2, "producers": 1,
            "instants": {"task started": 1.5, "connected": 1.75}, "self_check": {0: {"cpu": 0.5, "loop_lag_p99_ms": 1.0,
                                                                                     "window_full": 0.0}},
            "published_rows": 10, "consumed_rows": 9, "published": 10, "confirmed": 9, "nacked": 1, "returned": 0,
            "consumed": 9, "timeout": 0, "connection_lost": 0,
            "reconnects": [{"task": task, "t_lost_ns": t0 + 1, "t_back_ns": None, "uri": None, "in_flight": 1, "skipped": 2}],
            "skipped_disconnected": [2, 0]}


def _written_run(tmp_path: Path) -> Path:
    """A run.json as the coordinator writes it (RunInfo), with every part filled in."""
    target = ClusterTarget("c", ("amqp://guest:secret@127.0.0.1:5672/",))
    plan = RunPlan(run_id="r", workload_name="w", driver="amqp091", steps=(StepWindow(0, 10.0, 0.0, 5.0),
                   StepWindow(1, 20.0, 5.0, 5.0)), producers=2, consumers=2, warmup_s=1.0, message_count=None,
                   colocate=True, clusters=(ClusterPlan(target, ()),))
    workload = {"name": "w", "clusters": [{"name": "c", "uris": ["amqp://guest:secret@127.0.0.1:5672/"]}]}
    info = RunInfo(tmp_path / "r", plan, workload, "h", stage_attempts_allowed=4, routes={0: ["q-0"], 1: ["q-0", "q-1"]},
                   queues_created={"c": ["q-0"]}, coordinator=record.CoordinatorIdentity("host", 1, "coordinator.alive", 10))
    t0 = 1_790_000_000_000_000_000
    results = [TaskResult.from_json(_task_result(t, 10 + t, t0)) for t in range(2)]
    stage = attempts.StageAttempt(0, True, t0, attempts.COUNTED, None, (
        attempts.TaskAttemptRecord(0, 10, attempts.COUNTED, reported={"published": 10}),))
    fault = faults.FaultRecord("c", 0, "kill", "rabbit-2", 1.0, None, t0 + 1, t0 + 2, None, None, False, "x")
    pause = record.PauseRecord(1.0, 100, None, 0, 2.0, (record.PausePhase("steady", t0),
                                                       record.PausePhase("build-up", t0 + 1, 5, "broker")))
    info.end_stage("c", [stage], [fault], pause, record.BrokerMetricsRecord(1.0, ("amqp",), {"management": "refused"}, None,
                                                                           3, 0, ("broker/c/part-00000.parquet",), ("q-0",)))
    info.set_task_results("c", results, ["http://h:9/metrics"])
    info.set_windows("c", t0, t0 + 7 * 10**9, STOPPED_BY_INTERRUPT)
    info.set_status("c", "interrupted")
    info.finish("interrupted")
    return tmp_path / "r"


def test_a_run_json_the_coordinator_wrote_round_trips_exactly(tmp_path: Path) -> None:
    run_dir = _written_run(tmp_path)
    data = json.loads((run_dir / "run.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    rec = read_run_record(run_dir)
    assert rec.to_json() == data and RunRecord.from_json(rec.to_json()) == rec
    c = rec.clusters[0]
    assert [s.status for s in c.steps] == ["complete", "cut"] and c.steps[1].window == (c.t0_ns + 5 * 10**9,
                                                                                          c.t0_ns + 7 * 10**9)
    assert c.task_results[0].self_check == {0: {"cpu": 0.5, "loop_lag_p99_ms": 1.0, "window_full": 0.0}}
    assert c.counts().published == 20 and rec.messages_moved() == 38 and rec.counted_attempts() == {("c", 0): 10,
                                                                                                   ("c", 1): 11}
    assert [s.skipped_disconnected for s in c.steps] == [4, 0] and len(c.reconnects) == 2
    assert rec.routes == {0: ("q-0",), 1: ("q-0", "q-1")} and rec.faults[0].error == "x"
    assert c.broker_metrics is not None and c.broker_metrics.unreachable == {"management": "refused"}
    assert c.pause is not None and [p.phase for p in c.pause.phases] == ["steady", "build-up"]
    assert "secret" not in (run_dir / "run.json").read_text()


@pytest.mark.parametrize("make", [make_run, make_fault_run])
def test_a_synthetic_run_json_reads_and_writes_back_everything_it_had(tmp_path: Path, make: Any) -> None:
    """The synthetic runs are today's layout without schema_version (version 1, some keys absent)."""
    run_dir = make(tmp_path, SynthSpec(durations_s=[1.0], rates=[10.0])) if make is make_run else make(tmp_path)
    data = json.loads((run_dir.run_dir / "run.json").read_text())
    assert "schema_version" not in data
    rec = RunRecord.from_json(data)
    _contained(data, rec.to_json())
    again = rec.to_json()
    assert RunRecord.from_json(again).to_json() == again          # the full layout is a fixed point
    assert rec.schema_version == 1 and read_run(run_dir.run_dir).record == rec


def test_an_older_run_json_reads_with_what_it_lacks_empty() -> None:
    rec = RunRecord.from_json({"run_id": "old", "clusters": [{"name": "a", "steps": [{"step": 0, "duration_s": 5}]}]})
    c = rec.clusters[0]
    assert (rec.status, rec.warmup_s, rec.faults, rec.routes, c.t0_ns, c.task_results, c.steps[0].window) == \
        (None, 0.0, (), None, None, (), None)
    assert rec.counted_attempts() == {} and rec.messages_moved() == 0


def test_unknown_keys_survive_a_rewrite() -> None:
    data = {"clusters": [{"name": "a", "broker_version": "3.13.1", "later": [1]}], "added_later": {"x": 1}}
    rec = RunRecord.from_json(data)
    _contained(data, rec.to_json())
    assert rec.broker_version(rec.clusters[0]) == "3.13.1"


def test_a_newer_schema_version_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "clusters": []}))
    for read in (read_run_record, read_run):
        with pytest.raises(SinkError, match=f"^{re.escape(str(tmp_path / 'run.json'))}: schema_version "
                                            f"{SCHEMA_VERSION + 1} is not one this rbench reads") as err:
            read(tmp_path)
        assert "\n" not in str(err.value)
    with pytest.raises(SinkError, match="schema_version: expected int"):
        RunRecord.from_json({"schema_version": "2", "clusters": []})


@pytest.mark.parametrize("bad, where", [
    ({"clusters": [{"name": "a", "t0_ns": "12"}]}, r"clusters\[0\]\.t0_ns: expected int or null, got '12'"),
    ({"clusters": [{"name": "a", "steps": [{"step": 0, "duration_s": 1, "start_ns": 1.5}]}]},
     r"clusters\[0\]\.steps\[0\]\.start_ns"),
    ({"clusters": [{"name": "a", "task_results": [{"task": "0"}]}]}, r"clusters\[0\]\.task_results\[0\]\.task"),
    ({"clusters": [{"name": "a", "stage_attempts": [{"counted": 1}]}]}, r"clusters\[0\]\.stage_attempts\[0\]\.counted"),
    ({"clusters": [], "routes": {"p": ["q"]}}, r"routes\.p: expected a int key"),
    ({"clusters": [], "host": "h"}, r"host: expected an object"),
])
def test_a_malformed_field_is_one_line_naming_it(bad: dict[str, Any], where: str) -> None:
    with pytest.raises(SinkError, match=where) as err:
        RunRecord.from_json(bad)
    assert "\n" not in str(err.value)


# ---- nothing outside rbench/samples/ reads run.json by string key ---------------------------------

def _run_json_keys() -> set[str]:
    """Every key run.json has, from the record's own field lists."""
    keys = set(tasks.TASK_RESULT_KEYS)
    for cls in (record.RunRecord, record.ClusterRecord, record.StepRecord, record.HostFacts, broker_facts.BrokerFacts):
        keys |= set(cls.JSON_KEYS)
    for dc in (record.PauseRecord, record.PausePhase, record.BrokerMetricsRecord, record.CoordinatorIdentity, record.KilledNote,
               attempts.StageAttempt, attempts.TaskAttemptRecord, faults.FaultRecord, reconnects.Reconnect,
               broker_facts.FeatureFlag, broker_facts.DeprecatedFeature):
        keys |= {f.name for f in fields(dc)}
    return keys


# Keys run.json shares with other dicts that rbench reads by key and that are not run.json: the reduce's rows
# (steps.parquet, the timeline, faults.json, leaderboard.json and its meta), the workload's clusters and the
# cost table (rbench.reduce.costs prices both), Spark's status-store dicts (rbench.spark.stage_tasks), the
# scalability sweep's rows, the workload's queues section, the history's columns, and a broker's own
# descriptions of itself (AMQP server properties, the management API's overview: "platform", like run.json's
# host facts; rbench.coordinator.broker_identity), and "broker": run.json's clusters[].broker (BrokerFacts) is also
# the steps' broker column and the report's broker plot. A grep cannot tell those apart; mypy sees the record.
SHARED = {
    "action", "at_s", "attempt", "clock", "cluster", "clusters", "confirmed", "connection_lost", "consumed",
    "consumers", "driver", "end_ns", "ended_at", "error", "executor", "faults", "host", "index", "instance_type",
    "latency", "message_count", "nacked", "name", "node", "nodes", "ok", "phase", "phases", "published", "rbench",
    "reason", "returned", "run_id", "stage_attempt", "start_ns", "started_at", "status", "step", "t_end_ns",
    "t_start_ns", "target_rate", "task", "tasks", "uri", "volume_gb", "volume_iops", "volume_type", "warmup_s", "why",
    "workload_hash", "workload_name", "queues", "platform", "broker",
    # the broker's descriptions of itself again (server properties, /api/overview, /api/feature-flags), which
    # run.json's clusters[].broker records; "source" is also the broker sampler's and the price list's
    "cluster_name", "product", "version", "state", "feature_flags", "max_message_size", "source",
}
# the executor side and its control channel speak dicts by design (a task's result is parsed into TaskResult
# where the coordinator receives it); run.json is read only through rbench/samples/
NOT_SCANNED = ("samples", "runtime", "live")


def _access(key: str) -> re.Pattern[str]:
    q = r"""["']""" + re.escape(key) + r"""["']"""
    return re.compile(rf"\[\s*{q}\s*\]|\.(?:get|pop|setdefault)\(\s*{q}|{q}\s+(?:not\s+)?in\b")


def test_each_records_key_list_is_what_it_writes() -> None:
    """The keys from_json knows (the rest go to ``extra``) are the keys to_json writes."""
    step = record.StepRecord(0, None, None, 1.0)
    assert set(record.StepRecord.JSON_KEYS) == set(step.to_json())
    assert set(record.ClusterRecord.JSON_KEYS) == set(record.ClusterRecord("c").to_json())
    assert set(record.RunRecord.JSON_KEYS) == set(RunRecord().to_json())
    assert set(record.HostFacts.JSON_KEYS) == set(record.HostFacts().to_json())
    assert set(tasks.TASK_RESULT_KEYS) == set(TaskResult().to_json())


def test_the_shared_keys_are_run_json_keys_and_the_rest_are_many() -> None:
    keys = _run_json_keys()
    assert SHARED <= keys, sorted(SHARED - keys)
    assert {"t0_ns", "task_results", "stage_attempts", "self_check", "routes", "queues_created", "coordinator",
            "load_end_ns", "skipped_disconnected", "schema_version"} <= keys - SHARED


def test_the_grep_finds_run_json_style_access() -> None:
    for line in ('c["task_results"]', "run.get('t0_ns')", 'cluster.get("stage_attempts") or []',
                 'if "routes" in data:', 'data.setdefault("faults_x", 1)'):
        assert any(_access(k).search(line) for k in ("task_results", "t0_ns", "stage_attempts", "routes")) == \
            ("faults_x" not in line), line


def test_nothing_outside_samples_reads_run_json_by_string_key() -> None:
    keys = sorted(_run_json_keys() - SHARED)
    found = []
    for path in sorted((ROOT / "rbench").rglob("*.py")):
        if path.relative_to(ROOT / "rbench").parts[0] in NOT_SCANNED:
            continue
        text = path.read_text()
        for key in keys:
            for m in _access(key).finditer(text):
                found.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    assert not found, "run.json read by string key (use rbench.samples.record):\n" + "\n".join(found)
