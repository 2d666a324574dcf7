"""`rbench compare --amqp10`: the quiver-style AMQP 1.0 send/receive on two or more brokers, in interleaved rounds.

Each side of a round is one `rbench amqp10` run (rbench.scenarios.quiver: a sender and a receiver
process on this machine, a fresh queue declared and deleted around it), written as that command's
``--output`` (summary.json, samples.parquet) to a folder per round and side inside the comparison's.
The figures are the ones its RESULTS block prints, from the same QuiverResult.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from rbench.compare.metrics import Figure, Metric
from rbench.compare.result import Compared, Comparison, compare_pairs, method
from rbench.compare.rounds import Round, RoundRun, RoundsRun, SideRun, interleaved
from rbench.compare.stats import CONFIDENCE
from rbench.compare.targets import Target, file_safe
from rbench.errors import RbenchError
from rbench.scenarios.quiver import QuiverOptions, QuiverResult
from rbench.scenarios.quiver import run as run_quiver
from rbench.scenarios.quiver_output import write_outputs

METRICS: tuple[Metric, ...] = (
    Metric("end_to_end_rate", "end-to-end rate", "msg/s", "higher", None, "rate"),
    Metric("sender_rate", "sender rate", "msg/s", "higher", None, "rate"),
    Metric("receiver_rate", "receiver rate", "msg/s", "higher", None, "rate"),
    Metric("latency_p50_ms", "latency p50", "ms", "lower", None, "latency"),
    Metric("latency_p99_ms", "latency p99", "ms", "lower", None, "latency"),
    Metric("latency_p999_ms", "latency p99.9", "ms", "lower", None, "latency"),
    Metric("client_cpu_us_per_msg", "client CPU per message", "µs/msg", "lower", None, "cost"),
)
_PERCENTILE = {"latency_p50_ms": "50%", "latency_p99_ms": "99%", "latency_p999_ms": "99.9%"}
SOURCES = ("Figures: each run's RESULTS block (rbench.scenarios.quiver): end-to-end rate = messages received ÷ (the "
           "last receipt − the first send); sender rate = messages sent ÷ (the last settlement − the first send); "
           "receiver rate = messages received ÷ (the last − the first receipt); latency percentiles: exact over every "
           "message after --warmup of received − intended (the send time in closed loop), µs resolution; client CPU "
           "per message: getrusage user + system of the sender process ÷ messages sent, plus the receiver's ÷ "
           "messages received. A rate's resolution is ±1 message of its count.")


def result_figures(r: QuiverResult) -> dict[str, Figure]:
    """One run's figures, by compared name."""
    def rate(value: float, count: int) -> Figure:
        return Figure(value if count else None, 1.0 / count if count else 0.0)

    out = {"end_to_end_rate": rate(r.end_to_end_rate, r.receiver.count),
           "sender_rate": rate(r.sender.rate, r.sender.count),
           "receiver_rate": rate(r.receiver.rate, r.receiver.count)}
    for name, pct in _PERCENTILE.items():
        v = r.latency_ms.get(pct)
        out[name] = Figure(v if v is not None and math.isfinite(v) else None)
    cpu = r.sender.cpu_us_per_msg + r.receiver.cpu_us_per_msg
    out["client_cpu_us_per_msg"] = Figure(cpu if math.isfinite(cpu) else None)
    return out


@dataclass(frozen=True)
class Amqp10Rounds:
    """The rounds that ran and each side's figures."""

    ran: RoundsRun
    figures: dict[tuple[int, str], dict[str, Figure]]


def run_amqp10_rounds(options: dict[str, QuiverOptions], rounds: int, folder: Path,
                      line: Callable[[str], None], out: TextIO | None = None) -> Amqp10Rounds:
    """Every round in its order, each side one send/receive; a run that lost messages or failed stops the rounds."""
    figures: dict[tuple[int, str], dict[str, Figure]] = {}

    def run_one(number: int, name: str) -> SideRun:
        where = folder / f"round{number}-{file_safe(name)}"
        try:
            result = run_quiver(options[name], line=line)
        except RbenchError as exc:
            return SideRun(RoundRun(number, name, where, "failed", None), str(exc), 3)
        except KeyboardInterrupt:                 # the run stopped its processes and deleted its queue
            return SideRun(RoundRun(number, name, where, "interrupted", None), "interrupted", 130)
        write_outputs(result, where)
        line(result.results_block())
        lost = result.sender.count - result.receiver.count
        if lost > 0:
            return SideRun(RoundRun(number, name, where, "lost", None),
                           f"{lost:,} of {result.sender.count:,} messages were not received", 1)
        figures[(number, name)] = result_figures(result)
        return SideRun(RoundRun(number, name, where, "complete", None))

    return Amqp10Rounds(interleaved(list(options), rounds, run_one, out, what="broker"), figures)


def describe(o: QuiverOptions) -> str:
    """The run's shape, as the command line would say it."""
    size = f"--count {o.count}" if o.count else f"--duration {o.duration:g}"
    rate = f", --rate {o.rate:g}" if o.rate else ""
    return (f"{size}, --body-size {o.body_size}, --credit {o.credit}, --window {o.window}, {o.settlement}"
            f"{', durable' if o.durable else ''}{rate}")


def analyse_amqp10(folder: Path, targets: tuple[Target, ...], options: QuiverOptions, rounds: tuple[Round, ...],
                   runs: Amqp10Rounds, confidence: float = CONFIDENCE) -> Comparison:
    """Each broker after the first against the first, per metric."""
    sides = [t.name for t in targets]
    pairs = compare_pairs(sides, rounds, runs.figures, [Compared(m.name, m, (), confidence) for m in METRICS])
    return Comparison(f"amqp10 ({describe(options)})", folder, tuple(sides), rounds, pairs, (),
                      method("one `rbench amqp10` send/receive (a sender and a receiver process, a fresh queue) on "
                             "one broker", "metric", SOURCES), confidence=confidence, mode="amqp10")
