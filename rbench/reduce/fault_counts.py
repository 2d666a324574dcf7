"""What the reduce's passes measured for run.json's faults, gathered per fault and per (run, cluster) for
rbench.reduce.faults to turn into figures (only the clusters that had a fault)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from rbench.reduce.counting import FIRSTCONF, TLCONF, counts, maxes
from rbench.reduce.message_checks import FAULT_GROUP, MSG_COUNTS, RUN_GROUP
from rbench.reduce.plan import Plan
from rbench.reduce.recovery import first_after
from rbench.samples.faults import FaultRecord


@dataclass
class FaultCounts:
    """What the passes measured for run.json's faults, for the clusters that had one (rbench.reduce.faults
    turns it into figures). Keys: (run_id, cluster) and (run_id, cluster, fault index)."""

    windows: dict[tuple[str, str, int], tuple[int, int]] = field(default_factory=dict)   # the fault's window [lo, hi) ns
    first_confirm_ns: dict[tuple[str, str, int], int | None] = field(default_factory=dict)
    window_fates: dict[tuple[str, str, int], dict[str, int]] = field(default_factory=dict)   # MSG_COUNTS in the window
    run_fates: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)           # MSG_COUNTS over the run
    confirmed: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)           # second → ack confirms


def run_faults(samples: Any) -> list[tuple[str, FaultRecord]]:
    """(run_id, fault) for every fault of the runs' run.json, in (run, cluster, index) order."""
    return [(run.run_id, f) for run in samples.runs for f in sorted(run.record.faults, key=lambda f: (f.cluster, f.index))]


def fault_counts(plan: Plan, hist: pa.Table | None, msgs: dict[tuple[int, int], dict[str, int]]) -> FaultCounts:
    """The counting pass's ack confirms per second and earliest confirm after each fault, and the message
    pass's fates per run and per fault window, keyed by names (run_id, cluster[, fault index])."""
    names = {rc: key for key, rc in plan.rc.items()}
    conf = counts(hist, TLCONF) if hist is not None else {}
    firsts = maxes(hist, FIRSTCONF) if hist is not None else {}
    out = FaultCounts()
    for rc, faults in plan.faults.items():
        run_id, cluster = names[rc]
        out.confirmed[(run_id, cluster)] = {sec: n for (r, sec), n in conf.items() if r == rc}
        out.run_fates[(run_id, cluster)] = msgs.get((RUN_GROUP, rc), {c: 0 for c in MSG_COUNTS})
        minima = {pos: -v for (r, pos), v in firsts.items() if r == rc}
        by_start = sorted(range(len(faults)), key=lambda b: faults[b][0].t_end_ns)
        for bit, (f, lo, hi) in enumerate(faults):
            key = (run_id, cluster, f.index)
            out.windows[key] = (lo, hi)
            out.first_confirm_ns[key] = first_after(minima, by_start.index(bit))
            out.window_fates[key] = msgs.get((FAULT_GROUP, rc * 64 + bit), {c: 0 for c in MSG_COUNTS})
    return out
