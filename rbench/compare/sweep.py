"""`rbench compare --scalability`: the routing sweep on two or more brokers, in interleaved rounds, per level.

Each side of a round is one whole sweep (rbench.scenarios.scalability: its own run directory, Parquet,
sweep.json and report, inside the comparison's folder). A round's figure for a phase and level is the
one the sweep's own table prints for it (``output.summary``: µs per queue created or deleted at that
level, marginal; µs per message per bound queue routed; µs per unroutable baseline publish; the median
over ``--repeat``), so the comparison and the sweep's report never disagree.

Two kinds of row per phase:

- **all levels**: the round's geometric mean over every level of the sweep, so B/A is the mean of the
  levels' log-ratios: "does this phase cost B more, across the sweep?". One interval per phase, at 95 %,
  as one metric of a workload comparison.
- **per level** (``create@q4k2``: 4 queues with 2 bindings each): a sweep has tens of levels, and at 95 %
  each, one in twenty would show a difference between a broker and itself. The per-level intervals of a
  phase are therefore simultaneous: each at 1 − 0.05/L for the phase's L levels (Bonferroni), so that
  together they wrongly show a difference at most 5 % of the time. They are wide with few rounds; the
  "all levels" row is the one to read first.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from rbench.compare.metrics import Figure, Metric
from rbench.compare.result import Compared, Comparison, compare_pairs, method
from rbench.compare.rounds import Round, RoundRun, RoundsRun, SideRun, interleaved
from rbench.compare.stats import CONFIDENCE
from rbench.compare.targets import Target
from rbench.errors import RbenchError
from rbench.scenarios.scalability.output import summary
from rbench.scenarios.scalability.plan import Level, SweepSpec, series_levels

PHASES: tuple[Metric, ...] = (
    Metric("create", "create, per queue with its bindings (marginal)", "µs/queue", "lower", None, "cost"),
    Metric("route", "route, per message per bound queue", "µs/msg/queue", "lower", None, "cost"),
    Metric("baseline", "unroutable publish (baseline)", "µs/msg", "lower", None, "cost"),
    Metric("delete", "delete, per queue with its bindings (marginal)", "µs/queue", "lower", None, "cost"),
)
SOURCES = ("Figures: each sweep's own per-level table (rbench.scenarios.scalability.output.summary, the median over "
           "--repeat): create and delete are the wall time of the level's barrier stage (slowest task) ÷ the queues "
           "it added or removed; route is the time to the last confirm of n mandatory publishes ÷ (n × queues); "
           "baseline the same n publishes to an exchange with no bindings ÷ n (docs/scalability.md). 'all levels' is "
           "each round's geometric mean over the levels; per-level intervals are simultaneous over a phase's levels "
           "(Bonferroni: each at 1 − (1 − confidence)/levels).")
PREAMBLE = ("Each side of a round is one whole sweep. Per phase, the first row (`create`, `route` …) is the geometric "
            "mean over every level of the sweep, at the comparison's confidence: read it first. The rows `PHASE@qQkK` are one level each "
            "(Q queues, K bindings per queue); their intervals hold together over the phase's levels (Bonferroni), "
            "so each is at a higher confidence and wider.")


def level_key(phase: str, queues: int, bindings: int) -> str:
    """A per-level figure's name in compare.json: ``create@q4k2``."""
    return f"{phase}@q{queues}k{bindings}"


def levels_of(spec: SweepSpec) -> list[Level]:
    """Every level the sweep visits, in the order of its table (by bindings, then queues)."""
    return sorted((lv for series in series_levels(spec) for lv in series), key=lambda lv: (lv.bindings, lv.queues))


def compared(spec: SweepSpec, confidence: float = CONFIDENCE) -> list[Compared]:
    """Per phase: the all-levels row at ``confidence``, then one row per level, simultaneous over the phase's levels."""
    levels = levels_of(spec)
    each = 1 - (1 - confidence) / len(levels)
    out: list[Compared] = []
    for m in PHASES:
        out.append(Compared(m.name, m, (), confidence))
        out += [Compared(level_key(m.name, lv.queues, lv.bindings), m,
                         (("queues", lv.queues), ("bindings", lv.bindings)), each) for lv in levels]
    return out


def _positive(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None


def sweep_figures(rows: list[dict[str, Any]], spec: SweepSpec) -> dict[str, Figure]:
    """One sweep's figures: per phase and level (its table's median), and per phase over all levels (geometric mean;
    None unless every level of the sweep measured it)."""
    table = {(lv["queues"], lv["bindings"]): lv for lv in summary(rows)}
    out: dict[str, Figure] = {}
    for m in PHASES:
        values = []
        for lv in levels_of(spec):
            v = _positive(table.get((lv.queues, lv.bindings), {}).get(m.name))
            out[level_key(m.name, lv.queues, lv.bindings)] = Figure(v)
            values.append(v)
        whole = None if not values or None in values else math.exp(sum(math.log(v) for v in values if v) / len(values))
        out[m.name] = Figure(whole)
    return out


@dataclasses.dataclass(frozen=True)
class SweepRounds:
    """The rounds that ran, each side's figures, and what the sweeps noted."""

    ran: RoundsRun
    figures: dict[tuple[int, str], dict[str, Figure]]
    notes: tuple[str, ...]


Runner = Callable[[SweepSpec], Any]      # spec → SweepResult (the sweep run on the comparison's Spark session)


def run_sweep_rounds(specs: dict[str, SweepSpec], rounds: int, run_sweep: Runner, folder: Path,
                     out: TextIO | None = None) -> SweepRounds:
    """Every round in its order, each side one whole sweep; a sweep that does not end complete (a memory alarm, a
    broker that went away: its one line) stops the rounds, and the rounds before it are kept."""
    figures: dict[tuple[int, str], dict[str, Figure]] = {}
    notes: list[str] = []

    def run_one(number: int, name: str) -> SideRun:
        spec = specs[name]
        try:
            result = run_sweep(spec)
        except RbenchError as exc:
            return SideRun(RoundRun(number, name, folder, "failed", None), str(exc), 3)
        except KeyboardInterrupt:                 # the sweep cleaned up; the rounds before it are still compared
            return SideRun(RoundRun(number, name, folder, "interrupted", None), "interrupted", 130)
        run = RoundRun(number, name, result.run_dir, result.status, None)
        notes.extend(f"round {number}, {name}: {n}" for n in result.notes)
        if result.status != "complete":
            return SideRun(run, f"the sweep ended {result.status}", 3)
        figures[(number, name)] = sweep_figures(result.rows, spec)
        return SideRun(run)

    ran = interleaved(list(specs), rounds, run_one, out, what="broker")
    return SweepRounds(ran, figures, tuple(notes))


def analyse_sweeps(folder: Path, targets: tuple[Target, ...], spec: SweepSpec, rounds: tuple[Round, ...],
                   swept: SweepRounds, confidence: float = CONFIDENCE) -> Comparison:
    """Each broker after the first against the first, per phase over all levels and per level."""
    sides = [t.name for t in targets]
    pairs = compare_pairs(sides, rounds, swept.figures, compared(spec, confidence))
    shape = (f"-b {spec.base} -x {spec.x} -y {spec.y} -c {spec.effective_cap} -n {spec.messages}, "
             f"{spec.exchange_type} exchange, {spec.tasks} task(s), repeat {spec.repeat}")
    return Comparison(f"scalability ({shape})", folder, tuple(sides), rounds, pairs, swept.notes,
                      method("one whole routing sweep of one broker", "phase and level", SOURCES),
                      confidence=confidence, mode="scalability", preamble=PREAMBLE)


def target_specs(base: SweepSpec, targets: tuple[Target, ...], prometheus: list[str]) -> dict[str, SweepSpec]:
    """The sweep for each broker: the same shape, its URL, its Prometheus (given in --uri order, or the guess) and
    its name as the sweep's label."""
    return {t.name: dataclasses.replace(base, uri=t.uri, prometheus=prometheus[i] if prometheus else None,
                                        label=t.name) for i, t in enumerate(targets)}
