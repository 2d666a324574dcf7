"""`rbench regress`: tonight against the history, per (cluster, step, metric).

A series is one metric of one (cluster, step) over the nights of one workload, oldest first,
ending tonight. It is a *regression* when either

* the same-morning gate (rbench.history.detect.gate) flags tonight, i.e. the last k nights
  (k = 1..recent_nights, each ending tonight) are worse than the baseline nights before them
  at false-alarm rate ``alpha``, **and** the change is at least the minimum (3 % throughput,
  10 % latency by default); or
* the change-point pass finds a worse shift whose first night is one of the last
  ``recent_nights``, significant at ``change_point_alpha`` and at least the minimum.

Older change points are reported (with their night's metadata) but do not fail the check:
they were tonight's news once. Only nights of tonight's workload hash are compared by
default: a changed workload measures something else. docs/history.md has the method and the
measured false-alarm and detection rates.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from rbench.errors import ConfigError
from rbench.history.detect import MIN_BASELINE_NIGHTS, ChangePoint, GateResult, change_points, gate
from rbench.samples.conventions import shown_step

# metric column → which way is worse (-1: lower is worse, +1: higher is worse)
DEFAULT_METRICS: dict[str, int] = {
    "consume_rate": -1, "publish_rate": -1, "confirm_rate": -1,
    "e2e_p50_ms": +1, "e2e_p95_ms": +1, "e2e_p99_ms": +1, "confirm_p99_ms": +1,
}
TINY = 1e-9          # a throughput of 0 is kept (as this) so that it reads as the drop it is
MIN_NIGHTS = MIN_BASELINE_NIGHTS + 1      # the baseline nights the gate needs, and tonight
TOO_FEW_NIGHTS = "too few nights"

# `rbench regress` exit codes (docs/history.md): a pipeline must tell "no regression" from "cannot tell yet"
EXIT_NO_REGRESSION, EXIT_REGRESSION, EXIT_NOT_ENOUGH_HISTORY = 0, 1, 4


def format_p(p: float) -> str:
    """A p-value as the reports print it: "= 0.0123", or "< 0.0001" below what four decimals show."""
    return "< 0.0001" if p < 1e-4 else f"= {p:.4f}"


def direction(metric: str) -> int:
    """-1 for rates (lower is worse), +1 for latencies and fault counts (higher is worse)."""
    if metric in DEFAULT_METRICS:
        return DEFAULT_METRICS[metric]
    return -1 if metric.endswith("_rate") else +1


@dataclass(frozen=True)
class Thresholds:
    alpha: float = 0.01
    change_point_alpha: float = 0.01
    baseline_nights: int = 30
    recent_nights: int = 3
    min_throughput_drop: float = 0.03
    min_latency_rise: float = 0.10
    metrics: tuple[str, ...] = tuple(DEFAULT_METRICS)
    permutations: int = 999
    min_size: int = 2

    def min_change(self, metric: str) -> float:
        return self.min_throughput_drop if direction(metric) < 0 else self.min_latency_rise

    def check(self) -> Thresholds:
        for name in ("alpha", "change_point_alpha"):
            v = getattr(self, name)
            if not 0 < v < 0.5:
                raise ConfigError(f"--{name.replace('_', '-')}: expected a probability in (0, 0.5), got {v}")
        if self.baseline_nights < 5:
            raise ConfigError(f"--baseline-nights: expected at least 5, got {self.baseline_nights}")
        if not 1 <= self.recent_nights <= 10:
            raise ConfigError(f"--recent-nights: expected 1 to 10, got {self.recent_nights}")
        if not 0 <= self.min_throughput_drop < 1 or self.min_latency_rise < 0:
            raise ConfigError("--min-throughput-drop / --min-latency-rise: expected fractions >= 0 (0.03 = 3 %)")
        return self


def thresholds_from(workload_regress: str | dict[str, Any] | None, overrides: dict[str, Any]) -> Thresholds:
    """Defaults, then the workload's ``regress:`` section, then the command line."""
    t = Thresholds()
    section = json.loads(workload_regress) if isinstance(workload_regress, str) else (workload_regress or {})
    for key, value in {**section, **{k: v for k, v in overrides.items() if v is not None}}.items():
        if value is None:
            continue
        if key == "metrics":
            value = tuple(value)
        t = replace(t, **{key: value})
    return t.check()


@dataclass
class Finding:
    cluster: str
    step: int                      # 0-based (shown + 1 in every printed output)
    metric: str
    nights: list[str]
    values: list[float]
    runs: list[dict[str, Any]]     # per night: run_id and metadata
    gate: GateResult | None
    change_points: list[ChangePoint] = field(default_factory=list)
    status: str = "ok"             # regression | ok | TOO_FEW_NIGHTS | no value tonight
    reason: str = ""
    night_of_change: int | None = None      # index into nights

    @property
    def label(self) -> str:
        return f"{self.cluster} step {shown_step(self.step)} {self.metric}"

    @property
    def broker_change(self) -> str | None:
        """'broker changed 3.10.8 → 4.0.5' when the broker version of the nights from the shift to tonight differs
        from the last night before it (history column broker_version, from run.json); None when it did not or is unknown.
        A regression across a broker upgrade is first a question about the broker, not about rbench."""
        versions = [r.get("broker_version") for r in self.runs]
        if not versions:
            return None
        start = self.night_of_change if self.night_of_change is not None else len(versions) - 1
        before = next((v for v in reversed(versions[:start]) if v), None)
        after = next((v for v in versions[start:] if v and v != before), None)
        return f"broker changed {before} → {after}" if before and after else None


@dataclass
class Result:
    workload: str
    tonight: dict[str, Any]
    thresholds: Thresholds
    findings: list[Finding]
    skipped_hashes: int = 0

    @property
    def regressions(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "regression"]

    @property
    def unjudged(self) -> list[Finding]:
        """Series with too few nights for the gate: no verdict either way, so no clean bill for them."""
        return [f for f in self.findings if f.status == TOO_FEW_NIGHTS]

    @property
    def exit_code(self) -> int:
        """1 on any regression; else 4 while any series of tonight cannot be judged yet; else 0."""
        if self.regressions:
            return EXIT_REGRESSION
        return EXIT_NOT_ENOUGH_HISTORY if self.unjudged else EXIT_NO_REGRESSION

    def headline(self) -> str:
        """The one sentence a nightly pipeline's reader acts on, with the numbers behind it."""
        n, regs, unjudged = len(self.findings), self.regressions, self.unjudged
        if regs:
            return f"**REGRESSION** in {len(regs)} of {n} series."
        if unjudged:
            have = sorted({len(f.values) for f in unjudged})
            nights = f"{have[0]}" if len(have) == 1 else f"{have[0]} to {have[-1]}"
            judged = n - len(unjudged)
            rest = (f"; no regression in the other {judged} series" if judged else "")
            return (f"Not enough history: {len(unjudged)} of {n} series have {nights} night(s), and the gate needs at "
                    f"least {MIN_NIGHTS} ({MIN_BASELINE_NIGHTS} baseline nights and tonight): no verdict for them{rest}.")
        return f"No regression in {n} series."


def _series_rows(table: pa.Table, run_id: str | None, any_hash: bool) -> tuple[list[dict[str, Any]], dict[str, Any], int]:
    rows = table.to_pylist()
    runs: dict[str, dict[str, Any]] = {}
    for r in rows:
        runs.setdefault(r["run_id"], r)
    order = sorted(runs.values(), key=lambda r: (str(r["night"]), str(r.get("started_at") or ""), r["run_id"]))
    if run_id is None:
        tonight = order[-1]
    elif run_id in runs:
        tonight = runs[run_id]
    else:
        raise ConfigError(f"--run: {run_id} is not in the history")
    key = (str(tonight["night"]), str(tonight.get("started_at") or ""), tonight["run_id"])
    keep = [r for r in rows if (str(r["night"]), str(r.get("started_at") or ""), r["run_id"]) <= key]
    skipped = 0
    if not any_hash:
        before = {r["run_id"] for r in keep}
        keep = [r for r in keep if r.get("workload_hash") == tonight.get("workload_hash")]
        skipped = len(before - {r["run_id"] for r in keep})
    return keep, tonight, skipped


def analyse(table: pa.Table, workload: str, thresholds: Thresholds, run_id: str | None = None,
            any_hash: bool = False) -> Result:
    """Every (cluster, step, metric) series of the workload, judged as of tonight's run."""
    rows, tonight, skipped = _series_rows(table, run_id, any_hash)
    missing = [m for m in thresholds.metrics if m not in table.schema.names]
    if missing:
        numeric = [f.name for f in table.schema if pa.types.is_floating(f.type) or pa.types.is_integer(f.type)]
        raise ConfigError(f"--metrics: no column {', '.join(missing)} in the history (columns: {', '.join(numeric)})")
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["cluster"], int(r["step"])), []).append(r)
    tonight_keys = {(r["cluster"], int(r["step"])) for r in rows if r["run_id"] == tonight["run_id"]}
    findings = []
    for (cluster, step), group in sorted(groups.items()):
        if (cluster, step) not in tonight_keys:
            continue                  # a step tonight did not run: nothing to judge
        group.sort(key=lambda r: (str(r["night"]), str(r.get("started_at") or ""), r["run_id"]))
        for metric in thresholds.metrics:
            findings.append(_judge(cluster, step, metric, group, thresholds))
    return Result(workload, tonight, thresholds, findings, skipped)


def _meta(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("run_id", "night", "started_at", "commit", "broker_version", "rbench_version", "workload_hash",
            "nodes", "instance_type", "volume_type", "driver")
    return {k: (str(r[k]) if k == "night" else r.get(k)) for k in keys}


def _judge(cluster: str, step: int, metric: str, group: list[dict[str, Any]], t: Thresholds) -> Finding:
    pts = [(r, r.get(metric)) for r in group]
    if pts[-1][1] is None:
        return Finding(cluster, step, metric, [], [], [], None, status="no value tonight",
                       reason="tonight has no value (e.g. no deliveries)")
    known = [(r, float(v)) for r, v in pts if v is not None]
    f = Finding(cluster, step, metric, [str(r["night"]) for r, _ in known], [v for _, v in known],
                [_meta(r) for r, _ in known], None)
    return judge(f, t)


def judge(f: Finding, t: Thresholds) -> Finding:
    """Fill in the gate, the change points and the verdict of one series (f.values, oldest first)."""
    worse, metric, cluster, step = direction(f.metric), f.metric, f.cluster, f.step
    values = np.array([max(v, TINY) for v in f.values])
    log = worse > 0                  # latencies on a log scale, rates linear (rbench.history.detect)
    f.gate = gate(values, worse, t.alpha, t.baseline_nights, t.recent_nights, log=log)
    f.change_points = change_points(values, t.change_point_alpha, t.min_size, t.permutations,
                                    seed=f"{cluster}/{step}/{metric}", log=log)
    if f.gate is None:
        f.status, f.reason = TOO_FEW_NIGHTS, f"{len(values)} night(s); the gate needs at least {MIN_NIGHTS}"
    n, need = len(values), t.min_change(metric)

    def big(change: float) -> bool:
        return worse * change >= need

    recent_cps = [c for c in f.change_points if c.index >= n - t.recent_nights]
    bad_cp = next((c for c in reversed(recent_cps) if np.sign(c.change) == worse and big(c.change)), None)
    if f.gate is not None and f.gate.flagged and big(f.gate.change):
        f.status = "regression"
        f.night_of_change = bad_cp.index if bad_cp is not None else n - f.gate.recent
        nights = "tonight is" if f.gate.recent == 1 else f"the last {f.gate.recent} nights are"
        f.reason = (f"{nights} {abs(f.gate.change):.1%} {'lower' if worse < 0 else 'higher'} "
                    f"than the {f.gate.baseline_nights} nights before (gate statistic {f.gate.statistic:.2f} > "
                    f"{f.gate.critical:.2f}, p {format_p(f.gate.p_value)}, alpha {t.alpha:g})")
    elif bad_cp is not None:
        f.status = "regression"
        f.night_of_change = bad_cp.index
        f.reason = (f"change point at {f.nights[bad_cp.index]}: {abs(bad_cp.change):.1%} "
                    f"{'lower' if worse < 0 else 'higher'} since (permutation p = {bad_cp.p_value:.3f})")
    elif f.gate is not None:
        last = f.change_points[-1] if f.change_points else None
        f.reason = f"last {f.gate.recent} night(s) {f.gate.change:+.1%} against the baseline (p {format_p(f.gate.p_value)})" + (
            f"; last change point {f.nights[last.index]} ({last.change:+.1%})" if last else "")
    if f.status == "regression" and f.broker_change:
        f.reason += f"; {f.broker_change}"
    return f
