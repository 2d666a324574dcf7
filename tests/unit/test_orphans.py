"""rbench.coordinator.orphans without a broker: telling a dead coordinator's run from a live one, and marking it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rbench.coordinator import orphans


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _run(root: Path, name: str, *, status: str = "running", host: str = "elsewhere", pid: int = 1,
         alive_age_s: float | None = 0.0, workload: str = "w", coordinator: bool = True) -> Path:
    run_dir = root / name
    run_dir.mkdir(parents=True)
    data: dict[str, Any] = {"run_id": name, "status": status, "workload_name": workload, "ended_at": None,
                            "clusters": [{"name": "a", "status": "running"}, {"name": "b", "status": "pending"}]}
    if coordinator:
        data["coordinator"] = {"hostname": host, "pid": pid}
    (run_dir / "run.json").write_text(json.dumps(data))
    if alive_age_s is not None:
        alive = run_dir / orphans.ALIVE_FILE
        alive.touch()
        t = time.time() - alive_age_s
        os.utime(alive, (t, t))
    return run_dir


def test_a_run_is_orphaned_when_its_heartbeat_is_stale_or_its_local_pid_is_gone(tmp_path: Path) -> None:
    import socket

    here = socket.gethostname()
    _run(tmp_path, "stale", alive_age_s=orphans.STALE_S + 30)
    _run(tmp_path, "fresh", alive_age_s=5)
    _run(tmp_path, "local-dead", host=here, pid=_dead_pid(), alive_age_s=1)
    _run(tmp_path, "local-alive", host=here, pid=os.getpid(), alive_age_s=1)
    _run(tmp_path, "no-heartbeat-file", host=here, pid=_dead_pid(), alive_age_s=None)   # only folders with one are read
    _run(tmp_path, "older-run", coordinator=False, alive_age_s=orphans.STALE_S + 30)
    _run(tmp_path, "finished", status="complete", alive_age_s=orphans.STALE_S + 30)
    _run(tmp_path, "other-workload", workload="x", alive_age_s=orphans.STALE_S + 30)
    found = {o.run_id: o.why for o in orphans.find(tmp_path, "w")}
    assert set(found) == {"stale", "local-dead"}
    assert "last heartbeat was" in found["stale"] and "is gone" in found["local-dead"]
    assert {o.run_id for o in orphans.find(tmp_path)} == {"stale", "local-dead", "other-workload"}


def test_marking_gives_run_json_its_final_status_unless_the_run_finished_meanwhile(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "r1", alive_age_s=orphans.STALE_S + 30)
    (orphan,) = orphans.find(tmp_path)
    assert orphans.mark_killed(orphan)
    data = json.loads((run_dir / "run.json").read_text())
    assert data["status"] == "killed" and data["ended_at"] == data["killed"]["last_alive_at"] is not None
    assert [c["status"] for c in data["clusters"]] == ["killed", "not run"]
    assert "last heartbeat" in data["killed"]["why"] and not (run_dir / orphans.ALIVE_FILE).exists()
    assert orphans.find(tmp_path) == []

    run_dir = _run(tmp_path, "r2", alive_age_s=orphans.STALE_S + 30)
    (orphan,) = orphans.find(tmp_path)
    data = json.loads((run_dir / "run.json").read_text())
    data["status"] = "complete"                      # its coordinator wrote the final status after all
    (run_dir / "run.json").write_text(json.dumps(data))
    assert not orphans.mark_killed(orphan)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"


def test_the_heartbeat_keeps_its_file_fresh_and_removes_it_at_stop(tmp_path: Path) -> None:
    beat = orphans.Heartbeat(tmp_path / "run", every_s=0.05).start()
    path = tmp_path / "run" / orphans.ALIVE_FILE
    assert path.exists()
    old = time.time() - 100
    os.utime(path, (old, old))
    deadline = time.monotonic() + 5
    while path.stat().st_mtime < old + 50 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.stat().st_mtime > old + 50
    beat.stop()
    assert not path.exists()
    ident = orphans.Heartbeat.identity()
    assert ident.pid == os.getpid() and ident.hostname


def test_a_rate_search_probe_one_folder_deeper_is_found_too(tmp_path: Path) -> None:
    """`rate_search` runs its probes under OUT/<id>-search/: a probe killed outright is an orphan like a run."""
    _run(tmp_path / "20261127T000000Z-w-ab12-search", "probe-1", alive_age_s=orphans.STALE_S + 30)
    assert [o.run_id for o in orphans.find(tmp_path, "w")] == ["probe-1"]
