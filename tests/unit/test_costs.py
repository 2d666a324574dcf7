"""conf/costs.yaml and the monthly-cost arithmetic (no Spark)."""
from __future__ import annotations

from pathlib import Path

import pytest

from rbench.errors import ConfigError
from rbench.reduce.costs import cluster_costs, cost_per_krate, load_prices, monthly_cost


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
        cluster_costs([_cluster(**{field: value})], load_prices())


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
