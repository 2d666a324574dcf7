"""`rbench compare`'s statistics and rules, on known samples: no broker, no Spark.

The paired ratio's interval contains 1 for identical inputs, excludes it for a clear 2× change,
says which way is better per metric, widens with few rounds and with the figures' resolution; bad
input to the command is one line.
"""
from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import pytest
import yaml

from rbench.cli import main
from rbench.compare.metrics import METRICS, client_cpu_us_per_msg, round_figures, verdict
from rbench.compare.rounds import check_comparable, order_of, single_cluster
from rbench.compare.stats import paired_ratio, t_critical, t_two_sided_mass
from rbench.config.model import Workload
from rbench.errors import ConfigError
from rbench.samples.record import ClusterRecord
from rbench.samples.tasks import TaskResult

METRIC = {m.name: m for m in METRICS}

# Student t, 97.5 % quantiles (two-sided 95 %), from any statistics table
T_TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 9: 2.262, 10: 2.228, 20: 2.086, 30: 2.042,
           60: 2.000, 120: 1.980}


@pytest.mark.parametrize("df", sorted(T_TABLE))
def test_t_quantile_matches_the_table(df: int) -> None:
    assert t_critical(df) == pytest.approx(T_TABLE[df], abs=6e-4)
    assert t_two_sided_mass(t_critical(df), df) == pytest.approx(0.95, abs=1e-9)


def test_t_mass_tends_to_the_normal() -> None:
    # df large: P(|T| <= 1.96) -> P(|Z| <= 1.96) = 0.9500
    assert t_two_sided_mass(1.959964, 4000) == pytest.approx(0.95, abs=2e-4)
    assert t_critical(1, 0.5) == pytest.approx(1.0)          # Cauchy: the quartile is 1


def test_identical_inputs_give_ratio_one_and_a_ci_that_contains_it() -> None:
    a = [1000.0, 980.0, 1020.0, 1005.0]
    e = paired_ratio(a, list(a))
    assert e.ratio == pytest.approx(1.0) and e.contains(1.0) and not e.shows_difference
    assert verdict(METRIC["consume_rate"], e, "a", "b").startswith("no difference shown at 95 %")


def test_noise_around_the_same_value_is_no_difference() -> None:
    a = [1000.0, 1040.0, 970.0, 1010.0]
    b = [1030.0, 990.0, 1000.0, 985.0]
    e = paired_ratio(a, b)
    assert e.contains(1.0), e


def test_a_clear_2x_difference_is_detected() -> None:
    a = [1000.0, 1040.0, 970.0, 1010.0]
    b = [2010.0, 2060.0, 1950.0, 2030.0]
    e = paired_ratio(a, b)
    assert e.lo > 1.9 and e.hi < 2.1 and e.shows_difference
    assert e.ratio == pytest.approx(math.exp(sum(math.log(y / x) for x, y in zip(a, b)) / 4))
    assert verdict(METRIC["consume_rate"], e, "3.10", "4.0").startswith("4.0 faster than 3.10 by 10")


@pytest.mark.parametrize(("name", "factor", "words"), [
    ("consume_rate", 2.0, "faster than"), ("consume_rate", 0.5, "slower than"),
    ("e2e_p99_ms", 0.5, "lower (better) than"), ("e2e_p99_ms", 2.0, "higher (worse) than"),
    ("broker_cpu_us_per_msg", 0.5, "lower (better) than"), ("client_cpu_us_per_msg", 2.0, "higher (worse) than"),
])
def test_the_verdict_follows_the_direction_of_better(name: str, factor: float, words: str) -> None:
    a = [10.0, 11.0, 9.5, 10.2]
    e = paired_ratio(a, [x * factor * (1 + 0.01 * i) for i, x in enumerate(a)])
    text = verdict(METRIC[name], e, "A", "B")
    assert text.startswith(f"B {words} A by "), text
    # the change is said as a magnitude: 2× is +100 %, ½× is 50 % lower
    assert (" by 10" in text) if factor == 2.0 else (" by 4" in text or " by 5" in text), text


def test_two_rounds_give_a_much_wider_interval_than_six() -> None:
    pairs = [(100.0, 104.0), (100.0, 98.0)] * 3
    two = paired_ratio([a for a, _ in pairs[:2]], [b for _, b in pairs[:2]])
    six = paired_ratio([a for a, _ in pairs], [b for _, b in pairs])
    assert two.t == pytest.approx(12.706, abs=1e-3) and six.t == pytest.approx(2.571, abs=1e-3)
    assert math.log(two.hi / two.lo) > 4 * math.log(six.hi / six.lo)


def test_one_message_per_window_is_within_the_resolution() -> None:
    # a fixed 500 msg/s over a 3 s window: 1,500 or 1,501 messages; B one message short every round
    a = [1501 / 3, 1501 / 3, 1501 / 3]
    b = [1500 / 3, 1500 / 3, 1500 / 3]
    plain = paired_ratio(a, b)
    assert plain.shows_difference                      # zero spread: without the resolution, a "difference"
    e = paired_ratio(a, b, resolution=[2 / 1500] * 3)
    assert e.contains(1.0) and e.resolution == pytest.approx(2 / 1500)


@pytest.mark.parametrize(("a", "b", "why"), [
    ([1.0], [1.0], "at least 2 rounds"), ([1.0, 2.0], [1.0], "2 for A but 1 for B"), ([1.0, 0.0], [1.0, 1.0], "positive"),
])
def test_paired_ratio_refuses_what_has_no_ratio(a: list[float], b: list[float], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        paired_ratio(a, b)


def test_missing_figures_are_said_not_compared() -> None:
    assert verdict(METRIC["broker_mem_peak_mb"], None, "A", "B", "not measured in round(s) 2") == \
        "not compared: not measured in round(s) 2"


def test_rounds_alternate_abba() -> None:
    assert [order_of(r, ["a", "b"]) for r in (1, 2, 3, 4)] == [("a", "b"), ("b", "a"), ("a", "b"), ("b", "a")]
    assert order_of(2, ["a", "b", "c"]) == ("c", "b", "a")


def test_client_cpu_per_message_sums_the_tasks_cores() -> None:
    tasks = (TaskResult(task=0, self_check={0: {"cpu": 0.10, "seconds": 4.0}}),
             TaskResult(task=1, self_check={0: {"cpu": 0.15, "seconds": 4.0}}))
    cluster = ClusterRecord(name="a", task_results=tasks)
    assert client_cpu_us_per_msg(cluster, 0, 500.0) == pytest.approx(0.25 / 500 * 1e6)     # 500 µs per message
    assert client_cpu_us_per_msg(cluster, 1, 500.0) is None                                # the step not reported
    assert client_cpu_us_per_msg(cluster, 0, 0.0) is None
    row = {"step": 0, "window_s": 3.0, "consume_rate": 500.0, "publish_rate": 500.0, "e2e_p99_ms": 2.5}
    figures = round_figures([row], cluster)
    assert figures[("consume_rate", 0)].value == 500.0 and figures[("consume_rate", 0)].resolution == pytest.approx(1 / 1500)
    assert figures[("e2e_p99_ms", 0)].resolution == 0.0 and figures[("confirm_rate", 0)].value is None
    assert figures[("client_cpu_us_per_msg", 0)].value == pytest.approx(500.0)


def _workload(clusters: int, **extra: object) -> Workload:
    return Workload.model_validate({"name": "w", "duration": 5, **extra, "clusters": [
        {"name": f"c{i}", "uris": ["amqp://guest:guest@127.0.0.1:5672/"]} for i in range(clusters)]})


def test_what_cannot_be_compared_is_one_config_error() -> None:
    with pytest.raises(ConfigError, match="at least 2 clusters"):
        check_comparable(_workload(1), 4)
    with pytest.raises(ConfigError, match="--rounds: expected at least 2"):
        check_comparable(_workload(2), 1)
    check_comparable(_workload(3), 2)


def test_one_side_of_a_round_is_the_workload_with_that_cluster() -> None:
    w = _workload(2)
    one = single_cluster(w, "c1")
    assert [c.name for c in one.clusters] == ["c1"] and one.rate == w.rate and one.queues == w.queues


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(argv))
    return code, err.getvalue()


@pytest.mark.parametrize(("clusters", "args", "expected"), [
    (1, ["--rounds", "4"], "clusters: compare needs a workload with at least 2 clusters"),
    (2, ["--rounds", "1"], "--rounds: expected at least 2"),
    (2, ["--rounds", "0"], "argument --rounds: expected a whole number >= 1, got 0"),
    (2, ["--no-reduce"], "--no-reduce: compare reads every round's reduce"),
])
def test_bad_input_is_one_line(tmp_path: Path, clusters: int, args: list[str], expected: str) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump({"name": "w", "duration": 5, "clusters": [
        {"name": f"c{i}", "uris": ["amqp://guest:guest@127.0.0.1:5672/"]} for i in range(clusters)]}))
    code, err = _cli("compare", str(f), *args, "--out", str(tmp_path / "out"))
    assert code == 2 and len(err.splitlines()) == 1 and expected in err, err
    assert not (tmp_path / "out").exists()             # refused before any folder or load
