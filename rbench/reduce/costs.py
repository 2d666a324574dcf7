"""Prices from conf/costs.yaml and the monthly cost of a cluster.

Pure Python (no Spark): the price table is tiny, and the unit tests check the
arithmetic without a JVM. Unknown instance or volume types are a ConfigError that
names the cluster and field, because a silent zero would make a cluster look free.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import yaml

from rbench.errors import ConfigError

_CHECKOUT_COSTS = Path(__file__).resolve().parents[2] / "conf" / "costs.yaml"
# installed from a wheel (a packed env, the container image) there is no checkout: the wheel
# carries the same file as data under <prefix>/share/rbench (pyproject's data-files)
DEFAULT_COSTS = _CHECKOUT_COSTS if _CHECKOUT_COSTS.exists() else Path(sys.prefix) / "share" / "rbench" / "conf" / "costs.yaml"


@dataclass(frozen=True)
class Prices:
    """The parsed price table."""

    instances: dict[str, dict[str, Any]]
    volumes: dict[str, dict[str, Any]]
    hours_per_month: float = 730.0
    currency: str = "USD"
    source: str = ""
    path: str = ""


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError(f"{where}: expected a number >= 0, got {value!r}")
    return float(value)


def load_prices(path: str | Path | None = None) -> Prices:
    """Read and validate a costs file; ConfigError names the bad field."""
    p = Path(path) if path else DEFAULT_COSTS
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read costs file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping with 'instances' and 'volumes'")
    instances = data.get("instances")
    volumes = data.get("volumes")
    if not isinstance(instances, dict):
        raise ConfigError(f"{p}: instances: expected a mapping of instance type to {{hourly: price}}")
    if not isinstance(volumes, dict):
        raise ConfigError(f"{p}: volumes: expected a mapping of volume type to {{gb_month, iops_month}}")
    for name, entry in instances.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{p}: instances.{name}: expected a mapping with 'hourly'")
        _number(entry.get("hourly"), f"{p}: instances.{name}.hourly")
    for name, entry in volumes.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{p}: volumes.{name}: expected a mapping with 'gb_month' and 'iops_month'")
        for key in ("gb_month", "iops_month"):
            _number(entry.get(key), f"{p}: volumes.{name}.{key}")
        for key in ("baseline_iops", "included_iops"):
            _number(entry.get(key, 0), f"{p}: volumes.{name}.{key}")
    hours = _number(data.get("hours_per_month", 730), f"{p}: hours_per_month")
    return Prices({str(k): v for k, v in instances.items()}, {str(k): v for k, v in volumes.items()}, hours,
                  str(data.get("currency", "USD")), str(data.get("source", "")), str(p))


def monthly_cost(cluster: dict[str, Any], prices: Prices) -> dict[str, Any]:
    """Monthly cost of one run.json cluster entry, with its parts (so the report can show them)."""
    name = cluster.get("name", "?")
    itype = cluster.get("instance_type")
    vtype = cluster.get("volume_type")
    if itype not in prices.instances:
        raise ConfigError(f"cluster {name}: instance_type {itype!r} has no price in {prices.path or 'costs.yaml'} "
                          f"(known: {', '.join(sorted(prices.instances))})")
    if vtype not in prices.volumes:
        raise ConfigError(f"cluster {name}: volume_type {vtype!r} has no price in {prices.path or 'costs.yaml'} "
                          f"(known: {', '.join(sorted(prices.volumes))})")
    nodes = _number(cluster.get("nodes", 1), f"cluster {name}: nodes")
    gb = _number(cluster.get("volume_gb") or 0, f"cluster {name}: volume_gb")
    vol = prices.volumes[vtype]
    iops = cluster.get("volume_iops")
    iops = float(vol.get("baseline_iops", 0)) if iops is None else _number(iops, f"cluster {name}: volume_iops")
    billed_iops = max(0.0, iops - float(vol.get("included_iops", 0)))
    instance_month = float(prices.instances[itype]["hourly"]) * prices.hours_per_month
    volume_month = gb * float(vol["gb_month"]) + billed_iops * float(vol["iops_month"])
    return {"cluster": name, "nodes": int(nodes), "instance_type": itype, "volume_type": vtype, "volume_gb": gb,
            "iops": iops, "billed_iops": billed_iops, "instance_month": instance_month, "volume_month": volume_month,
            "monthly_cost": nodes * (instance_month + volume_month)}


def cluster_costs(clusters: list[dict[str, Any]], prices: Prices) -> tuple[list[dict[str, Any]], list[str]]:
    """Monthly cost of every distinct cluster (by name) of some runs (the last description wins), and notes.

    Measured figures must not be lost to a price list: at reduce time a type without a price
    gives the cluster ``monthly_cost`` None (the report says "no price") and a note naming
    the field, where `rbench validate` refuses the same workload up front."""
    by_name = {str(c.get("name")): c for c in clusters}
    costs, notes = [], []
    for name, c in by_name.items():
        try:
            costs.append(monthly_cost(c, prices))
        except ConfigError as exc:
            notes.append(f"{exc} in {prices.path}: its cost columns say 'no price'")
            costs.append({"cluster": name, "nodes": c.get("nodes"), "instance_type": c.get("instance_type"),
                          "volume_type": c.get("volume_type"), "volume_gb": c.get("volume_gb"), "monthly_cost": None})
    return costs, notes


def is_priced(monthly: float | None) -> TypeGuard[float]:
    """Whether a cluster has a price: a monthly cost above 0. A type priced 0 (``local``, a broker on this
    machine) has none, and its "0.00 per 1000 msg/s" would read as the cheapest; shown as "no price"."""
    return monthly is not None and monthly > 0


def cost_per_krate(monthly: float | None, rate: float | None) -> float | None:
    """Monthly cost per 1000 msg/s sustained: the figure clusters are compared on (None without a price)."""
    if rate is None or rate <= 0 or not is_priced(monthly):
        return None
    return monthly / (rate / 1000.0)
