"""Runs whose coordinator died without finishing (kill -9, the OOM killer, a lost node or pod): found and
tidied up by the next run of a workload into the same results folder.

Why this is needed: Ctrl-C and SIGTERM are handled (the tasks commit, run.json gets its status, the run's
queues are deleted), but a coordinator killed outright can do none of that. Its run.json would say
``running`` for ever, and the queues it created would stay on the broker. There the next run of the same
workload would find them, consume their old messages as stale deliveries, and take them for the user's own
queues (docs/cluster.md), never to be deleted.

How a dead coordinator is told from a live one: while a run runs, its coordinator touches
``RUN_DIR/coordinator.alive`` every ``HEARTBEAT_S``; it creates the file before run.json first says ``running``
and removes it once run.json has its final status. So only run folders holding that file are read (a results
folder of a thousand nightly runs costs a glob), and one whose run.json still says ``running`` is orphaned
when the file is older than ``STALE_S``, or at once when the coordinator ran on this host and its pid is gone.
Runs written before this existed have no such file and are left alone.

What is tidied: run.json gets status ``killed`` (with when and how it was found), and the queues the run
itself created (``queues_created``: the workload's queues that did not exist before it) are deleted, only on
clusters of the new workload with the same name and the same (masked) addresses. run.json keeps no
credentials, so the new workload's are used.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from rbench.config.model import Cluster, Workload
from rbench.config.uri import mask_uri
from rbench.errors import RbenchError, SinkError
from rbench.samples.record import ClusterRecord, CoordinatorIdentity, KilledNote, RunRecord, read_run_record, write_run_record
from rbench.samples.runinfo import end_clusters

ALIVE_FILE = "coordinator.alive"
HEARTBEAT_S = 10.0
STALE_S = 60.0          # six missed heartbeats: a coordinator this late is not coming back
KILLED = "killed"


class Heartbeat:
    """Touches RUN_DIR/coordinator.alive every HEARTBEAT_S from a daemon thread, from start() to stop()."""

    def __init__(self, run_dir: Path, every_s: float = HEARTBEAT_S) -> None:
        self.path = run_dir / ALIVE_FILE
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def identity() -> CoordinatorIdentity:
        """What run.json records of the coordinator, so a run on this host is found dead by its pid."""
        return CoordinatorIdentity(hostname=socket.gethostname(), pid=os.getpid(), alive_file=ALIVE_FILE,
                                   heartbeat_s=HEARTBEAT_S)

    def start(self) -> Heartbeat:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()                  # before run.json first says "running"
        self._thread = threading.Thread(target=self._beat, name="rbench-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            with contextlib.suppress(OSError):
                self.path.touch()

    def stop(self) -> None:
        """Call once run.json has its final status."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with contextlib.suppress(OSError):
            self.path.unlink()


@dataclass
class Orphan:
    run_dir: Path
    record: RunRecord
    why: str
    last_alive: float                 # the heartbeat file's mtime (epoch s)

    @property
    def run_id(self) -> str:
        return self.record.run_id or self.run_dir.name


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False                   # someone else's live process
    return False


def _read(run_json: Path) -> RunRecord | None:
    """The run's record; None when it cannot be read (not ours to judge: the reduce says why)."""
    try:
        return read_run_record(run_json)
    except SinkError:
        return None


def _why_dead(record: RunRecord, last: float, now: float) -> str | None:
    """Why the run's coordinator is dead, or None while it may be alive (``last``: its heartbeat's mtime)."""
    if record.coordinator is None:
        return None
    pid, host = record.coordinator.pid, record.coordinator.hostname
    if host == socket.gethostname() and pid is not None and _pid_gone(pid):
        return f"its coordinator (pid {pid} on {host}) is gone"
    if now - last > STALE_S:
        return f"its coordinator's last heartbeat was {now - last:.0f} s ago (on {host})"
    return None


def find(out_root: str | Path, workload_name: str | None = None, now: float | None = None) -> list[Orphan]:
    """Runs under ``out_root`` (of ``workload_name``, when given) left ``running`` by a coordinator that died."""
    now = time.time() if now is None else now
    found = []
    root = Path(out_root)
    # runs, and a rate search's probes (a folder of runs of their own)
    for alive in sorted([*root.glob(f"*/{ALIVE_FILE}"), *root.glob(f"*/*/{ALIVE_FILE}")]):
        try:
            last = alive.stat().st_mtime
        except OSError:
            continue                   # removed meanwhile: that run just finished
        record = _read(alive.parent / "run.json")
        if record is None or record.status != "running":
            continue
        if workload_name is not None and record.workload_name != workload_name:
            continue
        why = _why_dead(record, last, now)
        if why is not None:
            found.append(Orphan(alive.parent, record, why, last))
    return found


def _iso(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.timezone.utc).isoformat(timespec="seconds")


def mark_killed(orphan: Orphan, now: float | None = None) -> bool:
    """Give run.json its final status; False when the run finished meanwhile (read again just before)."""
    path = orphan.run_dir / "run.json"
    record = _read(path)
    if record is None or record.status != "running":
        return False
    now = time.time() if now is None else now
    record = replace(end_clusters(record, KILLED), status=KILLED, ended_at=_iso(orphan.last_alive),
                     killed=KilledNote(found_at=_iso(now), why=orphan.why, last_alive_at=_iso(orphan.last_alive)))
    write_run_record(path, record)
    with contextlib.suppress(OSError):
        (orphan.run_dir / ALIVE_FILE).unlink()
    orphan.record = record
    return True


def _same_cluster(recorded: ClusterRecord, workload: Workload) -> Cluster | None:
    for c in workload.clusters:
        if c.name == recorded.name and [mask_uri(u) for u in c.uris] == list(recorded.uris):
            return c
    return None


def recorded_super_stream_exchanges(workload: Mapping[str, Any]) -> list[str]:
    """A super stream's exchange, named after it, goes with its partitions (rbench.coordinator.cleanup); read from
    the orphan's recorded workload, whose queue section the model reads again."""
    from rbench.config.topology import Queues

    section = workload.get("queues") or {}
    if not section.get("super_stream"):
        return []
    try:
        return Queues.model_validate(section).names(str(workload.get("name") or ""))
    except ValueError:
        return []


def delete_leftovers(orphan: Orphan, workload: Workload) -> dict[str, list[str]]:
    """Delete the queues the orphaned run created, on the clusters ``workload`` shares with it; per cluster, what went."""
    from rbench.coordinator.cleanup import delete_queues

    exchanges = recorded_super_stream_exchanges(orphan.record.workload)
    deleted: dict[str, list[str]] = {}
    for recorded in orphan.record.clusters:
        names = list(orphan.record.queues_created.get(recorded.name, ()))
        cluster = _same_cluster(recorded, workload) if names else None
        if cluster is not None:
            delete_queues(cluster, names, exchanges)
            deleted[cluster.name] = names
    return deleted


def tidy(workload: Workload, out_root: str | Path, out: TextIO | None = None) -> list[Orphan]:
    """Before a run of ``workload`` into ``out_root``: mark its orphaned runs killed and delete their leftover queues.

    One line per orphan on ``out``; a broker that refuses the deletion is one more line, never an error:
    the new run must still start."""
    import sys

    out = out or sys.stderr
    tidied = []
    for orphan in find(out_root, workload.name):
        try:
            if not mark_killed(orphan):
                continue
        except SinkError as exc:
            print(f"rbench: run {orphan.run_id} was left running ({orphan.why}) and {exc}", file=out, flush=True)
            continue
        tidied.append(orphan)
        try:
            deleted = delete_leftovers(orphan, workload)
        except (RbenchError, OSError) as exc:
            deleted = {}
            print(f"rbench: could not delete what run {orphan.run_id} declared ({exc}); delete it by hand",
                  file=out, flush=True)
        what = "; ".join(f"deleted its {len(q)} queue(s) on cluster {c}" for c, q in deleted.items()) or \
            "no queues of its own to delete on this workload's clusters"
        print(f"rbench: run {orphan.run_id} was left running ({orphan.why}): marked {KILLED} in its run.json; {what}",
              file=out, flush=True)
    return tidied
