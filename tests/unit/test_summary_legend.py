"""The summary's legend is wrapped to the table's width, without splitting a difference "a − b"."""
from __future__ import annotations

from rbench.coordinator.summary import wrap_legend


def test_the_legend_wraps_to_the_width_and_keeps_each_difference_whole() -> None:
    text = ("latency in ms: end-to-end = received − intended (coordinated-omission corrected), e2e/sent = received − "
            "sent, confirm = confirmed − sent, late = sent − intended (run.json steps[].measure_start_ns/measure_end_ns)")
    for width in range(30, 120, 7):
        lines = wrap_legend(text, width).splitlines()
        assert len(lines) > 1
        assert all(len(line) <= width or " " not in line for line in lines)
        assert not any(line.startswith("−") or line.endswith("−") for line in lines)
        assert " ".join(lines) == text                  # nothing lost or changed but the line breaks
