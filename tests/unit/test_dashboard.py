"""The committed Grafana dashboard: regenerated identically, and valid Grafana dashboard JSON (offline checks).

promtool checks and a real Prometheus run its queries in tests/spark/test_prometheus_run.py.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from rbench.live import dashboard

ROOT = Path(__file__).resolve().parents[2]
JSON_PATH = ROOT / "dashboards" / "rbench-run.json"


def test_committed_json_is_what_the_generator_writes() -> None:
    assert JSON_PATH.read_text() == dashboard.render(), "run `make dashboards`"
    assert (ROOT / "dashboards" / "rbench-rules.yml").read_text() == dashboard.render_rules(), "run `make dashboards`"


def test_the_json_is_a_valid_grafana_dashboard() -> None:
    from grafana_foundation_sdk.models.dashboard import Dashboard

    data = json.loads(JSON_PATH.read_text())
    # the SDK's own model (generated from Grafana's schema) reads it back and writes the same JSON
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    again = json.loads(json.dumps(Dashboard.from_json(data), cls=JSONEncoder))
    assert again == data
    assert data["uid"] == dashboard.UID and data["title"] and isinstance(data["schemaVersion"], int)
    assert data["time"] == {"from": "now-30m", "to": "now"}
    variables = {v["name"]: v for v in data["templating"]["list"]}
    assert set(variables) == {"datasource", "run", "cluster", "step", "broker"}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids, cells = set(), set()
    for p in data["panels"]:
        assert p["type"] in {"row", "timeseries", "table"}
        assert p["id"] not in ids
        ids.add(p["id"])
        g = p["gridPos"]
        assert all(isinstance(g[k], int) for k in "hwxy") and 0 <= g["x"] and g["x"] + g["w"] <= 24
        for x in range(g["x"], g["x"] + g["w"]):          # no two panels overlap
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, p["title"]
                cells.add((x, y))
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)) and p["targets"]
        for t in p["targets"]:
            for var in re.findall(r"\$(\w+)", t["expr"]):
                assert var in variables or var in ("__rate_interval", "__range"), var
    titles = [p["title"] for p in data["panels"]]
    for expected in ("Throughput (msg/s)", "End-to-end latency p50 / p95 / p99", "Queue depth (messages)",
                     "Broker memory (resident)", "Broker CPU (cores)", "Nacks and returns (msg/s)"):
        assert expected in titles


def test_latency_panels_use_histogram_quantile_over_summed_buckets() -> None:
    for spec in dashboard.PANELS:
        for q in spec.queries:
            if "latency_seconds" in q.expr:
                assert q.expr.startswith("histogram_quantile(") and "sum by (cluster, step, le)" in q.expr
