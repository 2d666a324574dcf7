"""The coordinator's loop: levels in order, one barrier stage per phase, and cleanup whatever happens.

Per repeat and per bindings series: for each level, create (the queues the level adds, bound with
k keys), then the routing probe (baseline on an exchange with no bindings, then n messages that
match every queue, checked against the broker's routed counter); once the series' largest level
is done, delete level by level from the top. The queues that may exist are tracked as an upper
bound per series, so cleanup (also after Ctrl-C or a failure, after Spark has stopped the tasks)
deletes exactly the names the sweep could have declared; queue.delete of a missing queue is a
no-op on RabbitMQ, so deleting a name twice is harmless.
"""
from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rbench.codec.amqp091 import K
from rbench.config.types import ClusterTarget
from rbench.config.uri import mask_uri
from rbench.drivers.amqp091 import Amqp091Driver
from rbench.errors import ConfigError
from rbench.scenarios.scalability import counters
from rbench.scenarios.scalability.output import write_outputs
from rbench.scenarios.scalability.phases import PhaseWork
from rbench.scenarios.scalability.plan import (
    Level,
    SweepSpec,
    binding_keys,
    message_share,
    publish_keys,
    queue_name,
    series_levels,
    share,
    validate,
)

QUEUE_ARGUMENTS = (("x-message-ttl", 0),)     # 3.10 classic queues drop such messages at once: nothing is kept
Submit = Callable[[list[PhaseWork]], list[dict[str, Any]]]
AfterPhase = Callable[[Level, str, list[dict[str, Any]]], None]


@dataclass
class SweepResult:
    run_id: str
    run_dir: Path
    prefix: str
    status: str                                   # complete | memory-alarm | interrupted | failed
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def new_run_id() -> tuple[str, str]:
    token = uuid.uuid4().hex[:6]
    return f"scalability-{dt.datetime.now(dt.timezone.utc):%Y%m%d-%H%M%S}-{token}", token


class Sweep:
    """One sweep on one broker; `run()` returns the rows of every phase that completed."""

    def __init__(self, spec: SweepSpec, submit: Submit, out_root: str | Path, echo: Callable[[str], None] = print,
                 after_phase: AfterPhase | None = None, alarm: Callable[[], bool | None] | None = None,
                 cancel: Callable[[], None] | None = None) -> None:
        validate(spec)
        self.spec = spec
        self.submit = submit
        self.echo = echo
        self.after_phase = after_phase
        self.cancel = cancel
        self.prometheus = spec.prometheus or counters.default_prometheus(spec.uri)
        self.alarm = alarm or (lambda: counters.memory_alarm(self.prometheus))
        self.run_id, token = new_run_id()
        self.prefix = f"{spec.name_prefix}{token}-"
        self.exchange = f"{self.prefix}x"
        self.empty_exchange = f"{self.prefix}empty"
        self.run_dir = Path(out_root).resolve() / self.run_id
        self.live: dict[int, int] = {}            # bindings series -> queue indices [0, n) that may exist
        self.result = SweepResult(self.run_id, self.run_dir, self.prefix, "running")
        self._counter_warned = False
        self._durable_warned = False

    # ---- the loop -----------------------------------------------------------------------------
    def run(self) -> SweepResult:
        spec = self.spec
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.echo(f"rbench scalability: run {self.run_id} → {self.run_dir}")
        self.echo(f"  broker {mask_uri(spec.uri)}, {spec.exchange_type} exchange, names {self.prefix}*, "
                  f"{spec.tasks} task(s), n={spec.messages}, repeat {spec.repeat}")
        try:
            _admin(spec.uri, self._declare_exchanges())
            for repeat in range(spec.repeat):
                for series in series_levels(spec):
                    if not self._series(series, repeat):
                        break
                if self.result.status == "memory-alarm":
                    break
            if self.result.status == "running":
                self.result.status = "complete"
        except KeyboardInterrupt:
            self.result.status = "interrupted"
            raise
        except BaseException:
            self.result.status = "failed"
            raise
        finally:
            self._finish()
        return self.result

    def _series(self, levels: list[Level], repeat: int) -> bool:
        """Create and probe each level of one bindings series, then delete from the top; False = stop the sweep."""
        done: list[Level] = []
        go_on = True
        for level in levels:       # an exception skips the deletes below: _finish() cleans up instead
            if self.alarm():
                self._stop_for_alarm(level)
                go_on = False
                break
            self._create(level, repeat)
            done.append(level)
            if not self._route(level, repeat):
                self._stop_for_alarm(level)
                go_on = False
                break
        for level in reversed(done):   # deleting is allowed under a memory alarm
            self._delete(level, repeat)
        return go_on

    def _stop_for_alarm(self, level: Level) -> None:
        self.result.status = "memory-alarm"
        note = (f"the broker's memory alarm is on: the sweep stopped before finishing q={level.queues} "
                f"k={level.bindings}; the levels done so far are kept")
        self.result.notes.append(note)
        self.echo(f"  {note}")

    def _works(self, phase: str, level: Level, queues: range) -> list[PhaseWork]:
        spec = self.spec
        uris = (spec.uri,)
        if phase == "route":
            keys = publish_keys(spec.exchange_type, level.bindings)
            return [PhaseWork(uris, "route", t, self.exchange, self.empty_exchange, publish_keys=keys,
                              messages=message_share(spec.messages, t, spec.tasks), prometheus=self.prometheus,
                              routed_expected=spec.messages * level.queues) for t in range(spec.tasks)]
        keys = binding_keys(spec.exchange_type, level.bindings) if phase == "create" else ()
        return [PhaseWork(uris, phase, t, self.exchange,
                          queues=tuple(queue_name(self.prefix, level.bindings, i)
                                       for i in share(queues.start, queues.stop, t, spec.tasks)),
                          binding_keys=keys, queue_arguments=QUEUE_ARGUMENTS)
                for t in range(spec.tasks)]

    def _create(self, level: Level, repeat: int) -> None:
        self.live[level.bindings] = level.queues       # from now on these names may exist
        results = self.submit(self._works("create", level, range(level.previous_queues, level.queues)))
        if any(r.get("durable") for r in results) and not self._durable_warned:
            self._durable_warned = True
            note = ("queues declared durable: the broker refuses transient non-exclusive queues (RabbitMQ 4.3+), "
                    "so this sweep's create times are durable queues'")
            self.result.notes.append(note)
            self.echo(f"rbench: warning: {note}")
        rows = self._record(level, repeat, "create", results, ops_per=level.added)
        us = rows[0]["us_per_op"]
        self.echo(f"  k={level.bindings:<6} q={level.queues:<7} create {us:10.1f} µs/queue "
                  f"({level.added} added, {level.bindings} binding(s) each)")
        if self.after_phase is not None:
            self.after_phase(level, "create", rows)

    def _route(self, level: Level, repeat: int) -> bool:
        spec = self.spec
        results = self.submit(self._works("route", level, range(0)))
        if any(r.get("blocked") for r in results):
            return False
        counted = next((r.get("routed_counted") for r in results if r["phase"] == "route" and r["task"] == 0), None)
        expected = spec.messages * level.queues
        if counted is None and not self._counter_warned:
            self._counter_warned = True
            self.result.notes.append(f"routed counter not checked: cannot read {self.prometheus}{counters.DETAILED}")
        baseline = self._record(level, repeat, "baseline", [r for r in results if r["phase"] == "baseline"], ops_per=1)
        route = self._record(level, repeat, "route", [r for r in results if r["phase"] == "route"], ops_per=level.queues,
                             extra={"routed_expected": expected, "routed_counted": counted})
        returned = sum(r["returned"] for r in baseline)
        if returned != spec.messages:
            self.result.notes.append(f"q={level.queues} k={level.bindings}: baseline returned {returned} of {spec.messages}")
        if counted is not None and counted != expected:
            self.result.notes.append(f"q={level.queues} k={level.bindings}: routed counter moved by {counted}, "
                                     f"expected n × q = {expected}")
        check = "–" if counted is None else ("= n×q" if counted == expected else f"≠ n×q={expected}")
        self.echo(f"  k={level.bindings:<6} q={level.queues:<7} route  {route[0]['us_per_op']:10.3f} µs/msg/queue, "
                  f"baseline {baseline[0]['us_per_op']:.2f} µs/msg, routed {counted} {check}")
        if self.after_phase is not None:
            self.after_phase(level, "route", route)
        return True

    def _delete(self, level: Level, repeat: int) -> None:
        results = self.submit(self._works("delete", level, range(level.previous_queues, level.queues)))
        self.live[level.bindings] = level.previous_queues
        if not level.previous_queues:
            self.live.pop(level.bindings, None)
        rows = self._record(level, repeat, "delete", results, ops_per=level.added)
        self.echo(f"  k={level.bindings:<6} q={level.queues:<7} delete {rows[0]['us_per_op']:10.1f} µs/queue")
        if self.after_phase is not None:
            self.after_phase(level, "delete", rows)

    def _record(self, level: Level, repeat: int, phase: str, results: list[dict[str, Any]], ops_per: int,
                extra: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """One row per task; the phase's figures (wall = slowest task, since all start at one barrier) on each."""
        spec = self.spec
        durations = [(r["t_end_ns"] - r["t_start_ns"]) / 1e3 for r in results]
        wall_us = max(durations) if durations else 0.0
        phase_ops = sum(int(r["ops"]) for r in results)
        units = phase_ops * ops_per if phase in ("route", "baseline") else phase_ops
        rows = []
        for r, task_us in sorted(zip(results, durations), key=lambda p: int(p[0]["task"])):
            rows.append({
                "run_id": self.run_id, "label": spec.label, "exchange_type": spec.exchange_type, "repeat": repeat,
                "i": level.i, "j": level.j, "queues": level.queues, "bindings": level.bindings, "added": level.added,
                "phase": phase, "task": int(r["task"]), "tasks": spec.tasks, "ops": int(r["ops"]),
                "t_start_ns": int(r["t_start_ns"]), "t_end_ns": int(r["t_end_ns"]), "task_us": task_us,
                "phase_ops": phase_ops, "phase_us": wall_us, "us_per_op": wall_us / units if units else float("nan"),
                "returned": int(r.get("returned", 0)), "nacked": int(r.get("nacked", 0)),
                "routed_expected": None, "routed_counted": None, **(extra or {}),
            })
        self.result.rows.extend(rows)
        return rows

    # ---- broker set-up and cleanup ----------------------------------------------------------------
    async def _declare_exchanges(self) -> None:
        driver = Amqp091Driver()
        await driver.open(ClusterTarget("scalability", (self.spec.uri,)))
        try:
            ch = await driver.connection.channel()
            for name in (self.exchange, self.empty_exchange):
                await ch.rpc(K.EXCHANGE_DECLARE, (0, name, self.spec.exchange_type, False, False, False, False, False, {}),
                             (K.EXCHANGE_DECLARE_OK,), f"declare exchange {name!r}")
            await ch.close()
        finally:
            await driver.aclose()

    async def _cleanup(self) -> None:
        driver = Amqp091Driver()
        await driver.open(ClusterTarget("scalability", (self.spec.uri,)))
        try:
            names = [queue_name(self.prefix, k, i) for k, n in sorted(self.live.items()) for i in range(n)]
            if names:
                self.echo(f"  cleanup: deleting up to {len(names)} queue(s) left by the sweep")
                await driver.delete_queues(names)
            self.live.clear()
            for name in (self.exchange, self.empty_exchange):
                await driver.delete_exchange(name)
        finally:
            await driver.aclose()

    def _finish(self) -> None:
        """Stop Spark's tasks (after an interrupt), delete what may remain, write the rows; never skipped by Ctrl-C."""
        with _sigint_deferred(self.echo):
            if self.result.status in ("interrupted", "failed") and self.cancel is not None:
                self.cancel()
            try:
                _admin(self.spec.uri, self._cleanup())
            except Exception as exc:   # the broker went away: say what may be left
                self.result.notes.append(f"cleanup failed ({exc}); queues named {self.prefix}* may remain")
                self.echo(f"  {self.result.notes[-1]}")
            finally:
                result = self.result
                write_outputs(self.run_dir, result.rows, {
                    "run_id": self.run_id, "prefix": self.prefix, "status": result.status, "notes": result.notes,
                    "spec": spec_json(self.spec)})


def _admin(uri: str, coro: Any) -> None:
    asyncio.run(coro)


@contextlib.contextmanager
def _sigint_deferred(echo: Callable[[str], None]) -> Iterator[None]:
    """While cleaning up, Ctrl-C says so instead of leaving queues behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        echo("rbench scalability: cleaning up the sweep's queues, please wait")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def spark_submitter(session: Any, tasks: int) -> tuple[Submit, Callable[[], None]]:
    """(submit, cancel) on a Spark session; refuses more tasks than the cluster has slots (barrier stage)."""
    from rbench import spark
    from rbench.coordinator.phase_stage import submit_phase

    slots = spark.total_slots(session)
    if tasks > slots:
        raise ConfigError(f"--tasks: a phase needs {tasks} Spark task slots at once (barrier stage) "
                          f"but the cluster offers {slots}")
    sc = session.sparkContext

    def cancel() -> None:
        sc.cancelAllJobs()
        deadline = time.monotonic() + 15.0       # Spark kills a cancelled task's Python worker within seconds
        while time.monotonic() < deadline and sc.statusTracker().getActiveStageIds():
            time.sleep(0.2)
        time.sleep(0.5)

    return (lambda works: submit_phase(session, works)), cancel


def spec_json(spec: SweepSpec) -> dict[str, Any]:
    data = asdict(spec)
    data["uri"] = mask_uri(spec.uri)
    data["cap"] = spec.effective_cap
    return data
