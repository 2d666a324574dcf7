"""The workload's faults, executed beside a cluster's stage (docs/faults.md).

Each fault waits for the cluster's t0 (the moment the load starts, as the tasks agreed it), then
``at`` seconds more, runs its action through the cluster's executor (rbench.faults.executor) and,
``restart_after`` later, the action that brings the node back. Every fault has its own thread,
so a slow command (a node takes seconds to boot) never delays the stage or another fault; actions
on one node are serialised. When the stage ends (or is interrupted) stop() brings back every node
a fault left down, whatever its restart_after said: a run never leaves the user's cluster degraded.
run.json gets one record per executed fault (rbench.samples.faults, the reduce's reader).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from rbench.config.types import FaultPlan
from rbench.faults.executor import ActionResult, FaultExecutor
from rbench.faults.terms import FAULT_STEPS, local_node
from rbench.samples.faults import FaultRecord

POLL_S = 0.1


class FaultController:
    """One cluster's faults, each on a thread from start() to stop()."""

    def __init__(self, cluster: str, faults: tuple[FaultPlan, ...], executor: FaultExecutor,
                 t0_ns: Callable[[], int | None], out: TextIO | None, log_path: Path | None = None) -> None:
        self.cluster, self.faults, self.executor, self.t0_ns = cluster, faults, executor, t0_ns
        self.out, self.log_path = out, log_path
        self._stop = threading.Event()
        self._stopped_at: int | None = None
        self._lock = threading.Lock()                        # records, the log file, the node locks
        self._node_locks: dict[str, threading.Lock] = {}
        self._records: dict[int, FaultRecord] = {}
        self._threads = [threading.Thread(target=self._run, args=(f,), name=f"rbench-fault-{cluster}-{f.index}",
                                          daemon=True) for f in faults]

    # ---- the public face ---------------------------------------------------------------------
    def start(self) -> FaultController:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> list[FaultRecord]:
        """End of the stage: faults not yet due are dropped, nodes still down are brought back now;
        returns run.json's records, in the order the faults started."""
        self._stopped_at = time.time_ns()
        self._stop.set()
        deadline = time.monotonic() + 2 * self.executor.timeout_s + 30
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            records = sorted(self._records.values(), key=lambda r: (r.t_start_ns, r.index))
        # a thread still busy past every timeout: its node was not back
        return [replace(r, ok=False, error=f"{r.node} was not back when the run ended")
                if r.t_back_end_ns is None and r.ok else r for r in records]

    # ---- one fault ---------------------------------------------------------------------------
    def _say(self, message: str) -> None:
        print(f"rbench: cluster {self.cluster}: {message}", file=self.out, flush=True)

    def _node_lock(self, node: str) -> threading.Lock:
        local = local_node(node)
        key = local.name if local is not None else node
        with self._lock:
            return self._node_locks.setdefault(key, threading.Lock())

    def _wait_until(self, t_ns: int) -> bool:
        """Sleep until the wall-clock instant; True when stop() came first."""
        return self._stop.wait(max(0.0, (t_ns - time.time_ns()) / 1e9))

    def _act(self, verb: str, node: str) -> ActionResult:
        with self._node_lock(node):
            result = self.executor.run(verb, node)
        self._log(result)
        return result

    def _log(self, r: ActionResult) -> None:
        """Every command, its exit and its output, in <run>/faults/<cluster>.log (for when one fails)."""
        if self.log_path is None:
            return
        stamp = time.strftime("%H:%M:%S", time.localtime(r.t_start_ns / 1e9))
        text = (f"[{stamp}] {r.verb} {r.node}: {r.command}\n  {'ok' if r.ok else r.error} "
                f"({(r.t_end_ns - r.t_start_ns) / 1e9:.1f} s)\n" + "".join(f"  | {line}\n" for line in r.output.splitlines()))
        with self._lock:
            try:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                with self.log_path.open("a") as f:
                    f.write(text)
            except OSError:
                pass          # the log is a help, run.json is the record

    def _run(self, f: FaultPlan) -> None:
        name = f"fault {f.index + 1} ({f.action} {f.node})"
        t0 = self.t0_ns()
        while t0 is None:
            if self._stop.wait(POLL_S):
                self._say(f"{name} not run: the load never started")
                return
            t0 = self.t0_ns()
        if self._wait_until(t0 + int(f.at_s * 1e9)):
            self._say(f"{name} not run: the load ended before {f.at_s:g} s")
            return
        verb, back_verb = FAULT_STEPS[f.action]
        self._say(f"{name} at {(time.time_ns() - t0) / 1e9:.1f} s")
        first = self._act(verb, f.node)
        record = FaultRecord(cluster=self.cluster, index=f.index, action=f.action, node=f.node, at_s=f.at_s,
                             restart_after_s=f.restart_after_s, t_start_ns=first.t_start_ns, t_end_ns=first.t_end_ns,
                             t_back_start_ns=None, t_back_end_ns=None, ok=first.ok, error=first.error)
        with self._lock:
            self._records[f.index] = record
        if not first.ok:
            self._say(f"{name} failed: {first.error}")
        if f.action != "restart":
            if f.restart_after_s is None:
                self._stop.wait()
                self._say(f"{name}: the run ended, bringing {f.node} back ({back_verb})")
            elif self._wait_until(t0 + int((f.at_s + f.restart_after_s) * 1e9)):
                self._say(f"{name}: the run ended before restart_after ({f.restart_after_s:g} s), bringing "
                          f"{f.node} back now ({back_verb})")
        back = self._act(back_verb, f.node)
        with self._lock:
            self._records[f.index] = replace(record, t_back_start_ns=back.t_start_ns, t_back_end_ns=back.t_end_ns,
                                             ok=first.ok and back.ok, error=first.error or back.error)
        if back.ok:
            self._say(f"{name}: {f.node} back {(back.t_end_ns - first.t_start_ns) / 1e9:.1f} s after the fault "
                      f"({back_verb} took {(back.t_end_ns - back.t_start_ns) / 1e9:.1f} s)")
        else:
            self._say(f"{name}: {back.error}; {f.node} may still be down")
