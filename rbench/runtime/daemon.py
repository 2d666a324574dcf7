"""Spark's Python worker daemon, with the executor runtime imported before it forks.

Spark starts one daemon per executor and forks a worker from it for each task. With
pyspark's own daemon every forked worker imports uvloop, pyarrow, the compiled codecs
and the drivers when its first task starts (about a second here, before the first
message can be sent). Importing them once in the daemon makes every fork start warm.
Used through `spark.python.daemon.module` (rbench.spark sets it for local masters,
where the executors run this interpreter and therefore have rbench installed).
"""
from __future__ import annotations

import contextlib

with contextlib.suppress(Exception):
    # a worker that cannot import rbench must fail inside its task, where the error is
    # reported with its cause (rbench.spark.wrap_task_error), not here, where it would be lost
    import rbench.runtime.task  # noqa: F401

from pyspark.daemon import manager

if __name__ == "__main__":
    manager()
