"""A comparison's result as typed records, how it is computed from the rounds, and compare.json / compare.md.

compare.json: ``metrics`` (NAME → ratio B/A, its interval, each round's A and B, the verdict) for the
first pair -- the whole comparison when the workload has two clusters -- and ``pairs`` with every
cluster after the first compared with the first; ``rounds`` (order and run directories); ``method``.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rbench.compare.metrics import METRIC_SOURCES, METRICS, Figure, Metric, metric_key, round_figures, verdict
from rbench.compare.rounds import Round
from rbench.compare.stats import CONFIDENCE, RatioEstimate, paired_ratio
from rbench.errors import SinkError
from rbench.samples.conventions import shown_step
from rbench.samples.record import read_run_record

STATS_METHOD = ("the ratio B/A is the ratio of the geometric means over the rounds, i.e. exp(mean of each round's "
                "ln(b/a)), with a Student t interval on the mean paired log-ratio (df = rounds - 1; at the "
                "comparison's confidence, 95 % unless --confidence says otherwise, or the figure's own), widened by "
                "the figures' resolution (rates: ±1 message per measurement window), exponentiated; a difference is "
                "shown when the interval excludes 1 (rbench.compare.stats, docs/compare.md)")


def method(each: str, per: str, sources: str) -> str:
    """compare.json's ``method``: how the rounds ran (``each``: what one side of a round is), the statistics, and
    where each figure comes from."""
    return f"rounds interleaved in a balanced order (A B, B A, …), each {each}; per {per}, {STATS_METHOD}. {sources}"


Mode = Literal["workload", "scalability", "amqp10"]
METHOD = method("a full run of one cluster", "metric and step", METRIC_SOURCES)


@dataclass(frozen=True)
class Compared:
    """One figure a comparison compares: its name in compare.json, the metric it is, where in the run it was taken
    (a workload's step, a sweep's level), and the confidence of its interval (lower for a headline, higher for one
    of a family of per-level intervals that must hold together)."""

    key: str
    metric: Metric
    at: tuple[tuple[str, int], ...] = ()
    confidence: float = CONFIDENCE


@dataclass(frozen=True)
class MetricComparison:
    """One compared figure: each round's A and B, the ratio B/A with its interval, and the verdict."""

    key: str
    metric: Metric
    at: tuple[tuple[str, int], ...]
    a: tuple[float | None, ...]
    b: tuple[float | None, ...]
    estimate: RatioEstimate | None
    verdict: str
    confidence: float = CONFIDENCE

    def to_json(self) -> dict[str, Any]:
        e = self.estimate
        return {"ratio": None if e is None else e.ratio, "ci": None if e is None else [e.lo, e.hi],
                "a": list(self.a), "b": list(self.b), "verdict": self.verdict, "unit": self.metric.unit,
                "better": self.metric.better, **dict(self.at), "label": self.metric.label,
                "confidence": self.confidence}


@dataclass(frozen=True)
class PairComparison:
    """Cluster ``b`` against the baseline ``a`` (the workload's first cluster)."""

    a: str
    b: str
    metrics: tuple[MetricComparison, ...]

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "metrics": {m.key: m.to_json() for m in self.metrics}}


@dataclass(frozen=True)
class Comparison:
    """The whole comparison: what was compared, the rounds that ran and every pair's metrics."""

    workload: str
    folder: Path
    clusters: tuple[str, ...]
    rounds: tuple[Round, ...]
    pairs: tuple[PairComparison, ...]
    notes: tuple[str, ...] = ()          # what weakens a round's figures (a generator-bound step)
    method: str = METHOD
    confidence: float = CONFIDENCE
    mode: Mode = "workload"              # what one side of a round ran
    preamble: str = ""                   # what compare.md says before the tables (how to read this mode's rows)

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.workload, "mode": self.mode, "a": self.clusters[0], "b": self.pairs[0].b if self.pairs else None,
                "clusters": list(self.clusters), "confidence": self.confidence,
                "metrics": self.pairs[0].to_json()["metrics"] if self.pairs else {},
                "pairs": [p.to_json() for p in self.pairs], "rounds": [r.to_json() for r in self.rounds],
                "notes": list(self.notes), "method": self.method}


def compare_metric(c: Compared, a_name: str, b_name: str, fa: list[Figure], fb: list[Figure]) -> MetricComparison:
    """Round i's A against round i's B for one compared figure: the paired ratio, or why it is not compared."""
    a, b = [f.value for f in fa], [f.value for f in fb]
    missing = [i + 1 for i, (x, y) in enumerate(zip(a, b)) if x is None or y is None]
    why = None
    estimate = None
    if missing:
        why = f"not measured in round(s) {', '.join(map(str, missing))}"
    elif any(x is not None and x <= 0 for x in (*a, *b)):
        why = "a round measured 0 (a ratio needs positive figures)"
    else:
        estimate = paired_ratio([float(x) for x in a if x is not None], [float(y) for y in b if y is not None],
                                c.confidence, resolution=[x.resolution + y.resolution for x, y in zip(fa, fb)])
    return MetricComparison(c.key, c.metric, c.at, tuple(a), tuple(b), estimate,
                            verdict(c.metric, estimate, a_name, b_name, why), c.confidence)


Figures = Mapping[tuple[int, str], Mapping[str, Figure]]     # (round, side) → compared key → that round's figure


def compare_pairs(sides: Sequence[str], rounds: Sequence[Round], figures: Figures,
                  compared: Sequence[Compared]) -> tuple[PairComparison, ...]:
    """Every side after the first against the first, per compared figure, over the rounds (any kind of round:
    a workload's run, a sweep, an AMQP 1.0 send/receive; ``figures`` says what each measured)."""
    pairs = []
    for b_name in sides[1:]:
        out = []
        for c in compared:
            a = [figures.get((r.number, sides[0]), {}).get(c.key, Figure(None)) for r in rounds]
            b = [figures.get((r.number, b_name), {}).get(c.key, Figure(None)) for r in rounds]
            out.append(compare_metric(c, sides[0], b_name, a, b))
        pairs.append(PairComparison(sides[0], b_name, tuple(out)))
    return tuple(pairs)


def analyse(workload: str, folder: Path, clusters: list[str], rounds: tuple[Round, ...],
            confidence: float = CONFIDENCE) -> Comparison:
    """Each cluster after the first against the first, per metric and step, over the rounds' reduces."""
    figures: dict[tuple[int, str], dict[tuple[str, int], Figure]] = {}
    steps: set[int] = set()
    notes = []
    for rnd in rounds:
        for run in rnd.runs:
            rows = [r for r in (run.reduced.steps if run.reduced else []) if r.get("cluster") == run.cluster]
            figures[(rnd.number, run.cluster)] = round_figures(rows, read_run_record(run.run_dir).cluster(run.cluster))
            steps |= {int(r["step"]) for r in rows}
            notes += [f"round {rnd.number}, {run.cluster} step {shown_step(r['step'])}: generator-bound, the load "
                      f"generator was the limit ({run.run_dir.name}: {r.get('generator_note')})"
                      for r in rows if r.get("generator_bound")]
    compared = [Compared(metric_key(m, step, len(steps)), m, (("step", step),), confidence)
                for step in sorted(steps) for m in METRICS]
    by_name = {m.name: m for m in METRICS}
    keyed = {side: {metric_key(by_name[name], step, len(steps)): f for (name, step), f in by.items()}
             for side, by in figures.items()}
    pairs = compare_pairs(clusters, rounds, keyed, compared)
    return Comparison(workload, folder, tuple(clusters), rounds, pairs, tuple(notes), confidence=confidence)


def _num(v: float | None, unit: str) -> str:
    if v is None:
        return "–"
    if unit == "ms":
        return f"{v:.3f}" if v < 10 else f"{v:,.1f}"
    return f"{v:,.1f}" if abs(v) < 1e5 else f"{v:,.0f}"


def _geomean(values: tuple[float | None, ...]) -> float | None:
    import math

    if not values or any(v is None or v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values if v is not None) / len(values))


def markdown(c: Comparison) -> str:
    """compare.md: per pair, one table row per metric (geometric means, ratio, interval, verdict), then the rounds."""
    lines = [f"# Comparison: {c.workload}", "",
             f"{len(c.rounds)} rounds; A = {c.clusters[0]}. Values are geometric means over the rounds; "
             f"B/A and its confidence interval ({c.confidence * 100:g} % unless the row says otherwise) come from the "
             "paired per-round ratios.", ""]
    if c.preamble:
        lines += [c.preamble, ""]
    for p in c.pairs:
        lines += [f"## {p.b} (B) against {p.a} (A)", "",
                  "| metric | unit | A | B | B/A | CI | verdict |", "|---|---|---:|---:|---:|---|---|"]
        for m in p.metrics:
            e = m.estimate
            ratio, ci = ("–", "–") if e is None else (f"{e.ratio:.3f}", f"{e.lo:.3f}–{e.hi:.3f}")
            if e is not None and m.confidence != c.confidence:
                ci += f" ({m.confidence * 100:.4g} %)"
            lines.append(f"| {m.key} | {m.metric.unit} | {_num(_geomean(m.a), m.metric.unit)} | "
                         f"{_num(_geomean(m.b), m.metric.unit)} | {ratio} | {ci} | {m.verdict} |")
        lines.append("")
    lines += ["## Rounds", "", "| round | order | runs |", "|---:|---|---|"]
    for r in c.rounds:
        lines.append(f"| {r.number} | {' → '.join(r.order)} | {', '.join(f'{x.cluster}: {x.run_dir.name}' for x in r.runs)} |")
    if c.notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in c.notes)]
    lines += ["", f"Method: {c.method}", ""]
    return "\n".join(lines)


def write_files(c: Comparison) -> tuple[Path, Path]:
    """compare.json and compare.md in the comparison's folder."""
    try:
        (c.folder / "compare.json").write_text(json.dumps(c.to_json(), indent=2))
        (c.folder / "compare.md").write_text(markdown(c))
    except OSError as exc:
        raise SinkError(f"{c.folder}: cannot write the comparison ({exc.strerror or exc})") from None
    return c.folder / "compare.json", c.folder / "compare.md"
