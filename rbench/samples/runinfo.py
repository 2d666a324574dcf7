"""run.json: what was run, where, when, on what, and whether it finished.

Written when the run starts (status running) and rewritten at the end, so an
interrupted or crashed run still says what it was. The reduce job trusts it for
step windows and the warm-up; see docs/parquet.md.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import secrets
import socket
import sys
from pathlib import Path
from typing import Any

from rbench import __version__
from rbench.config.types import RunPlan
from rbench.config.uri import mask_uri
from rbench.errors import SinkError

# Why a cluster's load ended. Unless the schedule ran out, each step's window is cut where the load
# stopped, so a rate is always messages ÷ the time the load really ran (docs/parquet.md, run.json steps).
STOPPED_BY_SCHEDULE, STOPPED_BY_INTERRUPT, STOPPED_BY_COUNT = "schedule", "interrupt", "message count reached"
STEP_COMPLETE, STEP_CUT, STEP_NOT_RUN = "complete", "cut", "not run"


def new_run_id(workload_name: str, now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{workload_name}-{secrets.token_hex(2)}"


def _iso(t: dt.datetime | None = None) -> str:
    return (t or dt.datetime.now(dt.timezone.utc)).isoformat(timespec="seconds")


def host_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {"hostname": socket.gethostname(), "cpus": os.cpu_count(), "python": platform.python_version(),
                             "platform": platform.platform(), "rbench": __version__}
    for module in ("pyspark", "pyarrow", "aio_pika", "uvloop", "rstream"):
        mod = sys.modules.get(module)
        if mod is not None:
            facts[module] = getattr(mod, "__version__", "?")
    return facts


class RunInfo:
    """The run.json of one run directory."""

    def __init__(self, run_dir: Path, plan: RunPlan, workload: dict[str, Any], workload_hash: str) -> None:
        """``workload`` is the validated workload as JSON (its URIs are masked here); ``plan`` says the rest."""
        self.path = run_dir / "run.json"
        self.data: dict[str, Any] = {
            "run_id": plan.run_id,
            "status": "running",
            "workload_name": plan.workload_name,
            "workload": workload,
            "workload_hash": workload_hash,
            "driver": plan.driver,
            "started_at": _iso(),
            "ended_at": None,
            "warmup_s": plan.warmup_s,
            "message_count": plan.message_count,
            "clock": ("producers and consumers of a queue share a task (one clock)" if plan.colocate
                      else "producers and consumers may run in different tasks: end-to-end latency mixes clocks"),
            "latency": "end-to-end = t_received - t_intended (open-loop schedule, corrected for coordinated omission); "
                       "also t_received - t_sent; confirm = t_confirmed - t_sent; all time.time_ns()",
            "host": host_facts(),
            "clusters": [],
            "faults": [],         # one record per executed fault, any cluster (rbench.samples.faults)
        }
        clusters = {c["name"]: c for c in workload.get("clusters", [])}
        for cp in plan.clusters:
            t = cp.target
            spec = clusters.get(t.name, {})
            self.data["clusters"].append({
                "name": t.name, "nodes": t.nodes, "instance_type": t.instance_type, "volume_type": t.volume_type,
                "volume_gb": t.volume_gb, "volume_iops": spec.get("volume_iops"), "uris": [mask_uri(u) for u in t.uris],
                "status": "pending", "tasks": len(cp.tasks), "producers": plan.producers, "consumers": plan.consumers,
                "t0_ns": None,
                "steps": [{"step": s.index, "rate_per_producer": s.rate, "target_rate": plan.target_rate(s),
                           "offset_s": s.offset_s, "duration_s": s.duration_s, "start_ns": None, "end_ns": None}
                          for s in plan.steps],
                "task_results": [],
                "reconnects": [],
            })
        # the workload as written may contain credentials: mask them in the copy we keep
        for c in self.data["workload"].get("clusters", []):
            c["uris"] = [mask_uri(u) for u in c.get("uris", [])]
            c["stream_uris"] = [mask_uri(u) for u in c.get("stream_uris", [])]

    def cluster(self, name: str) -> dict[str, Any]:
        return next(c for c in self.data["clusters"] if c["name"] == name)

    def set_windows(self, name: str, t0_ns: int, load_end_ns: int | None = None,
                    stopped_by: str = STOPPED_BY_SCHEDULE) -> None:
        """Each step's real window: planned from t0, cut at ``load_end_ns`` unless the schedule ran out.

        A step that started before the load stopped ends there ("cut", with the reason); a step
        that would have started after it never ran ("not run": no window, no figures)."""
        c = self.cluster(name)
        c["t0_ns"] = t0_ns
        c["load_end_ns"] = load_end_ns
        c["stopped_by"] = stopped_by
        cut_at = None if stopped_by == STOPPED_BY_SCHEDULE or load_end_ns is None else load_end_ns
        for s in c["steps"]:
            start = t0_ns + int(s["offset_s"] * 1e9)
            planned_end = start + int(s["duration_s"] * 1e9)
            s["planned_start_ns"], s["planned_end_ns"] = start, planned_end
            if cut_at is not None and start >= cut_at:
                s["start_ns"] = s["end_ns"] = None
                s["status"], s["cut_by"] = STEP_NOT_RUN, stopped_by
            elif cut_at is not None and cut_at < planned_end:
                s["start_ns"], s["end_ns"] = start, cut_at
                s["status"], s["cut_by"] = STEP_CUT, stopped_by
            else:
                s["start_ns"], s["end_ns"] = start, planned_end
                s["status"], s["cut_by"] = STEP_COMPLETE, None

    def set_reconnects(self, name: str, task_results: list[dict[str, Any]]) -> None:
        """The cluster's lost connections its tasks rode through, from their results (docs/parquet.md):
        ``reconnects`` (every task's records, by loss time) and each step's ``skipped_disconnected`` (schedule
        slots not sent while a task was disconnected, summed over the tasks)."""
        c = self.cluster(name)
        c["reconnects"] = sorted((r for t in task_results for r in t.get("reconnects", [])),
                                 key=lambda r: (r["t_lost_ns"], r["task"]))
        for s in c["steps"]:
            s["skipped_disconnected"] = sum(int(skipped[s["step"]]) for t in task_results
                                            if len(skipped := t.get("skipped_disconnected", [])) > s["step"])

    def mark_unfinished(self, status: str) -> None:
        """Record a final status now, from a signal handler, in case the process ends before finish()."""
        end_clusters(self.data, status)
        self.data["status"] = status
        self.data["ended_at"] = _iso()
        try:
            self.write()
        except SinkError:
            pass

    def finish(self, status: str) -> None:
        for c in self.data["clusters"]:
            if c["status"] == "pending" and status != "complete":
                c["status"] = "not run"
        self.data["status"] = status
        self.data["ended_at"] = _iso()
        self.write()

    def write(self) -> None:
        write_run_json(self.path, self.data)


def end_clusters(data: dict[str, Any], status: str) -> None:
    """A run that ended without finishing: its running clusters get ``status``, its pending ones "not run"."""
    for c in data.get("clusters", []):
        if c.get("status") in ("running", "pending"):
            c["status"] = status if c["status"] == "running" else "not run"


def write_run_json(path: Path, data: dict[str, Any]) -> None:
    """Replace run.json in one step (a reader never sees half a file)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2, default=str))
        os.replace(tmp, path)
    except OSError as exc:
        raise SinkError(f"cannot write {path}: {exc.strerror}") from None


def restarted_stage_note(cluster: dict[str, Any]) -> str | None:
    """One line for a run.json cluster whose Spark stage ran more than once (the end-of-run summary, the reduce's notes)."""
    attempts = cluster.get("stage_attempts") or []
    if len(attempts) < 2:
        return None
    why = "; ".join(f"attempt {n + 1}: {a.get('reason') or a.get('outcome')}" for n, a in enumerate(attempts)
                    if not a.get("counted"))
    counted = next((a for a in attempts if a.get("counted")), None)
    which = ("none counted (the stage failed)" if counted is None else
             f"counted: attempt {attempts.index(counted) + 1} (task attempts "
             f"{', '.join(str(t['attempt']) for t in counted.get('tasks', []))}), with its own t0 and step windows")
    return f"cluster {cluster.get('name')}: the Spark stage ran {len(attempts)} times ({why}); {which}"
