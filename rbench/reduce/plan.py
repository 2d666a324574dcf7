"""The reduce's plan of run.json: integer ids for the measurement windows (gid) and the (run, cluster) pairs
(rc), the clusters' faults with their windows, and the Spark expressions that place a sample row in them
(which step window, which second, which fault). rbench.reduce.small evaluates the same plan with numpy."""
from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from rbench.reduce.recovery import fault_window
from rbench.samples.faults import FaultRecord

if TYPE_CHECKING:
    from rbench.reduce.load import WindowRow

MAX_FAULTS = 62                                # fault windows of one cluster a message can be in (bits of a long)


class Plan:
    """Integer ids for the windows of run.json (gid = row index) and the (run, cluster) pairs (rc)."""

    def __init__(self, window_rows: list[WindowRow], faults: list[tuple[str, FaultRecord]] | None = None) -> None:
        """``faults``: (run_id, fault) of every fault of run.json, in (run, cluster, index) order."""
        self.rows = window_rows
        self.rc: dict[tuple[str, str], int] = {}
        self.t0: dict[int, int] = {}
        self.by_rc: dict[int, list[tuple[int, int, int, int]]] = {}     # rc -> [(gid, step, meas, end)]
        self.load_ends: dict[int, int] = {}                            # rc -> end of its last step
        for gid, r in enumerate(window_rows):
            rc = self.rc.setdefault((r.run_id, r.cluster), len(self.rc))
            self.t0[rc] = min(self.t0.get(rc, r.t0_ns), r.t0_ns)
            self.by_rc.setdefault(rc, []).append((gid, r.step, r.meas_start_ns, r.end_ns))
            self.load_ends[rc] = max(self.load_ends.get(rc, r.step_end_ns), r.step_end_ns)
        # rc -> its faults in bit order (the cluster's first MAX_FAULTS by index) with their windows [lo, hi)
        self.faults: dict[int, list[tuple[FaultRecord, int, int]]] = {}
        for run_id, f in faults or []:
            frc = self.rc.get((run_id, f.cluster))
            if frc is not None and len(self.faults.get(frc, [])) < MAX_FAULTS:
                lo, hi = fault_window(f.t_start_ns, f.t_back_end_ns, self.load_end(frc))
                self.faults.setdefault(frc, []).append((f, lo, hi))

    def load_end(self, rc: int) -> int:
        """End of the cluster's last step (where its load stopped)."""
        return self.load_ends[rc]

    def fault_mask(self, rc: int) -> Column:
        """Bit i set when the row's ``t_sent`` is in the window of the cluster's i-th fault (0: in none)."""
        t = F.col("t_sent")
        out: Column = F.lit(0).cast("long")
        for bit, (_, lo, hi) in enumerate(self.faults.get(rc, [])):
            out = out + F.when((t >= lo) & (t < hi), F.lit(1 << bit)).otherwise(F.lit(0)).cast("long")
        return out

    def after_fault(self, rc: int, t: Column) -> Column:
        """Position, among the cluster's faults in the order they took effect (``t_end_ns``: the action done, the
        node down), of the last fault in effect before ``t``."""
        starts = self.fault_starts(rc)
        return case([(t > s, i) for i, s in reversed(list(enumerate(starts)))])

    def rc_of(self, run_id: str, cluster: str) -> int | None:
        return self.rc.get((run_id, cluster))

    def gid_tagged(self, rc: int) -> Column:
        """gid of the row's step window (null: the step has no window)."""
        return case([(F.col("step") == s, gid) for gid, s, _, _ in self.by_rc.get(rc, [])])

    def gid_measured(self, rc: int) -> Column:
        """gid when the row is a measured message of its step, else null."""
        ti = F.col("t_intended")
        return case([((F.col("step") == s) & (ti >= m) & (ti < e), gid) for gid, s, m, e in self.by_rc.get(rc, [])])

    def layers(self, rc: int) -> list[list[tuple[int, int, int]]]:
        """The cluster's measurement windows (gid, start, end) in layers of non-overlapping windows (one layer
        unless run.json has overlapping steps), so a time in two windows counts in both."""
        layers: list[list[tuple[int, int, int]]] = []
        for gid, _, m, e in sorted(self.by_rc.get(rc, []), key=lambda w: w[2]):
            for layer in layers:
                if layer[-1][2] <= m:
                    layer.append((gid, m, e))
                    break
            else:
                layers.append([(gid, m, e)])
        return layers

    def fault_starts(self, rc: int) -> list[int]:
        """When each of the cluster's faults took effect (``t_end_ns``), in that order."""
        return sorted(f.t_end_ns for f, _, _ in self.faults.get(rc, []))

    def windows_of(self, rc: int, t: Column) -> list[Column]:
        """gid of the measurement window holding ``t``: one expression per layer (``layers``)."""
        return [case([((t >= m) & (t < e), gid) for gid, m, e in layer]) for layer in self.layers(rc)]

    def fresh(self, rc: int) -> Column:
        """True for a consumed row of this run; false for a stale one (``t_intended`` before the cluster's t0)."""
        return F.coalesce(F.col("t_intended") >= F.lit(self.t0[rc]), F.lit(True))

    def second(self, rc: int, t: str) -> Column:
        return F.floor((F.col(t) - F.lit(self.t0[rc])) / 1e9).cast("long")


def case(pairs: list[tuple[Column, int]]) -> Column:
    """SQL ``CASE``: the value of the first true condition, null when none is (rbench.reduce.small mirrors it)."""
    out = None
    for cond, val in pairs:
        out = F.when(cond, F.lit(val)) if out is None else out.when(cond, F.lit(val))
    return (out if out is not None else F.lit(None)).cast("long")
