"""The report gives the answer first: a verdict per cluster, ties shared, lower bounds marked; no Spark.

Reduce outputs are synthetic (tests/synthetic_report.py) and re-rendered by `rbench report`, as a
reduce's would be.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rbench.cli import main
from rbench.reduce import leaderboard as lb
from rbench.reduce import verdict
from rbench.reduce.ranking import rank
from rbench.report.timeline_plots import timeline_series
from tests.synthetic_report import broker_rows, search_doc, step_rows, timeline_rows, write_reduce

SHAPES = {"big": (3, "c5.4xlarge", "gp3"), "small": (3, "m5.large", "gp3")}


def _report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["report", str(tmp_path)]) == 0, capsys.readouterr().err
    return (tmp_path / "report.html").read_text()


def _verdicts(tmp_path: Path) -> dict[str, dict]:
    board = json.loads((tmp_path / "leaderboard.json").read_text())["leaderboard"]
    return {v["cluster"]: v for v in board["verdicts"]}


def test_two_cluster_report_opens_with_the_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steps = step_rows({"big": 3000.0, "small": 700.0}, [250, 500, 1000, 2000, 4000])
    write_reduce(tmp_path, steps, timeline_rows(steps), SHAPES)
    page = _report(tmp_path, capsys)
    order = [page.index(marker) for marker in ("id='verdict'", "Capacity curves", "All steps", "id='methodology'")]
    assert order == sorted(order), order
    # nothing but the title and one line of context comes before the verdict
    assert page.index("<h2") + len("<h2>") == page.index("Verdict: msg/s within the SLO")
    assert page.index("how each number is measured") > page.index("All steps")
    v = _verdicts(tmp_path)
    assert (v["big"]["highest_met"], v["big"]["first_failed"], v["big"]["status"]) == (2000.0, 4000.0, "bracketed")
    assert (v["small"]["highest_met"], v["small"]["first_failed"]) == (500.0, 1000.0)
    assert (v["big"]["rank"], v["small"]["rank"], v["big"]["tie"]) == (1, 2, False)
    # big: 3 × c5.4xlarge (0.68 $/h) + 3 × 100 GB gp3, per 1000 msg/s at 2000 msg/s; no "≤": it failed above
    monthly = 3 * (0.68 * 730 + 100 * 0.08)
    assert v["big"]["cost_per_1k_rate"] == pytest.approx(monthly / 2)
    verdict_table = page[page.index("id='verdict'"):page.index("</section>")]
    assert f"{monthly / 2:,.2f} USD" in verdict_table and "≤" not in verdict_table.split("<tbody>")[1].split("</tbody>")[0]
    assert verdict_table.index(">big<") < verdict_table.index(">small<")
    assert "Capacity between 2,000 msg/s and 4,000 msg/s (bracket 100%; a rate search between them narrows it)." in verdict_table and "Most msg/s within the SLO: big, 2,000 msg/s." in verdict_table
    md = (tmp_path / "leaderboard.md").read_text()
    assert md.index("## Verdict") < md.index("## Top throughput")
    for name in ("throughput.png", "latency_vs_throughput.png", "latency.png", "timeline.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_every_step_matched_says_capacity_not_reached(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    steps = step_rows({"big": 1e9}, [100, 200, 400])
    write_reduce(tmp_path, steps, timeline_rows(steps), {"big": SHAPES["big"]})
    page = _report(tmp_path, capsys)
    (v,) = _verdicts(tmp_path).values()
    assert v["status"] == verdict.NOT_REACHED and v["first_failed"] is None and v["cost_is_upper_bound"]
    assert v["verdict"].startswith("Capacity not reached: above 400 msg/s")
    row = page[page.index("<tbody>", page.index("id='verdict'")):page.index("</tbody>", page.index("id='verdict'"))]
    assert "capacity not reached" in row.lower() and "≥ 400 msg/s" in row
    assert f"≤ {3 * (0.68 * 730 + 100 * 0.08) / 0.4:,.2f} USD" in row          # the cost is an upper bound


def test_equal_figures_share_a_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # two clusters with the same capacity: same highest matched target, same consume rates
    steps = step_rows({"a": 700.0, "b": 700.0, "c": 300.0}, [250, 500, 1000])
    shapes = {"a": SHAPES["small"], "b": SHAPES["small"], "c": SHAPES["big"]}
    write_reduce(tmp_path, steps, timeline_rows(steps), shapes)
    board = json.loads((tmp_path / "leaderboard.json").read_text())["leaderboard"]
    ranks = {v["cluster"]: (v["rank"], v["tie"]) for v in board["verdicts"]}
    assert ranks == {"a": (1, True), "b": (1, True), "c": (3, False)}
    assert [(r["cluster"], r["rank"], r["tie"]) for r in board["highest_matched"]] == [("a", 1, True), ("b", 1, True),
                                                                                        ("c", 3, False)]
    assert [(r["rank"], r["tie"]) for r in board["top_throughput"]][:2] == [(1, True), (1, True)]
    assert [(r["cluster"], r["rank"], r["tie"]) for r in board["cost_at_top"]][:2] == [("a", 1, True), ("b", 1, True)]
    page = _report(tmp_path, capsys)
    assert page.count("<td class='num'>1 (tie)</td>") == 2 and "(a tie: the same figure)" in page
    md = (tmp_path / "leaderboard.md").read_text()
    assert "| 1 (tie) | a |" in md and "| 1 (tie) | b |" in md and "| 3 | c |" in md


def test_ranking_is_competition_ranking_on_the_printed_figure() -> None:
    rows = [{"cluster": c, "x": x} for c, x in [("a", 10.04), ("b", 10.0), ("c", 9.0), ("d", None)]]
    ranked = rank(rows, lambda r: None if r["x"] is None else round(r["x"], 1))
    assert [(r["rank"], r["tie"]) for r in ranked] == [(1, True), (1, True), (3, False), (None, False)]


def test_partial_seconds_are_not_drawn_as_zero(tmp_path: Path) -> None:
    steps = step_rows({"a": 1e9}, [100, 200], duration_s=2.5)      # 5 s schedule: second 4 is half covered
    tl = timeline_rows(steps)
    tl = [r for r in tl if r["second"] != 2]                      # a whole second without any row: a real zero
    (series,) = timeline_series(tl, steps).values()
    assert series.throughput_x == [0, 1, 2, 3, 4]
    assert 5 not in series.throughput_x and all(not math.isnan(x) for x in series.throughput_x)
    assert series.consumed[2] == 0 and min(series.consumed[i] for i in (0, 1, 3, 4)) >= 100
    # the drain's partial second is no throughput point, but its latency is drawn
    assert any(r["second"] == 5 for r in tl) and 5 in series.latency_x


def test_probes_of_a_search_share_one_axis_with_gaps(tmp_path: Path) -> None:
    probes = [(250.0, True), (500.0, True), (1000.0, False), (750.0, True), (875.0, False)]
    steps = [row for i, (t, _ok) in enumerate(probes)
             for row in step_rows({"local": 800.0}, [t], run_id=f"20261121T0000{i:02d}Z-synth", duration_s=3.0,
                                  t0=10**18 + i * 10 * 10**9)]
    (series,) = timeline_series(timeline_rows(steps), steps, search=True).values()
    xs = [x for x in series.throughput_x if not math.isnan(x)]
    assert sum(math.isnan(x) for x in series.throughput_x) == 4        # a gap between probes, never a zero
    assert xs == [float(10 * i + s) for i in range(5) for s in range(3)]


def test_search_report_draws_the_probes_and_takes_the_searchs_answer(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    probes = [(250.0, True), (500.0, True), (1000.0, False), (750.0, True), (875.0, False)]
    search = search_doc("local", probes)
    steps = [row for i, (t, _ok) in enumerate(probes)
             for row in step_rows({"local": 800.0}, [t], run_id=search["clusters"][0]["probes"][i]["run_id"],
                                  duration_s=3.0, t0=10**18 + i * 10 * 10**9)]
    tl = timeline_rows(steps)
    write_reduce(tmp_path, steps, tl, {"local": (1, "local", "local")}, search=search, broker=broker_rows(tl))
    page = _report(tmp_path, capsys)
    (v,) = _verdicts(tmp_path).values()
    assert (v["kind"], v["highest_met"], v["first_failed"], v["status"]) == ("search", 750.0, 875.0, "bracketed")
    assert (tmp_path / "probes.png").stat().st_size > 0
    assert page.index("id='verdict'") < page.index("Rate search: the probes") < page.index("Capacity curves")
    assert "rate search, 5 probes" in page and page.count("data:image/png;base64,") == 7     # + the broker's side
    assert (tmp_path / "broker.png").stat().st_size > 0


def test_generator_limit_is_not_capacity(tmp_path: Path) -> None:
    steps = step_rows({"a": 1e9}, [100, 200, 400], generator_bound_at={"a": 400})
    (v,) = lb.board(steps, [], _NoPrices(), 0.02, 1000.0)["verdicts"]
    assert v["status"] == verdict.GENERATOR and v["highest_met"] == 200 and v["cost_is_upper_bound"]
    assert "load generator" in v["verdict"] and [g["target_rate"] for g in v["generator_steps"]] == [400]


def test_a_leaderboard_json_without_ranks_or_verdicts_still_renders(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    steps = step_rows({"big": 3000.0, "small": 700.0}, [500, 1000])
    write_reduce(tmp_path, steps, timeline_rows(steps), SHAPES)
    doc = json.loads((tmp_path / "leaderboard.json").read_text())
    del doc["leaderboard"]["verdicts"]
    for name in lb.RANKED_ON:
        for r in doc["leaderboard"][name]:
            r.pop("rank", None)
            r.pop("tie", None)
    (tmp_path / "leaderboard.json").write_text(json.dumps(doc))
    page = _report(tmp_path, capsys)
    assert "id='verdict'" in page and "Most msg/s within the SLO: big, at least 1,000 msg/s (capacity not reached)." in page


class _NoPrices:
    path, source, currency, hours_per_month = "none", "none", "USD", 730.0


def test_verdict_lines_for_the_cli() -> None:
    steps = step_rows({"a": 1e9, "b": 700.0}, [250, 500, 1000])
    from rbench.reduce.costs import cluster_costs, load_prices
    from tests.synthetic_report import clusters_of

    prices = load_prices()
    costs, _ = cluster_costs(clusters_of({"a": SHAPES["small"], "b": SHAPES["small"]}), prices)
    printed = verdict.lines(lb.board(steps, costs, prices, 0.02, 1000.0))
    monthly = 3 * (0.096 * 730 + 100 * 0.08)
    assert printed == [
        f"verdict 1 a: Capacity not reached: above 1,000 msg/s (every step met the SLO); try higher rates. "
        f"Cost per 1000 msg/s per month: ≤ {monthly:,.2f} USD.",
        f"verdict 2 b: Capacity between 500 msg/s and 1,000 msg/s (bracket 100%; a rate search between them narrows "
        f"it). Cost per 1000 msg/s per month: {monthly / 0.5:,.2f} USD."]


def test_a_cluster_without_a_price_says_no_price(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """issue 30: the quickstart (instance type local, priced 0) printed "Cost per 1000 msg/s per month: ≤ 0.00 USD"."""
    shapes = {"quick": (1, "local", "local"), "small": SHAPES["small"]}
    steps = step_rows({"quick": 1e9, "small": 700.0}, [250, 500, 1000])
    from rbench.reduce.costs import cluster_costs, load_prices
    from tests.synthetic_report import clusters_of

    prices = load_prices()
    costs, _ = cluster_costs(clusters_of(shapes), prices)
    printed = verdict.lines(lb.board(steps, costs, prices, 0.02, 1000.0))
    assert printed[0].startswith("verdict 1 quick: ") and printed[0].endswith(" Cost per 1000 msg/s per month: no price.")
    assert "0.00" not in printed[0] and printed[1].endswith(" USD.")
    write_reduce(tmp_path, steps, timeline_rows(steps), shapes)
    page = _report(tmp_path, capsys)
    assert "0.00 USD" not in page and "no price" in page
    assert _verdicts(tmp_path)["quick"]["cost_per_1k_rate"] is None
    md = (tmp_path / "leaderboard.md").read_text()
    assert "0.00 USD" not in md and "no price" in md
