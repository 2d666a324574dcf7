"""The board keeps per-second entries only for a reader that takes them: a --quiet run writing no progress CSV
starts no status printer, and its board grew by an entry with two histograms a second (the coordinator's
+12.7 MiB an hour in docs/soak.md's 30-minute soak, found with tracemalloc)."""
from __future__ import annotations

from rbench.live.control import ProgressBoard
from rbench.live.control.wire import Progress


def _an_hour_of_lines(board: ProgressBoard) -> None:
    for second in range(1_000, 4_600):
        board.add(Progress("c", 0, step=second // 600, second=second, published=1_000, consumed=1_000,
                           hist={60 + second % 7: 600, 70: 400}, confirm_hist={50: 1_000}))


def test_without_a_reader_no_second_is_kept_and_the_steps_still_count() -> None:
    board = ProgressBoard()
    board.keep_seconds = False
    _an_hour_of_lines(board)
    assert len(board.seconds) == 0
    assert sum(board.step("c", s).published for s in range(1, 8)) == 3_600_000
    step = board.step("c", 2)                               # seconds 1,200-1,799
    assert sum(step.hist.values()) == 600 * 1_000 and step.hist[70] == 600 * 400 and step.confirm_hist == {50: 600_000}


def test_with_a_reader_the_seconds_it_took_are_gone() -> None:
    board = ProgressBoard()
    _an_hour_of_lines(board)
    assert len(board.seconds) == 3_600                      # kept for the reader until taken
    assert board.take_second("c", 4_599).published == 1_000
    assert len(board.seconds) == 0                          # taking a second forgets the older ones
