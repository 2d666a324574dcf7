"""The process tree under a command, read from /proc: what the soak and scale benchmarks measure.

A process started by another thread than its parent's main one (as the JVM starts Spark's Python daemon) is not
listed in /proc/PID/task/PID/children, so the tree is built from every process's own parent field instead."""
from __future__ import annotations

import os
from pathlib import Path


def children() -> dict[int, list[int]]:
    """Every process's children, from each /proc/PID/stat's parent field."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def tree(pid: int, kids: dict[int, list[int]] | None = None) -> list[int]:
    """``pid`` and every process below it (``kids``: a children() snapshot to reuse)."""
    kids = children() if kids is None else kids
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def cmdline(pid: int) -> str:
    """The process's command line, spaces between its arguments ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
