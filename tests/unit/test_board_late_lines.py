"""A busy machine delivers a task's progress line after the status printer took its second: the count moves to
the next second instead of being dropped (issue 29: `-o` CSV rows summed to 411 of 600 published under load)."""
from __future__ import annotations

from rbench.live.control import ProgressBoard
from rbench.live.control.wire import Progress


def test_a_line_late_for_its_second_counts_in_the_next_second_taken() -> None:
    board = ProgressBoard()
    board.add(Progress("c", 0, step=0, second=100, published=200))
    assert board.take_second("c", 100).published == 200
    board.add(Progress("c", 0, step=0, second=100, published=7))       # late for second 100, already taken
    board.add(Progress("c", 0, step=0, second=99, published=3))        # later still
    board.add(Progress("c", 0, step=0, second=101, published=190))
    assert board.take_second("c", 101).published == 200
    assert board.take_second("c", 102).published == 0
    # the step totals never depended on the second
    assert board.step("c", 0).published == 400


def test_lines_on_time_stay_in_their_second() -> None:
    board = ProgressBoard()
    for second in (10, 11, 12):
        board.add(Progress("c", 0, step=0, second=second, published=second))
    assert [board.take_second("c", s).published for s in (10, 11, 12)] == [10, 11, 12]
