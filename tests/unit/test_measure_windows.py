"""The measurement window rules (rbench.samples.windows), step by step, without a broker."""
from __future__ import annotations

from rbench.samples.steps import StepRecord
from rbench.samples.windows import cut_text, measure

S = 1_000_000_000


def step(start: int = 100 * S, end: int = 120 * S) -> StepRecord:
    return StepRecord(0, 100.0, 100.0, 20.0, start_ns=start, end_ns=end)


def test_warm_up_only_without_producer_facts() -> None:
    m = measure(step(), 2.0, None, None, False)
    assert (m.measure_start_ns, m.measure_end_ns, m.measure_note) == (102 * S, 120 * S, None)


def test_start_delay_moves_the_start_to_the_last_producers_first_due_send() -> None:
    m = measure(step(), 0.0, 100 * S + 950_000_000, None, False)
    assert m.measure_start_ns == 100 * S + 950_000_000 and m.measure_end_ns == 120 * S
    assert m.measure_note is not None and m.measure_note.startswith("starts 0.95 s into the step")


def test_a_warm_up_longer_than_the_delay_wins() -> None:
    m = measure(step(), 2.0, 100 * S + 950_000_000, None, False)
    assert m.measure_start_ns == 102 * S and m.measure_note is None


def test_a_message_count_ends_the_window_at_the_first_producers_stop() -> None:
    m = measure(step(), 0.0, None, 119 * S, True)
    assert m.measure_end_ns == 119 * S and m.measure_note is not None and "ends 1.00 s before" in m.measure_note


def test_one_producer_stopping_at_the_loads_end_needs_no_sentence() -> None:
    m = measure(step(), 0.0, None, 120 * S - 65_000, True)
    assert m.measure_end_ns == 120 * S - 65_000 and m.measure_note is None


def test_a_schedule_stop_keeps_the_planned_end_and_a_step_not_run_has_no_window() -> None:
    assert measure(step(), 0.0, None, 110 * S, False).measure_end_ns == 120 * S
    never = measure(StepRecord(1, 1.0, 1.0, 5.0), 0.0, 3 * S, 4 * S, True)
    assert never.measure_start_ns is None and never.measure_end_ns is None


def test_the_window_never_ends_before_it_starts() -> None:
    m = measure(step(), 0.0, 110 * S, 105 * S, True)
    assert m.measure_start_ns == m.measure_end_ns == 110 * S


def test_a_count_run_says_its_real_length() -> None:
    assert cut_text(3.1536e7, 21.0, "message count reached") == "ran 21.0 s, until every producer had sent its message count"
    assert cut_text(30.0, 12.0, "interrupt").startswith("cut after 12.0 s of its planned 30 s (interrupt)")
