"""The SLO rate search: the highest rate a cluster sustains within its latency target.

Each probe is a run of its own (one step at one rate, `rate_search.step` long) in the search's
folder, so every probe keeps the run layout the reduce already reads. Between probes the
coordinator decides from exact figures over that probe's samples (read back from its Parquet,
numpy's linear percentiles: the reduce's definitions, see docs/rate-search.md), then doubles
the rate until a probe fails and bisects between the last pass and the first fail until the
bracket is within the precision. A probe on which the load generator, not the broker, was the
limit (rbench.samples.generator) ends the search: a higher rate would measure the generator.
At the end the reduce runs once over every probe, with the SLO as its match rule, so the
report shows every probe and "highest matched" is the search's answer.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pyarrow.parquet as pq

from rbench.config.load import workload_hash
from rbench.config.model import RateSearch, Workload
from rbench.coordinator.options import Listening
from rbench.errors import SinkError
from rbench.samples.broker_facts import BrokerFacts
from rbench.samples.generator import judge
from rbench.samples.layout import committed_parts
from rbench.samples.record import read_run_record


@dataclass
class Probe:
    """One probe and what decided it."""

    rate: float                       # msg/s per producer
    target: float                     # msg/s in all (rate × producers)
    run_id: str
    consume_rate: float
    e2e_p99_ms: float | None
    send_lag_p99_ms: float | None
    passed: bool
    why: str
    generator: str | None = None


@dataclass
class Answer:
    """A cluster's search: its probes, the bracket and how it ended."""

    cluster: str
    probes: list[Probe] = field(default_factory=list)
    highest_pass: float | None = None     # msg/s in all
    first_fail: float | None = None
    ended_by: str = ""

    def line(self) -> str:
        n = len(self.probes)
        if self.highest_pass is None:
            # a first probe the generator could not carry ends the search with no failure the broker caused
            first = "" if self.first_fail is None else f" (first at {self.first_fail:,.0f} msg/s)"
            return f"{self.cluster}: no probe met the SLO{first}; {self.ended_by} ({n} probes)"
        if self.first_fail is None and self.ended_by.startswith("stopped"):
            return (f"{self.cluster}: highest rate that met the SLO {self.highest_pass:,.0f} msg/s; no failure the broker "
                    f"caused yet: {self.ended_by} ({n} probes)")
        if self.first_fail is None:
            return (f"{self.cluster}: capacity not reached: every probe met the SLO, up to {self.highest_pass:,.0f} msg/s; "
                    f"{self.ended_by} ({n} probes)")
        width = (self.first_fail - self.highest_pass) / self.highest_pass
        return (f"{self.cluster}: highest rate that met the SLO {self.highest_pass:,.0f} msg/s, first that failed "
                f"{self.first_fail:,.0f} msg/s (bracket {width:.1%}); {self.ended_by} ({n} probes)")


def _column(parts: list[str], names: list[str]) -> dict[str, np.ndarray]:
    tables = [pq.read_table(p, columns=names) for p in parts]
    return {n: np.concatenate([t.column(n).to_numpy() for t in tables]) if tables else np.empty(0, np.int64)
            for n in names}


def judge_probe(run_dir: Path, slo_p99_ms: float, consume_ratio: float, producers: int, rate: float) -> Probe:
    """Exact figures of a one-step run, and whether they meet the SLO."""
    record = read_run_record(run_dir)
    cluster = record.clusters[0]
    (step,) = cluster.steps
    if step.window is None:
        raise SinkError(f"{run_dir}: probe {record.run_id}: its one step has no window in run.json (it never ran)")
    start, hi = step.window
    lo = int(start + record.warmup_s * 1e9)
    window_s = max((hi - lo) / 1e9, 1e-9)
    run_id = record.run_id or run_dir.name
    counted = record.counted_attempts()
    con_parts, _ = committed_parts(run_dir, run_id, "consumed", [cluster.name], counted)
    pub_parts, _ = committed_parts(run_dir, run_id, "published", [cluster.name], counted)
    con = _column(con_parts, ["t_intended", "t_received"])
    pub = _column(pub_parts, ["t_intended", "t_sent"])
    received = con["t_received"]
    consume_rate = float(((received >= lo) & (received < hi)).sum()) / window_s
    measured = (con["t_intended"] >= lo) & (con["t_intended"] < hi)
    e2e = (received[measured] - con["t_intended"][measured]) / 1e6
    e2e_p99 = float(np.percentile(e2e, 99)) if e2e.size else None
    sent_measured = (pub["t_intended"] >= lo) & (pub["t_intended"] < hi)
    lag = (pub["t_sent"][sent_measured] - pub["t_intended"][sent_measured]) / 1e6
    lag_p99 = float(np.percentile(lag, 99)) if lag.size else None
    target = rate * producers
    figures = [r.self_check.get(0) for r in cluster.task_results]
    generator = judge([f for f in figures if f], lag_p99)
    reasons = []
    if consume_rate < consume_ratio * target:
        reasons.append(f"consumed {consume_rate:,.0f} msg/s < {consume_ratio:g} × {target:,.0f}")
    if e2e_p99 is None:
        reasons.append("no measured message was consumed")
    elif e2e_p99 > slo_p99_ms:
        reasons.append(f"e2e p99 {e2e_p99:,.1f} ms > {slo_p99_ms:g} ms")
    why = "; ".join(reasons) or f"consumed {consume_rate:,.0f} msg/s, e2e p99 {e2e_p99:,.2f} ms"
    return Probe(rate, target, run_id, consume_rate, e2e_p99, lag_p99, not reasons, why, generator)


def _bracket(passed: list[float], failed: list[float]) -> tuple[float | None, float | None]:
    """(last pass, first fail above it): the interval the answer lies in, per producer."""
    lo = max(passed, default=None)
    hi = min((f for f in failed if lo is None or f > lo), default=None)
    return lo, hi


def next_rate(search: RateSearch, passed: list[float], failed: list[float]) -> float | None:
    """The next probe's rate per producer, or None when the search is done (bracket or max)."""
    lo, hi = _bracket(passed, failed)
    if hi is None:
        if lo is None:
            return None                           # the first probe failed: nothing below to search
        if lo >= search.max:
            return None                           # met at max: capacity not reached
        return min(lo * 2, search.max)
    if lo is None:
        return None
    if (hi - lo) / lo <= search.precision:
        return None
    return (lo + hi) / 2


def search_cluster(workload: Workload, run_probe: Any, out: TextIO | None = None) -> Answer:
    """Probe one cluster's workload; ``run_probe(w)`` runs a one-step workload and returns its run directory."""
    rs = workload.rate_search
    assert rs is not None
    answer = Answer(workload.clusters[0].name)
    passed: list[float] = []
    failed: list[float] = []
    rate: float | None = rs.start
    while rate is not None:
        if len(answer.probes) >= rs.max_probes:
            answer.ended_by = f"stopped after max_probes ({rs.max_probes})"
            break
        probe_w = workload.model_copy(update={"rate_search": None, "rate": rate, "duration": rs.step})
        run_dir = Path(run_probe(probe_w))
        probe = judge_probe(run_dir, rs.slo.p99 * 1000.0, rs.slo.consume_ratio, workload.producers, rate)
        answer.probes.append(probe)
        verdict = "met the SLO" if probe.passed else "failed"
        print(f"rbench: rate search {answer.cluster}: probe {len(answer.probes)} at {probe.target:,.0f} msg/s "
              f"({rate:g}/producer) {verdict}: {probe.why}", file=out, flush=True)
        if probe.generator is not None:
            answer.ended_by = (f"stopped: at {probe.target:,.0f} msg/s {probe.generator}; a higher rate would measure the "
                               f"generator, not the broker")
            if probe.passed:
                passed.append(rate)
            break
        (passed if probe.passed else failed).append(rate)
        rate = next_rate(rs, passed, failed)
        if rate is None:
            answer.ended_by = ("bracket within the precision" if passed and failed else
                               "the first probe failed" if not passed else f"met at max ({rs.max:g}/producer)")
    lo, hi = _bracket(passed, failed)
    answer.highest_pass = None if lo is None else lo * workload.producers
    answer.first_fail = None if hi is None else hi * workload.producers
    return answer


def search_doc(answers: list[Answer], workload: Workload, status: str = "complete") -> dict[str, Any]:
    """What search.json holds: the search's settings, every probe and each cluster's answer.

    ``workload_hash`` is the searching workload's (each probe's run.json holds its own probe's,
    which changes with the rate), so that the history compares a search with the nights that ran
    the same search; ``status`` is "complete" unless a probe stopped the search (interrupt)."""
    rs = workload.rate_search
    assert rs is not None
    return {"workload_name": workload.name, "workload_hash": workload_hash(workload), "status": status,
            "rate_search": rs.model_dump(mode="json"),
            "clusters": [{**asdict(a), "answer": a.line()} for a in answers]}


def write_search(folder: Path, doc: dict[str, Any]) -> Path:
    """search.json (``search_doc``) beside the probes' run directories (the reduce keeps a copy in leaderboard.json)."""
    path = folder / "search.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


@dataclass(frozen=True)
class SearchRun:
    """What the probes of a search left: its folder, the probes' run directories, each cluster's answer."""

    folder: Path
    probes: tuple[Path, ...]
    answers: tuple[Answer, ...]
    doc: dict[str, Any] | None            # search.json as written; None when no cluster has an answer
    stopped: str | None                   # the status of the probe that ended the search early, if one did


class ProbeStopped(Exception):
    """A probe did not complete (interrupt, failure): the search ends there."""


def run_search(workload: Workload, out_root: str | Path, session: Any, tasks: int | None, progress: bool,
               queues_created: dict[str, list[str]], brokers: Mapping[str, BrokerFacts] | None = None,
               listening: Listening | None = None) -> SearchRun:
    """Search every cluster in turn, each probe a run of its own in OUT/<run_id>-search/; write search.json.
    ``brokers``: what each probe's run.json records it ran on (rbench.coordinator.broker_facts)."""
    from rbench.coordinator.run import run_workload
    from rbench.samples.runinfo import new_run_id

    folder = Path(out_root) / f"{new_run_id(workload.name)}-search"
    probes: list[Path] = []

    def run_probe(w: Workload) -> Path:
        result = run_workload(w, folder, session, tasks=tasks, progress=progress, queues_created=queues_created,
                              brokers=brokers, listening=listening)
        probes.append(result.run_dir)
        if result.status != "complete":
            raise ProbeStopped(result.status)
        return result.run_dir

    answers = []
    stopped: str | None = None
    print(f"rbench: rate search → {folder}", flush=True)
    for cluster in workload.clusters:
        try:
            answers.append(search_cluster(workload.model_copy(update={"clusters": [cluster]}), run_probe))
        except ProbeStopped as exc:
            stopped = str(exc)
            break
    doc = None
    if answers:
        doc = search_doc(answers, workload, stopped or "complete")
        write_search(folder, doc)
    return SearchRun(folder, tuple(probes), tuple(answers), doc, stopped)
