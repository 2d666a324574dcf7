"""What each fault of a run cost: one row per fault of run.json (docs/reduce.md, "Faults").

Nothing here scans samples: the per-second counts are the timeline's (plus the ack confirms per second
the counting pass adds for faulted clusters), the message fates come from the message pass
(rbench.reduce.fault_counts.FaultCounts), the rules from rbench.reduce.recovery and the clients' reconnects
from run.json (its typed record, rbench.samples.record). A run without faults gets no rows, no files and no section.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from rbench.errors import SinkError
from rbench.reduce.fault_counts import FaultCounts
from rbench.reduce.load import RunMeta
from rbench.reduce.plan import MAX_FAULTS
from rbench.reduce.recovery import (
    BACK_SECONDS,
    BACK_SHARE,
    FAULT_AFTER_S,
    FAULT_BEFORE_S,
    SECOND_NS,
    consume_recovery,
    fault_window,
)
from rbench.samples.conventions import shown_step
from rbench.samples.faults import FaultRecord
from rbench.samples.reconnects import Reconnect
from rbench.samples.record import ClusterRecord

FATES = ("lost", "connection_lost", "connection_lost_consumed", "duplicated", "reordered", "redelivered")
# (column, type, how it is measured): faults.csv/json columns in order; the report prints the method beside each figure
FIGURES: list[tuple[str, pa.DataType, str]] = [
    ("run_id", pa.string(), "run"),
    ("cluster", pa.string(), "cluster the fault was executed on"),
    ("index", pa.int32(), "the fault's index in run.json faults (0-based; printed as fault index + 1)"),
    ("action", pa.string(), "kill, stop, pause or restart (run.json faults[].action)"),
    ("node", pa.string(), "the node acted on"),
    ("ok", pa.bool_(), "whether the action succeeded (run.json faults[].ok)"),
    ("error", pa.string(), "why the action failed (run.json faults[].error)"),
    ("step", pa.int32(), "the step whose window [start, end) holds the fault's start (0-based; printed + 1)"),
    ("at_s", pa.float64(), "fault start (t_start_ns) in s since the cluster's t0"),
    ("end_s", pa.float64(), "end of the action (t_end_ns): the node is down, stopped or paused from here"),
    ("back_start_s", pa.float64(), "restart or resume began (t_back_start_ns); empty when the node was not brought back"),
    ("back_s", pa.float64(), "the node was back (t_back_end_ns); empty when it was not brought back during the run"),
    ("first_confirm_s", pa.float64(), "time from the fault taking effect (t_end_ns: the action done, the node down) "
     "to the first ack confirm after it: the smallest t_confirmed of a published row with outcome ack and "
     "t_confirmed > t_end_ns, minus t_end_ns; empty when none came"),
    ("first_confirm_note", pa.string(), "why first_confirm_s is empty"),
    ("baseline_consume_rate", pa.float64(), "pre-fault mean consume rate (msg/s): deliveries per whole second (by "
     "t_received, 1 s buckets since t0) over the step's measured seconds before the fault; the warm-up, the partial "
     "second holding the fault and seconds an earlier fault disturbed (from its start through its "
     f"{BACK_SECONDS} recovery seconds, or to its step's end when its rate was not back) are left out"),
    ("baseline_seconds", pa.int32(), "whole seconds averaged into the pre-fault mean"),
    ("consume_back", pa.bool_(), f"whether the consume rate was ever back: {BACK_SECONDS} consecutive whole seconds "
     f"after the fault, inside its step, each ≥ {BACK_SHARE:.0%} of the pre-fault mean (catching up a backlog above "
     "the mean counts); empty when it cannot be told (see recovery_note)"),
    ("consume_back_s", pa.float64(), "recovery time: from the fault's start (t_start_ns) to the start of the first "
     f"such run of {BACK_SECONDS} seconds (1 s resolution: a fault without visible effect shows the time to the next "
     "second boundary)"),
    ("consume_lowest_rate", pa.float64(), "lowest whole-second consume rate after the fault, up to the end of the "
     "recovery run (or of the step when the rate was not back)"),
    ("recovery_note", pa.string(), "why consume_back or the pre-fault mean is empty or no"),
    ("window_start_s", pa.float64(), f"fault window start: {FAULT_BEFORE_S:g} s before the fault (s since t0); "
     "messages belong to a fault window by t_sent"),
    ("window_end_s", pa.float64(), f"fault window end: {FAULT_AFTER_S:g} s after the node was back (after the end "
     "of the cluster's load when it never came back)"),
    ("lost", pa.int64(), "expected copies of messages sent in the window with outcome ack (or unconfirmed, confirms "
     "off) that no consumer of their queue (their reader: each plain consumer of a stream) received at any time in "
     "the run (the per-step definition; must be 0 for quorum queues with confirms)"),
    ("connection_lost", pa.int64(), "messages sent in the window with outcome connection_lost: in flight when their "
     "connection died, never confirmed and never re-sent"),
    ("connection_lost_consumed", pa.int64(), "of those, messages a consumer received anyway (on any queue): delivered, "
     "not lost"),
    ("duplicated", pa.int64(), "copies (same producer + seq on the same queue, for the same reader) sent in the window "
     "and received more than once"),
    ("reordered", pa.int64(), "deliveries of messages sent in the window whose seq is lower than one already received "
     "by the same consumer from the same producer on the same queue (receive order t_received, ties by seq)"),
    ("redelivered", pa.int64(), "deliveries of messages sent in the window that the broker flagged redelivered"),
    ("run_lost", pa.int64(), "lost over the whole run: every message of the cluster, warm-ups included"),
    ("run_connection_lost", pa.int64(), "connection_lost messages over the whole run"),
    ("run_connection_lost_consumed", pa.int64(), "of those, received anyway"),
    ("run_duplicated", pa.int64(), "duplicated over the whole run"),
    ("run_reordered", pa.int64(), "reordered over the whole run"),
    ("run_redelivered", pa.int64(), "redelivered over the whole run"),
    ("reconnects", pa.int64(), "client connections lost in the window (run.json reconnects, by t_lost_ns)"),
    ("reconnects_not_back", pa.int64(), "of those, connections not back by the end of the run"),
    ("reconnect_max_s", pa.float64(), "longest client reconnect in the window: t_back_ns − t_lost_ns"),
    ("in_flight_reported", pa.int64(), "messages the clients reported in flight at those cuts (compare "
     "connection_lost)"),
    ("skipped", pa.int64(), "schedule slots the clients skipped while disconnected (not published, not counted lost)"),
    ("run_reconnect_max_s", pa.float64(), "longest client reconnect over the whole run"),
    ("t_start_ns", pa.int64(), "run.json faults[].t_start_ns"),
    ("t_end_ns", pa.int64(), "run.json faults[].t_end_ns"),
    ("t_back_start_ns", pa.int64(), "run.json faults[].t_back_start_ns"),
    ("t_back_end_ns", pa.int64(), "run.json faults[].t_back_end_ns"),
    ("first_confirm_ns", pa.int64(), "t_confirmed of that first ack confirm"),
    ("consume_back_ns", pa.int64(), "start of the recovery run of seconds (ns)"),
    ("window_start_ns", pa.int64(), "fault window [start, end) in ns"),
    ("window_end_ns", pa.int64(), "fault window end in ns"),
]
METHOD = {name: how for name, _, how in FIGURES}
FAULT_SCHEMA = pa.schema([(name, kind) for name, kind, _ in FIGURES])
SERIES_METHOD = (f"per-second counts from {FAULT_BEFORE_S:g} s before the fault to {FAULT_AFTER_S:g} s after the node "
                 "was back (the fault window, up to the cluster's last second with a message), in the reduce's 1 s "
                 "buckets since the cluster's t0: published by t_sent (any outcome), "
                 "confirmed = outcome ack by t_confirmed, consumed by t_received (stale deliveries excluded)")
RULES = (f"fault window: {FAULT_BEFORE_S:g} s before the fault's start to {FAULT_AFTER_S:g} s after the node was back; "
         f"consume rate back: {BACK_SECONDS} consecutive whole seconds inside the fault's step at ≥ {BACK_SHARE:.0%} of "
         "the pre-fault mean (the step's measured whole seconds before the fault); recovery time from the fault's start "
         "to the start of those seconds")


def _s(t_ns: int | None, t0: int) -> float | None:
    return None if t_ns is None else (t_ns - t0) / 1e9


def fault_figures(runs: list[RunMeta], steps: list[dict[str, Any]], timeline: list[dict[str, Any]],
                  counts: FaultCounts | None) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per fault of the runs' run.json (FIGURES, plus ``series``: the per-second counts around it),
    in (run, cluster, fault start) order, and the notes on faults that could not be measured."""
    counts = counts or FaultCounts()
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for run in runs:
        faults = run.record.faults
        if not faults:
            continue
        clusters = {c.name: c for c in run.clusters}
        for name in sorted({f.cluster for f in faults}):
            mine = sorted((f for f in faults if f.cluster == name), key=lambda f: (f.t_start_ns, f.index))
            c = clusters.get(name)
            windows = [s for s in steps if s["run_id"] == run.run_id and s["cluster"] == name]
            if c is None or not windows:
                why = "is not a cluster of the run" if c is None else "has no step window in the run"
                notes.append(f"{run.run_id}: faults on cluster {name}: the cluster {why}; no fault figures")
                continue
            if len(mine) > MAX_FAULTS:
                notes.append(f"{run.run_id}: cluster {name}: {len(mine)} faults; message fates only for the first "
                             f"{MAX_FAULTS} by index")
            t0 = c.t0_ns if c.t0_ns is not None else min(int(s["start_ns"]) for s in windows)
            rows += _cluster_rows(run, c, t0, mine, windows, timeline, counts, notes)
    return rows, notes


def _cluster_rows(run: RunMeta, c: ClusterRecord, t0: int, faults: list[FaultRecord], windows: list[dict[str, Any]],
                  timeline: list[dict[str, Any]], counts: FaultCounts, notes: list[str]) -> list[dict[str, Any]]:
    cluster = c.name
    tl = [t for t in timeline if t["run_id"] == run.run_id and t["cluster"] == cluster]
    consumed = {int(t["second"]): int(t["consumed"]) for t in tl}
    published = {int(t["second"]): int(t["published"]) for t in tl}
    confirmed = counts.confirmed.get((run.run_id, cluster), {})
    last_second = max([*consumed, *published, *confirmed], default=-1)
    reconnects = c.reconnects_by_loss()
    load_end = max(int(s["end_ns"]) for s in windows)
    run_fates = counts.run_fates.get((run.run_id, cluster))
    disturbed: list[tuple[int, int]] = []
    out = []
    for f in faults:
        where = f"{run.run_id}: cluster {cluster} fault {f.index + 1} ({f.action} {f.node})"
        if not f.ok:
            notes.append(f"{where}: the action failed ({f.error or 'no reason given'}); its figures describe the run "
                         f"around the attempt")
        step = next((s for s in windows if s["start_ns"] <= f.t_start_ns < s["end_ns"]), None)
        rec = consume_recovery(consumed, t0, None if step is None else int(step["meas_start_ns"]),
                               None if step is None else int(step["meas_end_ns"]), f.t_start_ns, disturbed)
        if step is not None:
            # an earlier fault disturbs from its start through its recovery run (a backlog caught up there would
            # inflate the next fault's pre-fault mean), or to its step's end when the rate was not back
            until = int(step["end_ns"]) if rec.back_at_ns is None else rec.back_at_ns + BACK_SECONDS * SECOND_NS
            disturbed.append((f.t_start_ns, until))
        key = (run.run_id, cluster, f.index)
        lo, hi = counts.windows.get(key) or fault_window(f.t_start_ns, f.t_back_end_ns, load_end)
        first = counts.first_confirm_ns.get(key)
        fates = counts.window_fates.get(key)
        near = [r for r in reconnects if lo <= r.t_lost_ns < hi]
        row: dict[str, Any] = {
            "run_id": run.run_id, "cluster": cluster, "index": f.index, "action": f.action, "node": f.node, "ok": f.ok,
            "error": f.error, "step": None if step is None else int(step["step"]), "at_s": _s(f.t_start_ns, t0),
            "end_s": _s(f.t_end_ns, t0), "back_start_s": _s(f.t_back_start_ns, t0), "back_s": _s(f.t_back_end_ns, t0),
            "first_confirm_s": None if first is None else (first - f.t_end_ns) / 1e9,
            "baseline_consume_rate": rec.baseline, "baseline_seconds": rec.baseline_seconds, "consume_back": rec.back,
            "consume_back_s": rec.back_s, "consume_lowest_rate": rec.lowest, "recovery_note": rec.why,
            "window_start_s": _s(lo, t0), "window_end_s": _s(hi, t0),
            **{k: None if fates is None else int(fates[k]) for k in FATES},
            **{f"run_{k}": None if run_fates is None else int(run_fates[k]) for k in FATES},
            **_reconnect_figures(near), "run_reconnect_max_s": _longest(reconnects),
            "t_start_ns": f.t_start_ns, "t_end_ns": f.t_end_ns, "t_back_start_ns": f.t_back_start_ns,
            "t_back_end_ns": f.t_back_end_ns, "first_confirm_ns": first, "consume_back_ns": rec.back_at_ns,
            "window_start_ns": lo, "window_end_ns": hi,
        }
        row["first_confirm_note"] = None if first is not None else (
            "no ack confirm in the whole run (confirms off?)" if not confirmed else "no ack confirm after the fault")
        # the window's seconds, up to the cluster's last second with a message (the load's end is no drop to 0)
        first_s, last_s = max(0, (lo - t0) // SECOND_NS), min(-((t0 - hi) // SECOND_NS), last_second + 1)
        row["series"] = [{"second": s, "t_s": (t0 + s * SECOND_NS - f.t_start_ns) / 1e9, "published": published.get(s, 0),
                          "confirmed": confirmed.get(s, 0), "consumed": consumed.get(s, 0)} for s in range(first_s, last_s)]
        out.append(row)
    return out


def _longest(reconnects: list[Reconnect]) -> float | None:
    back = [(r.t_back_ns - r.t_lost_ns) / 1e9 for r in reconnects if r.t_back_ns is not None]
    return max(back) if back else None


def _reconnect_figures(near: list[Reconnect]) -> dict[str, Any]:
    return {"reconnects": len(near), "reconnects_not_back": sum(1 for r in near if r.t_back_ns is None),
            "reconnect_max_s": _longest(near), "in_flight_reported": sum(r.in_flight for r in near),
            "skipped": sum(r.skipped for r in near)}


def _for_people(rows: list[dict[str, Any]]) -> pa.Table:
    """faults.csv, read by people beside the report: faults and steps counted from 1 (rbench.samples.conventions)."""
    shown = [{**r, "index": r["index"] + 1, "step": None if r["step"] is None else shown_step(r["step"])} for r in rows]
    table = pa.Table.from_pylist([{k: r.get(k) for k in FAULT_SCHEMA.names} for r in shown], FAULT_SCHEMA)
    return table.rename_columns(["fault" if n == "index" else n for n in table.column_names])


def document(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """faults.json: every row with its per-second series (0-based like run.json) and how each figure is
    measured, so ``rbench report`` re-renders the Faults section from the file alone."""
    return {"method": {**METHOD, "series": SERIES_METHOD, "rules": RULES}, "faults": rows}


def write_faults(out_dir: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """faults.csv (one row per fault, people's numbering) and faults.json beside steps.csv; returns the JSON."""
    doc = document(rows)
    try:
        pacsv.write_csv(_for_people(rows), out_dir / "faults.csv")
        (out_dir / "faults.json").write_text(json.dumps(doc, indent=2, default=str))
    except OSError as exc:
        raise SinkError(f"{out_dir}: cannot write the fault figures ({exc.strerror})") from None
    return doc
