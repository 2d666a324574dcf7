"""When this process started, by the kernel's clock: the instant `--timings` counts a command (or a task's worker) from.

A mark taken in Python comes after the interpreter started and rbench was imported (a second or more on a
busy machine); the user waited for those too. Linux keeps a process's start in /proc/self/stat, in clock
ticks (10 ms here) of the boot-time clock; the time since then on that clock, taken from now, is the start.
"""
from __future__ import annotations

import os
import time


def process_started() -> float | None:
    """This process's start, wall-clock seconds since the epoch; None where /proc does not tell."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])       # field 22, starttime; fields after the command name
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):
        return None
