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
from rbench.config.load import workload_hash
from rbench.config.model import Workload
from rbench.errors import SinkError, mask_uri
from rbench.plan import step_windows


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

    def __init__(self, run_dir: Path, workload: Workload, run_id: str, driver: str) -> None:
        self.path = run_dir / "run.json"
        steps = step_windows(workload)
        self.data: dict[str, Any] = {
            "run_id": run_id,
            "status": "running",
            "workload_name": workload.name,
            "workload": workload.model_dump(mode="json", by_alias=True),
            "workload_hash": workload_hash(workload),
            "driver": driver,
            "started_at": _iso(),
            "ended_at": None,
            "warmup_s": workload.warmup,
            "message_count": workload.publisher.message_count,
            "clock": ("producers and consumers of a queue share a task (one clock)" if workload.colocate
                      else "producers and consumers may run in different tasks: end-to-end latency mixes clocks"),
            "latency": "end-to-end = t_received - t_intended (open-loop schedule, corrected for coordinated omission); "
                       "also t_received - t_sent; confirm = t_confirmed - t_sent; all time.time_ns()",
            "host": host_facts(),
            "clusters": [],
        }
        for c in workload.clusters:
            self.data["clusters"].append({
                "name": c.name, "nodes": c.nodes, "instance_type": c.instance_type, "volume_type": c.volume_type,
                "volume_gb": c.volume_gb, "volume_iops": c.volume_iops, "uris": [mask_uri(u) for u in c.uris], "status": "pending",
                "tasks": None, "producers": workload.producers, "consumers": workload.consumers, "t0_ns": None,
                "steps": [{"step": s.index, "rate_per_producer": s.rate,
                           "target_rate": None if s.rate is None else s.rate * workload.producers,
                           "duration_s": s.duration_s, "start_ns": None, "end_ns": None} for s in steps],
                "task_results": [],
            })
        # the workload as written may contain credentials: mask them in the copy we keep
        for c in self.data["workload"]["clusters"]:
            c["uris"] = [mask_uri(u) for u in c["uris"]]
            c["stream_uris"] = [mask_uri(u) for u in c.get("stream_uris", [])]

    def cluster(self, name: str) -> dict[str, Any]:
        return next(c for c in self.data["clusters"] if c["name"] == name)

    def set_t0(self, name: str, t0_ns: int) -> None:
        c = self.cluster(name)
        c["t0_ns"] = t0_ns
        for s in c["steps"]:
            s["start_ns"] = t0_ns + int(sum(x["duration_s"] for x in c["steps"][: s["step"]]) * 1e9)
            s["end_ns"] = s["start_ns"] + int(s["duration_s"] * 1e9)

    def finish(self, status: str) -> None:
        self.data["status"] = status
        self.data["ended_at"] = _iso()
        self.write()

    def write(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(self.data, indent=2, default=str))
            os.replace(tmp, self.path)
        except OSError as exc:
            raise SinkError(f"cannot write {self.path}: {exc.strerror}") from None
