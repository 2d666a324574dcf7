"""The sweep's plan, fits, workload file and flags: no broker, no Spark."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rbench.cli import main
from rbench.errors import ConfigError
from rbench.scenarios.scalability.fit import loglog_slope, pooled_slope
from rbench.scenarios.scalability.output import summary
from rbench.scenarios.scalability.plan import SweepSpec, binding_keys, message_share, publish_keys, series_levels, share, validate
from rbench.scenarios.scalability.workload import load_sweep_file


def test_levels_follow_scalabilitytest_triangle() -> None:
    spec = SweepSpec(base=2, x=8, y=6)          # cap = 7: i < 8, j < 6, i + j <= 7
    series = series_levels(spec)
    assert [len(s) for s in series] == [8, 7, 6, 5, 4, 3]
    assert [lv.queues for lv in series[0]] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert {lv.bindings for lv in series[5]} == {32}
    assert all(lv.i + lv.j <= 7 for s in series for lv in s)
    # within a series each level adds the queues between the previous count and its own
    assert [lv.added for lv in series[0]] == [1, 1, 2, 4, 8, 16, 32, 64]


def test_queue_limit_is_refused_up_front_with_one_line() -> None:
    with pytest.raises(ConfigError, match=r"reaches 8,192 queues, above --queue-limit 5,000"):
        validate(SweepSpec(base=2, x=15, y=11, queue_limit=5_000))
    validate(SweepSpec(base=2, x=15, y=11))    # ScalabilityTest's own -b 2 -x 15 -y 11 fits the default limit


@pytest.mark.parametrize("field, value, flag", [("base", 1, "-b/--base"), ("x", 0, "-x"), ("messages", 0, "-n"),
                                                ("exchange_type", "headers", "--exchange-type"), ("tasks", 0, "--tasks")])
def test_bad_values_name_their_flag(field: str, value: object, flag: str) -> None:
    with pytest.raises(ConfigError, match=f"^{flag}: expected"):
        validate(SweepSpec(**{field: value}))  # type: ignore[arg-type]


@given(st.integers(0, 500), st.integers(0, 500), st.integers(1, 9))
def test_task_shares_are_disjoint_and_cover_the_range(a: int, b: int, tasks: int) -> None:
    start, stop = min(a, b), max(a, b)
    shares = [set(share(start, stop, t, tasks)) for t in range(tasks)]
    assert sum(len(s) for s in shares) == stop - start
    assert set().union(*shares) == set(range(start, stop))


def test_message_shares_add_up() -> None:
    assert [message_share(10, t, 3) for t in range(3)] == [4, 3, 3]


@pytest.mark.parametrize("kind", ["direct", "topic", "fanout"])
def test_every_publish_key_matches_its_binding(kind: str) -> None:
    import re

    for bkey, pkey in zip(binding_keys(kind, 4), publish_keys(kind, 4)):
        if kind == "topic":
            assert re.fullmatch(bkey.replace(".", r"\.").replace("*", r"[^.]+"), pkey)
        else:
            assert bkey == pkey


def test_loglog_slope_matches_scipy() -> None:
    from scipy import stats

    xs = [1, 2, 4, 8, 16, 32]
    ys = [3.0, 6.5, 11.0, 25.0, 47.0, 99.0]
    fit = loglog_slope("s", [float(x) for x in xs], ys)
    ref = stats.linregress([math.log(x) for x in xs], [math.log(y) for y in ys])
    half = stats.t.ppf(0.975, len(xs) - 2) * ref.stderr
    assert fit.slope == pytest.approx(ref.slope)
    assert (fit.low, fit.high) == pytest.approx((ref.slope - half, ref.slope + half), rel=1e-3)
    assert fit.worse_than_linear is False
    steep = loglog_slope("s", [1.0, 2.0, 4.0, 8.0], [1.0, 4.1, 15.9, 64.0])
    assert steep.worse_than_linear and "worse than linear" in steep.text()


def test_pooled_slope_shares_the_growth_across_series() -> None:
    # two series, same slope 1, different levels: the pooled fit finds 1 with a tight interval
    fit = pooled_slope("all", [([1, 2, 4, 8], [1.0, 2.02, 3.96, 8.1]), ([1, 2, 4], [10.0, 19.8, 40.5])])
    assert fit.slope == pytest.approx(1.0, abs=0.02) and fit.high - fit.low < 0.1


def _row(rep: int, i: int, phase: str, phase_us: float, queues: int, ops: int, us: float) -> dict[str, object]:
    return {"repeat": rep, "i": i, "j": 0, "phase": phase, "queues": queues, "bindings": 1, "phase_us": phase_us,
            "phase_ops": ops, "us_per_op": us, "routed_counted": None, "routed_expected": None}


def test_summary_takes_median_over_repeats_and_cumulative_from_nothing() -> None:
    rows = [_row(0, 0, "create", 100.0, 1, 1, 100.0), _row(0, 1, "create", 300.0, 2, 1, 300.0),
            _row(1, 0, "create", 120.0, 1, 1, 120.0), _row(1, 1, "create", 500.0, 2, 1, 500.0),
            _row(2, 0, "create", 110.0, 1, 1, 110.0), _row(2, 1, "create", 200.0, 2, 1, 200.0)]
    levels = summary(rows)
    assert [lv["create"] for lv in levels] == [110.0, 300.0]
    assert (levels[1]["create_min"], levels[1]["create_max"]) == (200.0, 500.0)
    assert levels[1]["create_cum"] == pytest.approx(200.0)        # median of 400/2, 620/2, 310/2


def test_workload_file_section(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: routing\nscenario: scalability\nuri: amqp://u:p@h:5672/\n"
                    "scalability: {base: 3, x: 4, y: 2, exchange_type: topic, repeat: 2}\n")
    assert load_sweep_file(path) == {"base": 3, "x": 4, "y": 2, "exchange_type": "topic", "repeat": 2,
                                     "uri": "amqp://u:p@h:5672/", "label": "routing"}
    path.write_text("scenario: scalability\nscalability: {queues: 3}\n")
    with pytest.raises(ConfigError, match=r"scalability\.queues: unknown setting"):
        load_sweep_file(path)
    path.write_text("scenario: scalability\nscalability: {x: many}\n")
    with pytest.raises(ConfigError, match=r"scalability\.x: expected an integer"):
        load_sweep_file(path)
    path.write_text("scenario: steady\n")
    with pytest.raises(ConfigError, match="scenario: expected 'scalability'"):
        load_sweep_file(path)


def test_cli_refuses_a_bad_sweep_in_one_line_before_spark(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scalability", "-b", "2", "-x", "20", "-y", "2", "-c", "20"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--queue-limit 100,000" in err
    assert main(["scalability", "--exchange-type", "headers"]) == 2
    assert "--exchange-type" in capsys.readouterr().err


def test_routed_counter_counts_only_channels_new_since_the_snapshot() -> None:
    from rbench.scenarios.scalability import counters

    def page(rows: list[tuple[str, str, str, int]]) -> str:
        head = "# TYPE rabbitmq_detailed_queue_messages_published_total counter\n"
        return head + "".join(f'rabbitmq_detailed_queue_messages_published_total{{channel="{c}",queue_vhost="/",'
                               f'queue="{q}",exchange_vhost="/",exchange="{x}"}} {v}\n' for c, q, x, v in rows)

    before = counters.parse_routed(page([("<0.1.0>", "q1", "X", 50), ("<0.2.0>", "q9", "other", 7)]), "X")
    after = counters.parse_routed(page([("<0.1.0>", "q1", "X", 50), ("<0.3.0>", "q1", "X", 40), ("<0.3.0>", "q2", "X", 40),
                                        ("<0.4.0>", "q1", "X", 40), ("<0.4.0>", "q9", "other", 9)]), "X")
    assert before == {("<0.1.0>", "q1"): 50}
    assert counters.routed_since(before, after) == 120
    assert counters.routed_since(None, after) is None
    assert counters.default_prometheus("amqp://u:p@broker.example:5672/") == "http://broker.example:15692"


def test_the_prometheus_guess_brackets_an_ipv6_host() -> None:
    from rbench.scenarios.scalability.counters import default_prometheus

    assert default_prometheus("amqp://guest:guest@[::1]:5672/") == "http://[::1]:15692"
    assert default_prometheus("amqp://u:p@[2001:db8::7]/") == "http://[2001:db8::7]:15692"
    assert default_prometheus("amqp://broker.example:5680/") == "http://broker.example:15692"
