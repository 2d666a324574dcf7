"""A barrier stage of scalability phase work: one PhaseWork per Spark task, all timed from one barrier.

Lives on the coordinator side because it imports pyspark; the work itself is
rbench.scenarios.scalability.phases, which does not. Errors cross Spark as rbench.spark does it.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rbench.errors import RbenchError
from rbench.scenarios.scalability.phases import PhaseWork


def _partition(works: Iterable[PhaseWork]) -> Iterator[dict[str, Any]]:
    from pyspark import BarrierTaskContext

    from rbench.scenarios.scalability.phases import run_phase
    from rbench.spark_errors import wrap_task_error

    ctx = BarrierTaskContext.get()
    for work in works:
        try:
            yield from run_phase(work, barrier=ctx.barrier)
        except RbenchError as exc:
            raise wrap_task_error(exc) from None


def submit_phase(session: Any, works: list[PhaseWork]) -> list[dict[str, Any]]:
    """Run each task's share at once (a barrier stage); every result dict of every task."""
    from rbench.spark_errors import one_line_errors

    rdd = session.sparkContext.parallelize(works, len(works))
    with one_line_errors():
        results: list[dict[str, Any]] = rdd.barrier().mapPartitions(_partition).collect()
    return results
