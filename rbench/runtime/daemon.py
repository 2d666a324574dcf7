"""Spark's Python worker daemon, with the executor runtime imported before it forks.

Spark starts one daemon per executor and forks a worker from it for each task. With
pyspark's own daemon every forked worker imports uvloop, pyarrow, the compiled codecs
and the drivers when its first task starts (about a second here, before the first
message can be sent), and takes pyarrow's lazy Parquet set-up (the recorder's warm_up). Importing them once in the daemon makes every fork start warm.
Used through `spark.python.daemon.module` (rbench.spark sets it for local masters,
where the executors run this interpreter and therefore have rbench installed).

Started by Spark, it first offers its pipes to a daemon the command pre-started and warmed beside the
JVM (rbench.runtime.zygote), and does the work itself only when there is none. ``--zygote PATH`` is
that pre-started daemon (the same module, so every daemon of a run has one name in ``ps``).
"""
from __future__ import annotations

import contextlib
import sys


def warm() -> None:
    with contextlib.suppress(Exception):
        # a worker that cannot import rbench must fail inside its task, where the error is
        # reported with its cause (rbench.spark_errors.wrap_task_error), not here, where it would be lost
        import rbench.runtime.task
        from rbench.runtime.recorder import warm_up

        # pyarrow's one-time costs (its Parquet writer and zstd, loaded lazily: 0.3-1.5 s here) once, before
        # forking, rather than in every task's worker before its first message (TaskRun calls it again: then free)
        warm_up()
        # what every forked worker imports before its task runs: pyspark's worker (pyspark's daemon imports it
        # after the fork, lest an import start a thread first; it starts none, and pyarrow is in already) and
        # the module of the stage's function (cloudpickle names it)
        import pyspark.worker

        import rbench.spark  # noqa: F401
    import pyspark.daemon  # noqa: F401


def serve() -> None:
    """pyspark's daemon on this process's stdin and stdout: forks a worker per connection from Spark."""
    from pyspark.daemon import manager

    manager()


def main() -> None:
    from rbench.runtime import zygote

    if sys.argv[1:2] == ["--zygote"]:
        zygote.serve(sys.argv[2], warm, serve)
    elif not zygote.hand_over():
        warm()
        serve()


if __name__ == "__main__":
    main()
