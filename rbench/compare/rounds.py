"""The rounds of a comparison: which cluster runs when, each as a full run of the one run sequence.

A round runs every cluster of the workload once, one cluster at a time (its own run directory,
Parquet and reduce under the comparison's folder); the order alternates A B, B A, A B … (ABBA
for two clusters; for more, forward then reversed), so a broker that warms up, a page cache that
fills or a neighbour that gets busier over the minutes favours neither side on average, and each
round's A and B ran next to each other, which the paired analysis (rbench.compare.stats) relies on.
"""
from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from rbench.config.model import Workload
from rbench.coordinator.options import RunOptions
from rbench.coordinator.sequence import run_sequence
from rbench.errors import ConfigError, SinkError
from rbench.reduce.job import ReduceResult


@dataclass(frozen=True)
class RoundRun:
    """One cluster's run in one round: where it went and what its reduce reported."""

    round: int                  # counted from 1
    cluster: str
    run_dir: Path
    status: str
    reduced: ReduceResult | None

    def to_json(self) -> dict[str, object]:
        return {"cluster": self.cluster, "run_dir": str(self.run_dir), "run_id": self.run_dir.name, "status": self.status}


@dataclass(frozen=True)
class Round:
    """One round: the order its clusters ran in, and their runs in that order."""

    number: int
    order: tuple[str, ...]
    runs: tuple[RoundRun, ...]

    def to_json(self) -> dict[str, object]:
        return {"round": self.number, "order": list(self.order), "runs": [r.to_json() for r in self.runs]}


@dataclass(frozen=True)
class RoundsRun:
    """The rounds that ran, and why they stopped early (None: all ran, each complete)."""

    rounds: tuple[Round, ...]
    stopped: str | None = None
    exit_code: int = 0


def order_of(round_number: int, clusters: list[str]) -> tuple[str, ...]:
    """The clusters in round ``round_number`` (from 1): as listed in odd rounds, reversed in even ones."""
    return tuple(clusters if round_number % 2 == 1 else reversed(clusters))


def check_rounds(rounds: int) -> None:
    """Two rounds at least: a confidence interval needs two pairs."""
    if rounds < 2:
        raise ConfigError(f"--rounds: expected at least 2 (a confidence interval needs 2 pairs; 4-6 is useful), got {rounds}")


def check_comparable(workload: Workload, rounds: int) -> None:
    """One line for what a comparison cannot be made of, before any load is sent."""
    if len(workload.clusters) < 2:
        raise ConfigError(f"clusters: compare needs a workload with at least 2 clusters (A, B …); "
                          f"{workload.name} has {len(workload.clusters)}")
    check_rounds(rounds)
    if workload.rate_search is not None:
        raise ConfigError("rate_search: compare runs a fixed schedule; drop rate_search and give rate or rate_steps")


def single_cluster(workload: Workload, name: str) -> Workload:
    """The workload with only cluster ``name`` (and the faults that act on it): one side of a round.

    A model copy of an already validated workload: dropping clusters cannot break a rule, except faults
    that name another cluster, which go with it."""
    (cluster,) = [c for c in workload.clusters if c.name == name]
    faults = [f for f in workload.faults if f.cluster in (None, name)]
    return workload.model_copy(update={"clusters": [cluster], "faults": faults})


def new_folder(out: str, name: str) -> Path:
    """OUT/<UTC time>-<name>-compare/, created (SinkError naming it when it cannot be)."""
    folder = Path(out).resolve() / f"{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}-{name}-compare"
    try:
        folder.mkdir(parents=True, exist_ok=False)
    except OSError as exc:
        raise SinkError(f"--out: cannot create the comparison's folder {folder} ({exc.strerror or exc})") from None
    return folder


@dataclass(frozen=True)
class SideRun:
    """What running one side once gave: its record in the round, and why it cannot count (None: it can)."""

    run: RoundRun
    problem: str | None = None
    exit_code: int = 0


def interleaved(names: list[str], rounds: int, run_one: Callable[[int, str], SideRun],
                out: TextIO | None = None, what: str = "cluster") -> RoundsRun:
    """Every round in its order (``order_of``), ``run_one(round, name)`` for each side.

    Stops at the first side that did not end complete (interrupted, failed, nothing measured): the rounds
    before it are kept, and the reason is returned rather than compared over a half-measured round."""
    done: list[Round] = []
    for number in range(1, rounds + 1):
        order = order_of(number, names)
        runs: list[RoundRun] = []
        for name in order:
            print(f"\ncompare: round {number}/{rounds}, {what} {name} ({' → '.join(order)})", file=out or sys.stdout,
                  flush=True)
            side = run_one(number, name)
            runs.append(side.run)
            if side.problem is not None:
                return RoundsRun(tuple(done), f"round {number}, {what} {name}: {side.problem} ({side.run.run_dir}); "
                                              f"{len(done)} complete round(s) kept", side.exit_code or 3)
        done.append(Round(number, order, tuple(runs)))
    return RoundsRun(tuple(done))


def run_rounds(workload: Workload, options: RunOptions, rounds: int, folder: Path,
               out: TextIO | None = None) -> RoundsRun:
    """Every round in its order, each cluster through the one run sequence with ``folder`` as its results root."""
    options = replace(options, out=str(folder), no_reduce=False)

    def run_one(number: int, name: str) -> SideRun:
        outcome = run_sequence(single_cluster(workload, name), options, app="compare")
        run = RoundRun(number, name, outcome.run_dir, outcome.status, outcome.reduced)
        if not outcome.complete or outcome.reduced is None:
            return SideRun(run, outcome.problem or f"the run ended {outcome.status}", outcome.exit_code or 3)
        return SideRun(run)

    return interleaved([c.name for c in workload.clusters], rounds, run_one, out)
