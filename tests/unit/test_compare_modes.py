"""`rbench compare --scalability` and `--amqp10` without a broker: their figures, rows and refusals.

Synthetic sweeps and send/receive results go through the same analysis the commands run: a sweep compared
with itself shows no difference at any level, a phase twice as slow on B is shown at every level, the
per-level intervals hold together over a phase's levels (Bonferroni), and an option of another kind of
comparison is one line.
"""
from __future__ import annotations

import contextlib
import io
import random
from pathlib import Path
from typing import Any

import pytest

from rbench.cli import main
from rbench.compare.amqp10 import METRICS as AMQP10_METRICS
from rbench.compare.amqp10 import Amqp10Rounds, analyse_amqp10, result_figures
from rbench.compare.result import markdown
from rbench.compare.rounds import Round, RoundRun, RoundsRun, order_of
from rbench.compare.sweep import PHASES, SweepRounds, analyse_sweeps, level_key, levels_of, sweep_figures
from rbench.compare.targets import Target, parse_targets
from rbench.errors import ConfigError
from rbench.scenarios.quiver import QuiverOptions, QuiverResult, Side
from rbench.scenarios.scalability.plan import SweepSpec

SPEC = SweepSpec(x=3, y=2, messages=10)            # levels (q, k): (1,1) (2,1) (4,1) (1,2) (2,2)
TARGETS = (Target("a", "amqp://guest:guest@127.0.0.1:5672/"), Target("b", "amqp://guest:guest@127.0.0.1:5672/"))


def test_targets_are_named_and_named_apart() -> None:
    a, b = parse_targets(["amqp://guest:guest@127.0.0.1:5672/", "v2=amqp://guest:guest@h:5680/?address=v2"], "--amqp10")
    assert (a.name, a.uri) == ("127.0.0.1:5672", "amqp://guest:guest@127.0.0.1:5672/")
    assert (b.name, b.uri) == ("v2", "amqp://guest:guest@h:5680/?address=v2")
    with pytest.raises(ConfigError, match="both named '127.0.0.1:5672'; name them apart as NAME=URL"):
        parse_targets(["amqp://127.0.0.1:5672/", "amqp://127.0.0.1:5672/"], "--uri")
    with pytest.raises(ConfigError, match="--uri: compare needs at least 2 brokers"):
        parse_targets(["amqp://127.0.0.1:5672/"], "--uri")
    with pytest.raises(ConfigError, match=r"--uri: expected \[NAME=\]amqp://"):
        parse_targets(["http://127.0.0.1:15672/", "amqp://h/"], "--uri")


def _sweep_rows(scale: dict[str, float], rng: random.Random) -> list[dict[str, Any]]:
    """One sweep's rows as the sweep writes them (one task): every phase of every level, µs per op with noise."""
    rows = []
    for lv in levels_of(SPEC):
        for phase in ("create", "route", "baseline", "delete"):
            us = 100.0 * lv.queues ** 0.2 * lv.bindings * scale.get(phase, 1.0) * rng.uniform(0.8, 1.25)
            rows.append({"repeat": 0, "i": lv.i, "j": lv.j, "queues": lv.queues, "bindings": lv.bindings,
                         "phase": phase, "us_per_op": us, "phase_us": us * 10, "phase_ops": 10,
                         "routed_counted": 10 * lv.queues if phase == "route" else None,
                         "routed_expected": 10 * lv.queues if phase == "route" else None})
    return rows


def _sweeps(rounds: int, b_scale: dict[str, float], seed: int = 1) -> tuple[tuple[Round, ...], SweepRounds]:
    rng = random.Random(seed)
    done, figures = [], {}
    for n in range(1, rounds + 1):
        order = order_of(n, ["a", "b"])
        for side in order:
            figures[(n, side)] = sweep_figures(_sweep_rows(b_scale if side == "b" else {}, rng), SPEC)
        done.append(Round(n, order, tuple(RoundRun(n, s, Path(f"/r/{n}-{s}"), "complete", None) for s in order)))
    return tuple(done), SweepRounds(RoundsRun(tuple(done)), figures, ())


def test_a_sweep_compared_with_itself_shows_no_difference_at_any_level(tmp_path: Path) -> None:
    rounds, swept = _sweeps(4, {})
    c = analyse_sweeps(tmp_path, TARGETS, SPEC, rounds, swept)
    (pair,) = c.pairs
    levels = levels_of(SPEC)
    assert [m.key for m in pair.metrics[:1 + len(levels)]] == ["create", *(level_key("create", lv.queues, lv.bindings)
                                                                           for lv in levels)]
    assert len(pair.metrics) == len(PHASES) * (1 + len(levels))
    for m in pair.metrics:
        assert m.estimate is not None and m.estimate.contains(1.0), (m.key, m.estimate)
        assert m.verdict.startswith("no difference shown"), m.verdict
    doc = c.to_json()
    assert doc["mode"] == "scalability" and doc["metrics"]["create@q4k1"]["queues"] == 4
    assert doc["metrics"]["create@q4k1"]["bindings"] == 1 and doc["metrics"]["create"]["confidence"] == 0.95
    assert doc["metrics"]["route@q2k2"]["confidence"] == pytest.approx(1 - 0.05 / len(levels))   # Bonferroni
    assert "| create@q2k1 | µs/queue |" in markdown(c) and "(99 %)" in markdown(c)


def test_a_phase_twice_as_slow_on_b_is_shown_overall_and_per_level(tmp_path: Path) -> None:
    rounds, swept = _sweeps(6, {"create": 2.0})
    (pair,) = analyse_sweeps(tmp_path, TARGETS, SPEC, rounds, swept).pairs
    by = {m.key: m for m in pair.metrics}
    assert 1.6 < by["create"].estimate.ratio < 2.5 and by["create"].estimate.lo > 1   # type: ignore[union-attr]
    assert by["create"].verdict.startswith("b higher (worse) than a")
    assert by["route"].verdict.startswith("no difference shown")
    assert sum(by[level_key("create", lv.queues, lv.bindings)].estimate.lo > 1      # type: ignore[union-attr]
               for lv in levels_of(SPEC)) >= 3


def test_a_level_a_sweep_did_not_reach_is_not_compared(tmp_path: Path) -> None:
    rounds, swept = _sweeps(3, {})
    rows = [r for r in _sweep_rows({}, random.Random(2)) if not (r["queues"] == 4 and r["phase"] == "delete")]
    swept.figures[(2, "b")] = sweep_figures(rows, SPEC)
    by = {m.key: m for m in analyse_sweeps(tmp_path, TARGETS, SPEC, rounds, swept).pairs[0].metrics}
    assert by["delete@q4k1"].verdict == "not compared: not measured in round(s) 2"
    assert by["delete"].verdict == "not compared: not measured in round(s) 2"      # all levels needs every level
    assert by["delete@q2k1"].estimate is not None


def _quiver(rate: float, latency_ms: float, cpu_s: float, count: int = 2000) -> QuiverResult:
    seconds = count / rate
    sender = Side("sender", count, 0, int(seconds * 1e9), cpu_s)
    receiver = Side("receiver", count, int(0.001e9), int((seconds + 0.001) * 1e9), cpu_s)
    return QuiverResult(QuiverOptions("amqp://guest:guest@127.0.0.1:5672/", count=count), "q", sender, receiver,
                        {"50%": latency_ms, "99%": latency_ms * 3, "99.9%": latency_ms * 4})


def test_amqp10_figures_are_the_results_blocks() -> None:
    f = result_figures(_quiver(1000.0, 2.0, 0.01))
    assert set(f) == {m.name for m in AMQP10_METRICS}
    assert f["sender_rate"].value == pytest.approx(1000.0) and f["sender_rate"].resolution == pytest.approx(1 / 2000)
    assert f["latency_p99_ms"].value == 6.0 and f["client_cpu_us_per_msg"].value == pytest.approx(10.0)


def test_amqp10_same_broker_twice_shows_no_difference_and_a_slower_one_is_shown(tmp_path: Path) -> None:
    rng = random.Random(3)
    figures = {}
    rounds = []
    for n in range(1, 5):
        order = order_of(n, ["a", "b"])
        for side in order:
            slow = 0.5 if side == "b" else 1.0
            figures[(n, side)] = result_figures(_quiver(1000 * slow * rng.uniform(0.97, 1.03), 2 * rng.uniform(0.8, 1.2),
                                                        0.01 * rng.uniform(0.9, 1.1)))
        rounds.append(Round(n, order, tuple(RoundRun(n, s, tmp_path / f"{n}{s}", "complete", None) for s in order)))
    c = analyse_amqp10(tmp_path, TARGETS, QuiverOptions("amqp://h/", count=2000), tuple(rounds),
                       Amqp10Rounds(RoundsRun(tuple(rounds)), figures))
    by = {m.key: m for m in c.pairs[0].metrics}
    assert by["sender_rate"].verdict.startswith("b slower than a by")
    assert by["latency_p50_ms"].estimate is not None and by["latency_p50_ms"].estimate.contains(1.0)
    assert c.to_json()["mode"] == "amqp10" and "getrusage" in c.method and c.workload.startswith("amqp10 (--count 2000")


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(argv))
    return code, err.getvalue()


URL = "amqp://guest:guest@127.0.0.1:5672/"


@pytest.mark.parametrize(("args", "expected"), [
    (["--amqp10", URL, URL], "--amqp10: two sides are both named '127.0.0.1:5672'"),
    (["--amqp10", URL], "--amqp10: compare needs at least 2 brokers (A, B …), got 1"),
    (["--amqp10", f"a={URL}", f"b={URL}", "--uri", URL], "--uri: only with --scalability"),
    (["--amqp10", f"a={URL}", f"b={URL}", "-x", "3"], "-x: only with --scalability"),
    (["--amqp10", f"a={URL}", f"b={URL}", "--tasks", "2"], "--tasks: not an option of compare --amqp10"),
    (["--amqp10", f"a={URL}", f"b={URL}", "--count", "0"], "--count/--duration: expected a message count"),
    (["--amqp10", f"a={URL}", f"b={URL}", "--rounds", "1"], "--rounds: expected at least 2"),
    (["--scalability", "--uri", URL], "--uri: compare needs at least 2 brokers"),
    (["--scalability", "--uri", f"a={URL}", "--uri", f"b={URL}", "--count", "5"], "--count: only with --amqp10"),
    (["--scalability", "--uri", f"a={URL}", "--uri", f"b={URL}", "--prometheus", "http://h:1"],
     "--prometheus: expected one per --uri (2), got 1"),
    (["--scalability", "--uri", f"a={URL}", "--uri", f"b={URL}", "-b", "1"], "-b/--base: expected an integer >= 2"),
    (["--scalability", "--uri", f"a={URL}", "--uri", f"b={URL}", "--no-reduce"],
     "--no-reduce: not an option of compare --scalability"),
    (["--scalability", "--amqp10", URL, URL], "argument --amqp10: not allowed with argument --scalability"),
    (["--rounds", "3"], "workload: expected a workload file with at least 2 clusters, or --scalability / --amqp10"),
    (["--confidence", "2", "--amqp10", f"a={URL}", f"b={URL}"], "argument --confidence: expected a fraction in (0.5, 1)"),
])
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    code, err = _cli("compare", *args, "--out", str(tmp_path / "out"))
    assert code == 2 and len(err.splitlines()) == 1 and expected in err, err
    assert not (tmp_path / "out").exists()             # refused before any folder, sweep or send


def test_rounds_stop_at_the_first_side_that_cannot_count_and_keep_the_rounds_before() -> None:
    from rbench.compare.rounds import SideRun, interleaved

    ran: list[tuple[int, str]] = []

    def run_one(number: int, name: str) -> SideRun:
        ran.append((number, name))
        run = RoundRun(number, name, Path(f"/r/{number}-{name}"), "complete", None)
        return SideRun(run, "interrupted", 130) if (number, name) == (3, "b") else SideRun(run)

    result = interleaved(["a", "b"], 4, run_one, io.StringIO(), what="broker")
    assert ran == [(1, "a"), (1, "b"), (2, "b"), (2, "a"), (3, "a"), (3, "b")]
    assert [r.order for r in result.rounds] == [("a", "b"), ("b", "a")] and result.exit_code == 130
    assert result.stopped is not None and result.stopped.startswith("round 3, broker b: interrupted (/r/3-b)")
    assert result.stopped.endswith("2 complete round(s) kept")
