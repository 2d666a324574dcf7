"""conf/costs.yaml and the monthly-cost arithmetic (no Spark)."""
from __future__ import annotations

from pathlib import Path

import pytest

from rbench.errors import ConfigError
from rbench.reduce.costs import cluster_costs, cost_per_krate, load_prices, monthly_cost

ROOT = Path(__file__).resolve().parents[2]


def _cluster(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {"name": "qq", "nodes": 3, "instance_type": "m5.large", "volume_type": "gp3", "volume_gb": 100}
    base.update(kw)
    return base


def test_shipped_price_table_loads_and_names_its_sources() -> None:
    prices = load_prices()
    text = Path(prices.path).read_text()
    assert "us-east-1" in text and prices.hours_per_month == 730
    for name, entry in {**prices.instances, **prices.volumes}.items():
        assert entry.get("source"), name
    assert prices.instances["local"]["hourly"] == 0 and prices.volumes["local"]["gb_month"] == 0
    # every cluster of the shipped sizing workload has a price
    for itype in ("m5.large", "m5.xlarge"):
        assert itype in prices.instances


def test_monthly_cost_formula() -> None:
    prices = load_prices()
    c = monthly_cost(_cluster(), prices)
    assert c["monthly_cost"] == pytest.approx(3 * (0.096 * 730 + 100 * 0.08))      # 3000 gp3 IOPS are included
    extra = monthly_cost(_cluster(volume_iops=6000, nodes=5, instance_type="m5.xlarge"), prices)
    assert extra["billed_iops"] == 3000
    assert extra["monthly_cost"] == pytest.approx(5 * (0.192 * 730 + 100 * 0.08 + 3000 * 0.005))
    io2 = monthly_cost(_cluster(volume_type="io2", volume_iops=4000, volume_gb=50), prices)
    assert io2["monthly_cost"] == pytest.approx(3 * (0.096 * 730 + 50 * 0.125 + 4000 * 0.065))
    assert monthly_cost(_cluster(instance_type="local", volume_type="local", volume_gb=0, nodes=1), prices)["monthly_cost"] == 0


def test_cost_per_thousand_msgs() -> None:
    assert cost_per_krate(234.24, 20_000) == pytest.approx(11.712)
    assert cost_per_krate(100.0, 0) is None and cost_per_krate(100.0, None) is None


@pytest.mark.parametrize("field,value", [("instance_type", "m9.gigantic"), ("volume_type", "floppy")])
def test_unknown_types_name_the_field(field: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"cluster qq: {field} '{value}' has no price"):
        monthly_cost(_cluster(**{field: value}), load_prices())        # what `rbench validate` runs


@pytest.mark.parametrize("field,value", [("instance_type", "m9.gigantic"), ("volume_type", "floppy")])
def test_the_reduce_keeps_a_cluster_without_price_and_says_why(field: str, value: str) -> None:
    costs, notes = cluster_costs([_cluster(**{field: value}), _cluster(name="priced")], load_prices())
    by = {c["cluster"]: c for c in costs}
    assert by["qq"]["monthly_cost"] is None and by["priced"]["monthly_cost"] > 0
    (note,) = notes
    assert f"cluster qq: {field} '{value}' has no price" in note and "no price" in note
    assert cost_per_krate(by["qq"]["monthly_cost"], 1000.0) is None


@pytest.mark.parametrize("volume", ["io1", "gp2", "st1"])
def test_every_cluster_of_the_sizing_study_is_priced(volume: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """conf/workloads/qq-sizing-study.yaml with each volume type the study used: all priced, none free."""
    from rbench.config.load import load_workload

    prices = load_prices()
    monkeypatch.setenv("RBENCH_SIZING_VOLUME", volume)
    w = load_workload(str(ROOT / "conf" / "workloads" / "qq-sizing-study.yaml"))
    assert len(w.clusters) == 7
    for c in w.clusters:
        cost = monthly_cost(c.model_dump(), prices)
        assert cost["volume_type"] == volume and cost["monthly_cost"] > 0


def test_bad_price_files(tmp_path: Path) -> None:
    bad = tmp_path / "costs.yaml"
    bad.write_text("instances: {m5.large: {hourly: cheap}}\nvolumes: {}\n")
    with pytest.raises(ConfigError, match=r"instances.m5.large.hourly: expected a number"):
        load_prices(bad)
    bad.write_text("instances: {}\nvolumes: {gp3: {gb_month: 0.08}}\n")
    with pytest.raises(ConfigError, match=r"volumes.gp3.iops_month"):
        load_prices(bad)
    bad.write_text("instances: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_prices(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_prices(tmp_path / "missing.yaml")


def test_leaderboard_says_no_price_for_an_unpriced_cluster() -> None:
    from rbench.reduce import leaderboard as lb
    from rbench.report.leaderboard_md import leaderboard_markdown

    costs, notes = cluster_costs([_cluster(name="odd", instance_type="m9.gigantic"), _cluster(name="qq")], load_prices())
    steps = [{"cluster": c, "run_id": "r", "step": 0, "target_rate": 1000.0, "consume_rate": 1000.0, "publish_rate": 1000.0,
              "e2e_p99_ms": 5.0, "matched": True} for c in ("odd", "qq")]
    top = lb.top_throughput(steps)
    board = {"top_throughput": top, "highest_matched": lb.highest_matched(steps), "cost_at_top": lb.cost_at_top(top, costs),
             "target_rate": 1000.0, "target_rate_chosen_by": "test", "cost_at_target": lb.cost_at_target(steps, costs, 1000.0),
             "costs": costs, "prices": {"currency": "USD", "hours_per_month": 730, "path": "costs.yaml", "source": "test"}}
    meta = {"runs": [{"run_id": "r", "status": "complete"}], "rate_method": "m", "match_rule": "rule"}
    md = leaderboard_markdown(board, notes, meta)
    odd = [line for line in md.splitlines() if line.startswith("| ") and "| odd |" in line and "m9.gigantic" in line]
    assert len(odd) == 2 and all(line.count("no price") == 2 for line in odd)
    assert [r["cluster"] for r in board["cost_at_top"]] == ["qq", "odd"]        # priced first, unpriced last
    assert "instance_type 'm9.gigantic' has no price" in md
