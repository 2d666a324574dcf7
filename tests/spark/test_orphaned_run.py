"""`rbench run` killed outright (SIGKILL of its process group, as the OOM killer or a lost pod would): its
run.json stays `running` and its queues stay on the broker, until the next run of the workload tidies up
(rbench.coordinator.orphans): the run is marked `killed` and the queues it created are deleted.

The run is a real `rbench run` in its own process group (its own Spark session on local[2]); the tidying is
the function the next `rbench run` calls before it starts, so the test need not start a third session.
"""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rbench.config.load import workload_from_dict
from rbench.coordinator import orphans
from tests.broker.test_cleanup import exists
from tests.runhelpers import delete_queues, workload_dict
from tests.standalone import spark_submit_env, wait_for

pytestmark = pytest.mark.timeout(240)


def _running_run_json(out: Path) -> dict[str, Any] | None:
    for path in out.glob("*/run.json"):
        data = json.loads(path.read_text())
        if any(c.get("status") == "running" for c in data.get("clusters", [])):
            return dict(data)
    return None


def test_a_run_killed_outright_is_marked_killed_and_its_queues_deleted_by_the_next(
        amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    data = workload_dict(amqp_url, unique_name, driver="amqp091", rate=200, duration=120,
                         queues={"auto_delete": False})           # queues that outlive their consumers
    queues = [f"{unique_name}-1", f"{unique_name}-2"]
    workload_file = tmp_path / "w.json"
    workload_file.write_text(json.dumps(data))
    out = tmp_path / "results"
    rbench = str(Path(sys.executable).parent / "rbench")
    proc = subprocess.Popen([rbench, "run", str(workload_file), "--out", str(out), "--master", "local[2]", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=spark_submit_env(),
                            start_new_session=True)
    try:
        info = wait_for("run.json with a running cluster", lambda: _running_run_json(out), proc, 120)
        wait_for("the run's queues on the broker", lambda: all(exists(amqp_url, q) for q in queues), proc, 60)
        assert info["queues_created"] == {"local": queues} and info["coordinator"]["pid"] == proc.pid
        time.sleep(2)                                               # the load is running
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        (run_dir,) = [p.parent for p in out.glob("*/run.json")]
        assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
        assert all(exists(amqp_url, q) for q in queues)             # left behind, as before this existed

        lines = io.StringIO()
        (tidied,) = orphans.tidy(workload_from_dict(data), out, lines)
        after = json.loads((run_dir / "run.json").read_text())
        assert after["status"] == "killed" and after["clusters"][0]["status"] == "killed"
        assert f"pid {proc.pid}" in after["killed"]["why"] and "is gone" in after["killed"]["why"]
        assert not any(exists(amqp_url, q) for q in queues)
        assert "deleted its 2 queue(s) on cluster local" in lines.getvalue()
        assert orphans.tidy(workload_from_dict(data), out, io.StringIO()) == []     # once only
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        delete_queues(amqp_url, queues)
