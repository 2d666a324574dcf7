"""The Grafana dashboard for a run, written as code and committed as JSON (dashboards/rbench-run.json).

Built with grafana-foundation-sdk (Grafana Labs' own builders, generated from Grafana's
schemas and released with Grafana; grafanalib's last release is from January 2024): a panel
or option the installed Grafana schema does not know fails here, when the JSON is generated,
not when someone imports it. Every PromQL expression of the dashboard is in PANELS and
VARIABLES, so tests check each one with promtool and run the p99 query against a real
Prometheus (tests/spark/test_prometheus_run.py).

Run-side panels read the coordinator's merged endpoint (rbench.live.run_metrics, ``rbench_run_*``);
broker panels read RabbitMQ's own rabbitmq_prometheus plugin (port 15692), joined on
``rabbitmq_identity_info`` to pick a broker cluster. Regenerate with ``make dashboards``.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

UID = "rbench-run"
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "dashboards" / "rbench-run.json"
RULES_PATH = DEFAULT_PATH.with_name("rbench-rules.yml")

RUN = 'run_id=~"$run", cluster=~"$cluster"'
RUN_STEP = 'run_id=~"$run", cluster=~"$cluster", step=~"$step"'
BROKER_JOIN = 'on(instance, job) group_left(rabbitmq_cluster, rabbitmq_node) rabbitmq_identity_info{rabbitmq_cluster=~"$broker"}'


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str
    instant: bool = False


@dataclass(frozen=True)
class PanelSpec:
    title: str
    kind: str                 # timeseries | table
    unit: str
    queries: tuple[Query, ...]
    description: str
    width: int = 12


def _quantile(q: float, metric: str, window: str) -> str:
    return (f"histogram_quantile({q}, sum by (cluster, step, le) "
            f"({window}({metric}_bucket{{{RUN_STEP}}}[{'$__rate_interval' if window == 'rate' else '$__range'}])))")


def _rate(counter: str) -> str:
    return f"sum by (cluster) (rate({counter}_total{{{RUN}}}[$__rate_interval]))"


PANELS: tuple[PanelSpec, ...] = (
    PanelSpec("Throughput (msg/s)", "timeseries", "reqps", (
        Query(_rate("rbench_run_published"), "{{cluster}} published"),
        Query(_rate("rbench_run_confirmed"), "{{cluster}} confirmed"),
        Query(_rate("rbench_run_consumed"), "{{cluster}} consumed"),
    ), "Published, confirmed and consumed msg/s per rbench cluster, every task of the run added up "
       "(rate() of the coordinator's counters)."),
    PanelSpec("Nacks and returns (msg/s)", "timeseries", "reqps", (
        Query(_rate("rbench_run_nacked"), "{{cluster}} nacked"),
        Query(_rate("rbench_run_returned"), "{{cluster}} returned"),
    ), "Messages the broker nacked, and mandatory messages it returned as unroutable."),
    PanelSpec("End-to-end latency p50 / p95 / p99", "timeseries", "s", tuple(
        Query(_quantile(q, "rbench_run_latency_seconds", "rate"), f"{{{{cluster}}}} step {{{{step}}}} p{name}")
        for q, name in ((0.5, "50"), (0.95, "95"), (0.99, "99"))
    ), "Receive minus intended send time, per cluster and step, over the last rate interval: histogram_quantile over "
       "the buckets of every task summed (10 buckets per decade: within one bucket, < 26 %, of the true value)."),
    PanelSpec("Confirm latency p50 / p95 / p99", "timeseries", "s", tuple(
        Query(_quantile(q, "rbench_run_confirm_latency_seconds", "rate"), f"{{{{cluster}}}} step {{{{step}}}} p{name}")
        for q, name in ((0.5, "50"), (0.95, "95"), (0.99, "99"))
    ), "Publisher confirm latency (confirm minus send time), per cluster and step."),
    PanelSpec("Whole step: end-to-end p50 / p95 / p99", "table", "s", tuple(
        Query(_quantile(q, "rbench_run_latency_seconds", "last_over_time"), f"p{name}", instant=True)
        for q, name in ((0.5, "50"), (0.95, "95"), (0.99, "99"))
    ), "Each step's whole distribution so far (the last cumulative buckets in the time range), per cluster and step: "
       "the live counterpart of the reduce's exact percentiles, within one bucket of them.", width=24),
    PanelSpec("Queue depth (messages)", "timeseries", "short", (
        Query(f"sum by (rabbitmq_cluster) (rabbitmq_queue_messages_ready * {BROKER_JOIN})", "{{rabbitmq_cluster}} ready"),
        Query(f"sum by (rabbitmq_cluster) (rabbitmq_queue_messages_unacked * {BROKER_JOIN})", "{{rabbitmq_cluster}} unacked"),
    ), "RabbitMQ's own metrics (rabbitmq_prometheus, port 15692): messages ready and unacknowledged, all queues."),
    PanelSpec("Broker memory (resident)", "timeseries", "bytes", (
        Query(f"rabbitmq_process_resident_memory_bytes * {BROKER_JOIN}", "{{rabbitmq_node}}"),
        Query(f"rabbitmq_resident_memory_limit_bytes * {BROKER_JOIN}", "{{rabbitmq_node}} high watermark"),
    ), "Resident memory of each broker node and its memory high watermark."),
    PanelSpec("Broker CPU (cores)", "timeseries", "short", (
        Query(f"rate(erlang_vm_statistics_runtime_milliseconds[$__rate_interval]) / 1000 * {BROKER_JOIN}",
              "{{rabbitmq_node}}"),
    ), "CPU time of each node's Erlang VM (all schedulers) per second: 1.0 = one core busy."),
)

VARIABLES: tuple[tuple[str, str, str], ...] = (
    # name, label, label_values() query
    ("run", "run", "label_values(rbench_run_info, run_id)"),
    ("cluster", "cluster", 'label_values(rbench_run_published_total{run_id=~"$run"}, cluster)'),
    ("step", "step", 'label_values(rbench_run_published_total{run_id=~"$run", cluster=~"$cluster"}, step)'),
    ("broker", "broker cluster", "label_values(rabbitmq_identity_info, rabbitmq_cluster)"),
)


def build() -> dict:  # type: ignore[type-arg]
    """The dashboard as Grafana JSON (a dict)."""
    from grafana_foundation_sdk.builders import common as gc
    from grafana_foundation_sdk.builders import dashboard as gd
    from grafana_foundation_sdk.builders import prometheus, table, timeseries
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models import common as mc
    from grafana_foundation_sdk.models import dashboard as md
    from grafana_foundation_sdk.models import prometheus as mp

    ds = md.DataSourceRef(type_val="prometheus", uid="${datasource}")
    board = (gd.Dashboard("rbench run").uid(UID).tags(["rbench", "rabbitmq"]).refresh("5s")
             .time("now-30m", "now").timezone("browser").editable()
             .description("rbench: one run's merged throughput and latency histograms (coordinator /metrics) "
                          "beside RabbitMQ's own metrics, on one time axis. Generated by rbench/live/dashboard.py."))
    board = board.with_variable(gd.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
    for name, label, query in VARIABLES:
        board = board.with_variable(
            gd.QueryVariable(name).label(label).datasource(ds).query(query)
            .refresh(md.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(md.VariableSort.ALPHABETICAL_ASC)
            .multi(True).include_all(True).all_value(".*"))
    board = board.with_row(gd.Row("rbench (coordinator /metrics, all tasks merged)").id(100))
    for i, spec in enumerate(PANELS):
        if spec.title.startswith("Queue depth"):
            board = board.with_row(gd.Row("RabbitMQ (rabbitmq_prometheus)").id(101))
        panel: Any
        if spec.kind == "timeseries":
            panel = (timeseries.Panel().fill_opacity(0).line_width(1)
                     .legend(gc.VizLegendOptions().show_legend(True).display_mode(mc.LegendDisplayMode.TABLE)
                             .placement(mc.LegendPlacement.BOTTOM).calcs(["lastNotNull", "max"]))
                     .tooltip(gc.VizTooltipOptions().mode(mc.TooltipDisplayMode.MULTI).sort(mc.SortOrder.DESCENDING)))
        else:
            panel = table.Panel().show_header(True)
        panel = panel.id(i + 1).title(spec.title).description(spec.description).unit(spec.unit).datasource(ds).height(8).span(spec.width)
        for j, q in enumerate(spec.queries):
            target = prometheus.Dataquery().expr(q.expr).legend_format(q.legend).ref_id(chr(ord("A") + j))
            target = target.instant().format(mp.PromQueryFormat.TABLE) if q.instant else target.range()
            panel = panel.with_target(target)
        if spec.kind == "table":
            panel = panel.with_transformation(md.DataTransformerConfig(id_val="merge", options={}))
        board = board.with_panel(panel)
    data: dict[Any, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    return data


def substitute(expr: str, rate_interval: str = "15s", range_: str = "5m", **values: str) -> str:
    """An expression with the dashboard's variables filled in (default: every value), as Grafana sends it."""
    out = expr.replace("$__rate_interval", rate_interval).replace("$__range", range_)
    for name, _, _ in VARIABLES:
        out = out.replace(f"${name}", values.get(name, ".*"))
    return out


def expressions() -> list[str]:
    """Every PromQL expression of the dashboard (panels and variables' label_values selectors)."""
    exprs = [q.expr for p in PANELS for q in p.queries]
    for _, _, query in VARIABLES:
        inner = query[len("label_values("):-1].rsplit(",", 1)[0]
        if inner.strip():
            exprs.append(inner.strip())
    return exprs


def recording_rules() -> dict:  # type: ignore[type-arg]
    """Prometheus recording rules (level:metric:operation names) for the rates and merged quantiles."""
    rules = []
    for key in ("published", "confirmed", "nacked", "returned", "consumed"):
        rules.append({"record": f"run_cluster_step:rbench_run_{key}:rate1m",
                      "expr": f"sum by (run_id, cluster, step) (rate(rbench_run_{key}_total[1m]))"})
    for metric in ("rbench_run_latency_seconds", "rbench_run_confirm_latency_seconds"):
        rules.append({"record": f"run_cluster_step:{metric}_bucket:rate1m",
                      "expr": f"sum by (run_id, cluster, step, le) (rate({metric}_bucket[1m]))"})
        for q in (0.5, 0.95, 0.99):
            rules.append({"record": f"run_cluster_step:{metric}:p{round(q * 100)}_1m",
                          "expr": f"histogram_quantile({q}, run_cluster_step:{metric}_bucket:rate1m)"})
    return {"groups": [{"name": "rbench", "interval": "15s", "rules": rules}]}


def render_rules() -> str:
    import yaml

    return "# Generated by rbench/live/dashboard.py (make dashboards); checked by promtool in the tests.\n" + \
        yaml.safe_dump(recording_rules(), sort_keys=False, width=200)


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write rbench's Grafana dashboard JSON.")
    parser.add_argument("out", nargs="?", default=str(DEFAULT_PATH), help=f"output file (default {DEFAULT_PATH})")
    args = parser.parse_args(argv)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(render())
    rules = Path(args.out).with_name(RULES_PATH.name)
    rules.write_text(render_rules())
    print(f"dashboard: {args.out} ({len(PANELS)} panels, {len(VARIABLES) + 1} variables); recording rules: {rules}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
