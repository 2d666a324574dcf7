"""The stamp layout has one source (rbench/runtime/stamp.py): the C side compiled from ext/include/stamp.pxd
must agree with it byte for byte."""
from __future__ import annotations

from rbench.runtime._recorder import STAMP_LAYOUT, RecorderCore, Stamper
from rbench.runtime.stamp import LAYOUT, STAMP_SIZE, new_payload, read_stamp, write_stamp


def test_the_compiled_layout_is_the_python_one() -> None:
    assert STAMP_LAYOUT == LAYOUT == {"size": 24, "producer": 0, "seq": 4, "t_intended": 8, "t_sent": 16}


def test_a_stamp_written_in_c_reads_back_in_python_and_the_reverse() -> None:
    core = RecorderCore()
    body = new_payload(40)
    stamper = Stamper(core, body, 0xDEADBEEF, 0, False)
    t_sent = stamper.stamp(0xFFFFFFFE, -5, 2**62)
    assert read_stamp(body) == (0xDEADBEEF, 0xFFFFFFFE, -5, t_sent)
    write_stamp(body, 7, 9, 11, 13)
    assert core.consumed(1, 0, bytes(body), False, 99) == (7, 9)
    assert core.consumed(1, 0, bytes(body[:STAMP_SIZE - 1]), False, 99) is None     # shorter than the stamp
