"""Messages delivered more than once (re-reads and redeliveries): counted once, and said where they count.

Why this exists: the whole-run ``consumed`` a run prints is the tasks' delivery count, so every copy of a
message counts there; the step figures count each measured message once (``consumed_unique``) and the ones
delivered more than once as ``duplicated``; a copy of a message due outside every measurement window (the
warm-up, the producers' start, the tail after a message count) is in neither. A stream single-active member
taking over re-reads what the group had not stored (rbench.drivers.stream_consumer; a stream's consumers outside
such a group each read every message for themselves, so their copies are not re-reads), and an AMQP consumer
that closes or loses its connection gets its unacked messages requeued and redelivered, so "consumed 5,039 of
5,000, duplicated 0" is possible and reads as a contradiction. This module reconciles the two figures from the
message pass's whole-run counts (rbench.reduce.message_checks, WHOLE_GROUP): how many deliveries came again,
how many of those were of measured messages (in ``duplicated``) and how many of the others (nowhere else), and
how many the broker flagged ``redelivered``: the summary, the report's notes. Pure Python.
"""
from __future__ import annotations

from typing import Any, TextIO

from rbench.reduce import cluster_notes

Row = dict[str, Any]

# per (run, cluster), over every fresh delivery of its run (stale ones excluded): clusters.csv, leaderboard.json
WHOLE_RUN = ("run_deliveries", "run_consumed_unique", "run_duplicated", "run_redelivered")
MEANING = ("a delivery of a message its reader already had (a reader: the consumers of a queue together, or one "
           "consumer of a stream outside a single-active group, which reads every message for itself): a stream read "
           "twice (a single-active member taking over starts after the offset its group stored, so it re-reads what "
           "the previous member handled but had not stored) or an AMQP redelivery (messages a consumer held unacked "
           "when it closed or lost its connection, requeued and delivered again)")
METHOD = ("delivered again = the run's fresh deliveries less the distinct messages among them (per producer, "
          "sequence number, queue and reader); of measured messages = each step's measured deliveries less its "
          "consumed_unique, counted in duplicated; the rest are copies of messages due outside every measurement "
          "window (warm-up, start, tail), counted in no step figure; flagged = deliveries with the broker's "
          "redelivered flag (AMQP; streams have none)")


def whole_run(counts: dict[str, int]) -> Row:
    """The message pass's WHOLE_GROUP counts of one (run, cluster) under the WHOLE_RUN names."""
    return {"run_deliveries": counts.get("deliveries", 0), "run_consumed_unique": counts.get("consumed_unique", 0),
            "run_duplicated": counts.get("duplicated", 0), "run_redelivered": counts.get("redelivered", 0)}


def split(runs: list[Row], steps: list[Row]) -> tuple[int, int, int, int] | None:
    """(delivered again, of them of measured messages, measured messages delivered more than once, flagged
    redelivered) over ``runs`` (rows of the reduce's clusters table) and their ``steps``; None when the runs
    carry no whole-run counts (a reduce older than them)."""
    known = [r for r in runs if r.get("run_deliveries") is not None]
    if not known:
        return None
    again = sum(int(r["run_deliveries"]) - int(r["run_consumed_unique"] or 0) for r in known)
    flagged = sum(int(r.get("run_redelivered") or 0) for r in known)
    measured = sum(int(s.get("deliveries") or 0) - int(s.get("consumed_unique") or 0) for s in steps)
    duplicated = sum(int(s.get("duplicated") or 0) for s in steps)
    return again, measured, duplicated, flagged


def cluster_line(cluster: str, runs: list[Row], steps: list[Row]) -> str | None:
    """The summary's line for one cluster: where the copies went. None when every delivery was a first one."""
    got = split(runs, steps)
    if got is None:
        return None
    again, measured, duplicated, flagged = got
    if again == 0 and flagged == 0:
        return None
    outside = again - measured
    flags = (f"; the broker flagged {flagged:,} deliveries redelivered" if flagged else
             "; none flagged redelivered by the broker")
    return (f"{cluster}, delivered again: {again:,} of the whole run's deliveries ({MEANING}){flags}. Of them {measured:,} "
            f"of measured messages, counted in duplicated ({duplicated:,} measured message(s) delivered more than "
            f"once; each copy's latency is in the percentiles), and {outside:,} of messages due outside every "
            f"measurement window (warm-up, start, tail), counted in no step figure")


def notes(clusters: list[Row], steps: list[Row]) -> list[str]:
    """The report's notes: one per (run, cluster) where some delivery came again."""
    return cluster_notes.notes(cluster_line, clusters, steps)


def print_cluster(cluster: str, reduced: Any, out: TextIO | None = None) -> None:
    """Print ``cluster_line`` for one cluster of a ReduceResult (nothing without a reduce or anything to say)."""
    cluster_notes.print_cluster(cluster_line, cluster, reduced, out)
