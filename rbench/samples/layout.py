"""Where a run's samples live, and which of them count.

``<out>/<run_id>/<kind>/<cluster>/task-TTTTT/attempt-A/part-NNNNN.parquet``: every task attempt
writes its own folder and marks it ``_COMMITTED`` when its rows are complete (also after an
interrupt). A retried task leaves several attempts; exactly one counts, so no row is ever
counted twice: the attempt run.json names for the task (the one whose results the Spark stage
returned, ``task_results``), or else the committed one with the highest attempt id.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

COMMITTED = "_COMMITTED"
ATTEMPT_INFO = "_ATTEMPT"          # JSON {host, pid, started_ns}: which process ran the attempt, written when it starts
_TASK = re.compile(r"^task-(\d+)$")
_ATTEMPT = re.compile(r"^attempt-(\d+)$")


def attempt_dir(out_dir: str | os.PathLike[str], run_id: str, kind: str, cluster: str, task: int, attempt: int) -> Path:
    return Path(out_dir) / run_id / kind / cluster / f"task-{task:05d}" / f"attempt-{attempt}"


def read_marker(path: Path) -> dict[str, Any]:
    """The ``_COMMITTED`` marker's JSON ({rows, parts, interrupted}); {} when absent or unreadable."""
    try:
        data = json.loads(path.read_text() or "{}")
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def committed_parts(run_dir: Path, run_id: str, kind: str, clusters: list[str],
                    counted: dict[tuple[str, int], int] | None = None) -> tuple[list[str], list[str]]:
    """Part files of the one attempt that counts for every (cluster, task), and a note on all else skipped.

    ``counted`` (run.json's: rbench.samples.record.RunRecord.counted_attempts) names that attempt; a task
    it does not name falls back to its committed attempt with the highest id."""
    notes: list[str] = []
    files: list[str] = []
    counted = counted or {}
    root = run_dir / kind
    if not root.is_dir():
        notes.append(f"{run_id}: no {kind}/ directory (no {kind} samples at all)")
        return files, notes
    for cdir in sorted(p for p in root.iterdir() if p.is_dir()):
        if cdir.name not in clusters:
            notes.append(f"{run_id}: {kind}/{cdir.name} is not a cluster in run.json; ignored")
            continue
        for tdir in sorted(p for p in cdir.iterdir() if p.is_dir() and _TASK.match(p.name)):
            attempts = sorted(((int(m.group(1)), p) for p in tdir.iterdir() if p.is_dir() and (m := _ATTEMPT.match(p.name))),
                              key=lambda x: x[0])
            committed = [(a, p) for a, p in attempts if (p / COMMITTED).is_file()]
            where = f"{run_id}: {kind}/{cdir.name}/{tdir.name}"
            named = counted.get((cdir.name, int(tdir.name.split("-")[1])))
            if named is not None:
                chosen = next(((a, p) for a, p in committed if a == named), None)
                others = [a for a, _ in attempts if a != named]
                if others:
                    notes.append(f"{where}: attempt(s) {others} ignored: run.json counts attempt {named}, the one "
                                 f"whose results the (restarted) Spark stage returned")
                if chosen is None:
                    notes.append(f"{where}: attempt {named}, the one run.json counts, is not committed; its rows are missing")
                    continue
            else:
                uncommitted = [a for a, p in attempts if not (p / COMMITTED).is_file()]
                if uncommitted:
                    notes.append(f"{where}: uncommitted attempt(s) {uncommitted} ignored")
                if not committed:
                    notes.append(f"{where}: no committed attempt; its rows are missing")
                    continue
                chosen = committed[-1]
                if len(committed) > 1:
                    notes.append(f"{where}: superseded attempt(s) {[a for a, _ in committed[:-1]]} ignored, "
                                 f"attempt {chosen[0]} used")
            attempt, adir = chosen
            marker = read_marker(adir / COMMITTED)
            if marker.get("interrupted"):
                notes.append(f"{where}: attempt {attempt} was interrupted (partial rows)")
            parts = sorted(adir.glob("part-*.parquet"))
            if isinstance(marker.get("parts"), int) and marker["parts"] != len(parts):
                notes.append(f"{where}: {COMMITTED} lists {marker['parts']} parts, {len(parts)} found")
            files.extend(str(p) for p in parts)
    return files, notes
