"""The pieces of riding through a lost connection that need no broker: fail-over order, the slot
arithmetic, the status line, and where the records land in run.json."""
from __future__ import annotations

import asyncio
import io
import json
import time
from pathlib import Path

import pytest

from rbench.config.types import ClusterTarget, RunPlan, StepWindow
from rbench.config.uri import mask_uri
from rbench.coordinator.progress import ProgressPrinter
from rbench.coordinator.summary import print_reconnects
from rbench.errors import ConnectError, ConnectionLost
from rbench.live.control import ProgressBoard
from rbench.live.control.wire import Progress, Reconnecting, Started
from rbench.runtime.reconnect import Reconnect, Reconnector, failover
from rbench.runtime.schedule import Segment, due_times, slot_at
from rbench.samples.record import read_run_record
from rbench.samples.runinfo import RunInfo
from rbench.samples.tasks import TaskResult
from tests.loops import LoopRunner

A, B, C = (f"amqp://u:secret@node-{n}:5672/" for n in "abc")


def test_failover_starts_after_the_uri_that_died_and_keeps_lists_aligned() -> None:
    t = ClusterTarget("c", (A, B, C), stream_uris=("s-a", "s-b", "s-c"))
    assert failover(t, A).uris == (B, C, A) and failover(t, A).stream_uris == ("s-b", "s-c", "s-a")
    assert failover(t, C).uris == (A, B, C)
    assert failover(t, "s-b").uris == (C, A, B)              # the stream driver's URI turns the AMQP list too
    assert failover(t, None) == t and failover(t, "amqp://elsewhere/") == t
    assert failover(ClusterTarget("c", (A,)), A).uris == (A,)


@pytest.mark.parametrize("interval", [1e9 / 3, 2_000_000.0, 1e9 / 7000])
def test_slot_at_agrees_with_due_times(interval: float) -> None:
    seg = Segment(0, 1_000_000_000, 1_000_000_000 + 50 * int(interval) + 3, interval)
    dues = list(due_times(seg))
    for t in [0, seg.start_ns, *dues, *(d + 1 for d in dues), *(d - 1 for d in dues), seg.end_ns, seg.end_ns + 10**9]:
        assert slot_at(seg, t) == sum(1 for d in dues if d < t), t
    assert list(due_times(seg, limit=9, first=5)) == dues[5:9]


def test_the_status_line_says_reconnecting_while_a_task_is_disconnected() -> None:
    board = ProgressBoard()
    plan = RunPlan(run_id="r", workload_name="w", driver="amqp091", steps=(StepWindow(0, 100.0, 0.0, 10.0),),
                   producers=1, consumers=1, warmup_s=0.0, message_count=None, colocate=True, clusters=())
    printer = ProgressPrinter(board, plan, out=io.StringIO(), interval_s=1)
    printer.cluster = "c"
    t0_s = 1_000_000
    board.add(Started("c", 0, t0_s * 10**9, step=0))
    lines = []
    for sec, news in enumerate([[], [(3, True)], [(1, True)], [(3, False)], [(1, False)]]):
        for task, state in news:
            board.add(Reconnecting("c", task, step=0, reconnecting=state))
        board.add(Progress("c", 0, step=0, second=t0_s + sec, published=100))
        lines += printer.tick(t0_s + sec)
    notes = [line.partition(" | reconnecting")[2] for line in lines]
    assert notes == ["", " (task 3)", " (tasks 1, 3)", " (task 1)", ""]
    assert board.steps[("c", 0)].published == 500          # the reconnecting lines count nothing


def test_reconnects_reach_run_json_per_cluster_with_skipped_slots_per_step(tmp_path: Path) -> None:
    from rbench.config.types import ClusterPlan

    target = ClusterTarget("c", ("amqp://guest:guest@127.0.0.1:5672/",))
    steps = (StepWindow(0, 10.0, 0.0, 5.0), StepWindow(1, 20.0, 5.0, 5.0))
    plan = RunPlan(run_id="r", workload_name="w", driver="amqp091", steps=steps, producers=2, consumers=2,
                   warmup_s=0.0, message_count=None, colocate=True, clusters=(ClusterPlan(target, ()),))
    info = RunInfo(tmp_path / "r", plan, {"clusters": []}, "h")
    assert info.cluster("c").reconnects == ()
    late = Reconnect(1, 2_000, 2_500, "amqp://guest:***@127.0.0.1:5672/", 3, 4).as_dict()
    early = Reconnect(0, 1_000, None, None, 0, 7).as_dict()
    # the executors' results, parsed where the coordinator receives them
    results = [TaskResult.from_json(r) for r in ({"task": 1, "reconnects": [late], "skipped_disconnected": [1, 3]},
                                                 {"task": 0, "reconnects": [early], "skipped_disconnected": [7, 0]})]
    info.set_task_results("c", results, [])
    info.write()
    c = json.loads((tmp_path / "r" / "run.json").read_text())["clusters"][0]
    assert c["reconnects"] == [early, late]
    assert set(late) == {"task", "t_lost_ns", "t_back_ns", "uri", "in_flight", "skipped"}
    assert [s["skipped_disconnected"] for s in c["steps"]] == [8, 3]
    out = io.StringIO()
    print_reconnects(read_run_record(tmp_path / "r").clusters[0], out)
    text = out.getvalue()
    assert "c task 0: connection lost, never back; 0 in flight" in text
    assert "c task 1: connection lost, back after 0.00 s on amqp://guest:***@127.0.0.1:5672/; 3 in flight" in text
    assert "11 scheduled message(s) skipped" in text


class Harness:
    """A Reconnector over fakes: ``reopen`` fails ``fails`` times (ConnectError), then connects to the next URI."""

    def __init__(self, fails: int = 0, timeout_s: float = 5.0, reconnects: bool = True, never: bool = False) -> None:
        self.fails, self.never = fails, never
        self.tried: list[tuple[str, ...]] = []
        self.failed: list[BaseException] = []
        self.notes: list[bool] = []
        self.closed = 0
        self.pending = [2, 1]                   # in flight at the loss, then published on the old driver meanwhile
        self.pubs: list[object] = [object()]
        self.r = Reconnector(3, ClusterTarget("c", (A, B, C)), timeout_s, 2, "fake", reconnects, self.reopen,
                             self.close_old, lambda: self.pubs, self.lose, self.notes.append, self.failed.append)
        self.r.uri = A

    async def reopen(self, target: ClusterTarget, on_lost: object) -> str:
        self.tried.append(target.uris)
        if self.never:
            await asyncio.sleep(3600)
        if len(self.tried) <= self.fails:
            raise ConnectError(f"cannot connect to RabbitMQ: {mask_uri(target.uris[0])}: Connection refused")
        self.pubs = [object()]
        return target.uris[0]

    async def close_old(self) -> None:
        self.closed += 1

    def lose(self) -> int:
        return self.pending.pop(0) if self.pending else 0


def test_a_reconnect_fails_over_backs_off_and_records_itself(run: LoopRunner) -> None:
    async def main() -> Harness:
        h = Harness(fails=2)
        stale = h.r.on_lost()
        old = h.pubs[0]
        h.r.lost(ConnectionLost("connection lost: cut"))
        h.r.lost(ConnectionLost("again"))                 # one reconnect at a time
        assert h.r.reconnecting and h.notes == [True]
        new = await h.r.publisher(0, old, ConnectionLost("cut"), time.time_ns() + 10**10)
        assert new is h.pubs[0] and new is not old
        await h.r.settled()
        stale(ConnectionLost("the old driver, late"))     # an older driver's on_lost is ignored
        assert not h.r.reconnecting
        return h

    h = run(main(), timeout=20)
    assert h.tried == [(B, C, A)] * 3 and h.closed == 1 and h.notes == [True, False] and not h.failed
    (rec,) = h.r.records
    assert rec.t_back_ns is not None and rec.t_back_ns - rec.t_lost_ns >= (0.1 + 0.25) * 1e9
    assert rec.uri == mask_uri(B) and rec.in_flight == 3 and h.r.uri == B


def test_a_reconnect_gives_up_with_one_masked_line(run: LoopRunner) -> None:
    async def main() -> Harness:
        h = Harness(fails=10**6, timeout_s=0.5)
        h.r.lost(ConnectionLost("connection lost: cut"))
        with pytest.raises(ConnectError) as info:
            await h.r.settled()
        text = str(info.value)
        assert "\n" not in text and "secret" not in text and text.startswith("task 3: connection to amqp://u:***@node-a")
        assert "reconnect_timeout 0.5 s" in text and "last: cannot connect to RabbitMQ: amqp://u:***@node-b" in text
        with pytest.raises(ConnectError):
            await h.r.publisher(0, h.pubs[0], ConnectionLost("cut"), time.time_ns() + 10**9)
        return h

    h = run(main(), timeout=20)
    assert len(h.failed) == 1 and h.r.records[0].t_back_ns is None


@pytest.mark.parametrize("timeout_s, reconnects, error, why", [
    (0.0, True, ConnectionLost("connection lost"), "reconnect_timeout is 0"),
    (5.0, False, ConnectionLost("connection lost"), "the fake driver does not reconnect"),
    (5.0, True, ConnectError("541 internal error"), "541 internal error"),
])
def test_a_loss_not_ridden_through_fails_the_task_at_once(timeout_s: float, reconnects: bool, error: BaseException,
                                                         why: str, run: LoopRunner) -> None:
    async def main() -> Harness:
        h = Harness(timeout_s=timeout_s, reconnects=reconnects)
        h.r.lost(error)
        with pytest.raises(type(error)) as info:
            await h.r.settled()
        assert why in str(info.value)
        return h

    h = run(main(), timeout=10)
    assert len(h.failed) == 1 and not h.r.records and not h.tried


def test_stopping_while_reconnecting_leaves_the_record_open(run: LoopRunner) -> None:
    async def main() -> Harness:
        h = Harness(never=True)
        h.r.lost(ConnectionLost("cut"))
        waiting = asyncio.ensure_future(h.r.publisher(0, h.pubs[0], ConnectionLost("cut"), time.time_ns() + 10**10))
        await asyncio.sleep(0.1)
        h.r.stop()
        assert await asyncio.wait_for(waiting, 2) is None
        await asyncio.wait_for(h.r.settled(), 2)
        return h

    h = run(main(), timeout=10)
    (rec,) = h.r.records
    assert rec.t_back_ns is None and rec.uri is None and not h.failed and h.notes == [True, False]
