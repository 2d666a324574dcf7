"""`rbench stream-publish` without a broker: flags, medians, the box plot."""
from __future__ import annotations

from pathlib import Path

import pytest

from rbench.cli import build_parser, main
from rbench.scenarios.stream_publish import Report, RoundResult, Variant, box_plot, message


def test_messages_are_ten_bytes() -> None:
    assert message(0) == b"0000000000" and message(123456) == b"0000123456"
    assert {len(message(n)) for n in (0, 9, 10**9)} == {10}


def test_defaults_follow_rbfly_report() -> None:
    args = build_parser().parse_args(["stream-publish"])
    assert (args.single, args.batch, args.batch_size, args.rounds, args.message_format) == \
        (200_000, 1_000_000, 100, 3, "amqp")


@pytest.mark.parametrize("argv, fragment", [
    (["stream-publish", "--variants", "single,burst"], "--variants"),
    (["stream-publish", "--rounds", "0"], "--rounds"),
    (["stream-publish", "--uri", "http://x:secret@h/"], "--uri"),
])
def test_bad_flags_are_one_line_errors(argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and "secret" not in err and "Traceback" not in err


def test_variant_rejects_non_positive_counts() -> None:
    from rbench.errors import ConfigError

    with pytest.raises(ConfigError):
        Variant("batch", 0, 100)


def _report() -> Report:
    r = Report("amqp")
    for i, secs in enumerate((1.0, 2.0, 4.0)):
        r.rounds.append(RoundResult("single", i, 1000, secs, 0.05 * (i + 1)))
        r.rounds.append(RoundResult("batch", i, 100_000, secs, 0.2))
    return r


def test_report_medians_and_table() -> None:
    r = _report()
    assert r.variants() == ["single", "batch"]
    assert r.median_rate("single") == 500.0 and r.median_rate("batch") == 50_000.0
    assert r.median_cpu_us("single") == pytest.approx(100.0)
    assert r.median_cpu_us("batch") == pytest.approx(2.0)
    table = r.table()
    assert "single" in table and "50,000" in table
    d = r.as_dict()
    assert d["medians"]["batch"]["rate"] == 50_000.0 and len(d["rounds"]) == 6  # type: ignore[index]


def test_box_plot_is_a_png(tmp_path: Path) -> None:
    out = box_plot(_report(), tmp_path / "plots" / "box.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
