"""Deliveries that came again (re-reads, redeliveries): the message check's whole-run counts and the line that
reconciles them with the step figures (rbench.reduce.rereads). No Spark: check_messages on a hand-made table."""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from rbench.reduce.message_checks import DELIVERY, STEP_GROUP, WHOLE_GROUP, check_messages, sum_counts
from rbench.reduce.rereads import cluster_line, notes, split, whole_run


def _deliveries(rows: list[tuple[int, int, int, int, bool]]) -> dict[tuple[int, int], dict[str, int]]:
    """rows: (rc, seq, gm, gt, redelivered) of producer 0 on queue q."""
    n = len(rows)
    tbl = pa.table({"src": pa.array([DELIVERY] * n, pa.int8()), "rc": pa.array([r[0] for r in rows], pa.int32()),
                    "producer": pa.array([0] * n, pa.int32()), "queue": pa.array(["q"] * n),
                    "seq": pa.array([r[1] for r in rows], pa.int64()), "t": pa.array(range(n), pa.int64()),
                    "gt": pa.array([r[3] for r in rows], pa.int64()), "gm": pa.array([r[2] for r in rows], pa.int64()),
                    "red": pa.array([r[4] for r in rows])})
    return sum_counts(r for b in check_messages(frozenset(), iter(tbl.to_batches())) for r in b.to_pylist())


def test_every_copy_is_counted_once_over_the_run_whatever_its_window() -> None:
    # seq 0 and 1: warm-up (no measured step, gm -1), 0 delivered twice; seq 2..4 measured in step 0, 2 three times
    # (a stream re-read, then an AMQP redelivery flagged by the broker), 3 twice; another run's cluster (rc 1) once
    got = _deliveries([(0, 0, -1, 0, False), (0, 0, -1, 0, False), (0, 1, -1, 0, False),
                       (0, 2, 0, 0, False), (0, 2, 0, 0, False), (0, 2, 0, 0, True),
                       (0, 3, 0, 0, False), (0, 3, 0, 0, False), (0, 4, 0, 0, False), (1, 0, 5, 5, False)])
    whole = whole_run(got[(WHOLE_GROUP, 0)])
    assert whole == {"run_deliveries": 9, "run_consumed_unique": 5, "run_duplicated": 3, "run_redelivered": 1}
    assert whole_run(got[(WHOLE_GROUP, 1)])["run_deliveries"] == 1
    step = got[(STEP_GROUP, 0)]
    assert step["consumed_unique"] == 3 and step["duplicated"] == 2
    steps: list[dict[str, Any]] = [{"run_id": "r", "cluster": "c", **step, "deliveries": 6}]
    runs: list[dict[str, Any]] = [{"run_id": "r", "cluster": "c", **whole}]
    assert split(runs, steps) == (4, 3, 2, 1)        # 4 again: 3 of measured messages (in duplicated), 1 of the warm-up
    line = cluster_line("c", runs, steps)
    assert line is not None
    assert line.startswith("c, delivered again: 4 of the whole run's deliveries (a delivery of a message")
    assert "single-active member taking over" in line and "AMQP redelivery" in line
    assert "the broker flagged 1 deliveries redelivered" in line
    assert "Of them 3 of measured messages, counted in duplicated (2 measured message(s) delivered more than once" in line
    assert line.endswith("and 1 of messages due outside every measurement window (warm-up, start, tail), "
                         "counted in no step figure")
    assert notes(runs, steps) == [f"r: {line}"]


def test_nothing_is_said_when_every_delivery_was_a_first_one() -> None:
    got = _deliveries([(0, s, 0, 0, False) for s in range(3)])
    runs: list[dict[str, Any]] = [{"run_id": "r", "cluster": "c", **whole_run(got[(WHOLE_GROUP, 0)])}]
    steps: list[dict[str, Any]] = [{"run_id": "r", "cluster": "c", **got[(STEP_GROUP, 0)], "deliveries": 3}]
    assert split(runs, steps) == (0, 0, 0, 0)
    assert cluster_line("c", runs, steps) is None and notes(runs, steps) == []
    # a reduce written before the whole-run counts: nothing claimed either way
    assert cluster_line("c", [{"run_id": "r", "cluster": "c"}], steps) is None


def test_a_stream_takeover_reread_of_measured_messages_is_duplicated_and_says_so() -> None:
    """The seed's case: 5,000 measured, 39 re-read at shutdown by a standby that took over (no broker flag)."""
    rows = [(0, s, 0, 0, False) for s in range(5000)] + [(0, s, 0, 0, False) for s in range(4961, 5000)]
    got = _deliveries(rows)
    runs: list[dict[str, Any]] = [{"run_id": "r", "cluster": "c", **whole_run(got[(WHOLE_GROUP, 0)])}]
    steps: list[dict[str, Any]] = [{"run_id": "r", "cluster": "c", **got[(STEP_GROUP, 0)], "deliveries": 5039}]
    assert got[(STEP_GROUP, 0)]["consumed_unique"] == 5000 and got[(STEP_GROUP, 0)]["duplicated"] == 39
    line = cluster_line("c", runs, steps)
    assert line is not None and "delivered again: 39 of" in line and "none flagged redelivered" in line
    assert "Of them 39 of measured messages, counted in duplicated (39 measured" in line and "and 0 of messages" in line
