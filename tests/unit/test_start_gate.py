"""The driver's start gate: every task of a stage gets the same t0, and only once all are ready."""
from __future__ import annotations

import asyncio

import pytest

from rbench.live.control import GATE_MARGIN_NS, ControlClient, ControlServer, gate, gate_margin_ns
from rbench.live.control.wire import Progress


async def _clients(server: ControlServer, n: int) -> list[ControlClient]:
    clients = [ControlClient(server.endpoint) for _ in range(n)]
    for c in clients:
        await c.connect()
        assert c.connected
    return clients


@pytest.fixture(autouse=True)
def _coordinator_clock_at_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proposals here are small numbers: the coordinator's clock at 0 leaves t0 = last proposal + margin."""
    monkeypatch.setattr(gate, "wall_clock_ns", lambda: 0)


def test_gate_opens_when_the_last_task_is_ready_with_one_t0_for_all() -> None:
    server = ControlServer().start()
    server.expect_tasks("a", 3)

    async def main() -> list[int]:
        clients = await _clients(server, 3)
        early = [asyncio.ensure_future(c.agree_t0("a", i, 1_000 + i)) for i, c in enumerate(clients[:2])]
        await asyncio.sleep(0.2)
        assert not any(f.done() for f in early), "the gate opened before every task was ready"
        last = await asyncio.wait_for(clients[2].agree_t0("a", 2, 500), 5)
        t0s = [await asyncio.wait_for(f, 5) for f in early] + [last]
        for c in clients:
            await c.aclose()
        return t0s

    try:
        t0s = asyncio.run(main())
    finally:
        server.close()
    assert t0s == [1_001 + gate_margin_ns(3)] * 3


def test_clusters_have_their_own_gates_and_a_restarted_stage_starts_a_new_round() -> None:
    server = ControlServer().start()
    server.expect_tasks("a", 2)
    server.expect_tasks("b", 1)

    async def main() -> tuple[int, int, int]:
        a0, a1, b0 = await _clients(server, 3)
        b = await asyncio.wait_for(b0.agree_t0("b", 0, 7), 5)      # b's single task: no wait for a
        stale = asyncio.ensure_future(a0.agree_t0("a", 0, 100))
        await asyncio.sleep(0.1)
        # Spark relaunched the stage: task 0 is ready again (a new connection), then task 1
        retry = (await _clients(server, 1))[0]
        again = asyncio.ensure_future(retry.agree_t0("a", 0, 200))
        await asyncio.sleep(0.1)
        t1 = await asyncio.wait_for(a1.agree_t0("a", 1, 150), 5)
        t0 = await asyncio.wait_for(again, 5)
        assert not stale.done()
        stale.cancel()
        for c in (a0, a1, b0, retry):
            await c.aclose()
        return b, t0, t1

    try:
        b, t0, t1 = asyncio.run(main())
    finally:
        server.close()
    assert b == 7 + gate_margin_ns(1)
    assert t0 == t1 == 200 + gate_margin_ns(2)


def test_a_closed_control_connection_fails_the_wait_instead_of_hanging() -> None:
    server = ControlServer().start()
    server.expect_tasks("a", 2)

    async def main() -> None:
        (client,) = await _clients(server, 1)
        waiting = asyncio.ensure_future(client.agree_t0("a", 0, 1))
        await asyncio.sleep(0.1)
        server.close()
        with pytest.raises(ConnectionError, match="closed before the start"):
            await asyncio.wait_for(waiting, 5)
        await client.aclose()

    asyncio.run(main())


# ---- a barrier stage that Spark restarts: every task comes back as a new, larger task attempt id ----------

async def _attempts(server: ControlServer, cluster: str, tasks_attempts: list[tuple[int, int]]) -> list[ControlClient]:
    """One connected client per (task, attempt), each having said hello, as TaskRun does."""
    clients = []
    for task, attempt in tasks_attempts:
        c = ControlClient(server.endpoint, attempt)
        await c.connect()
        c.hello(cluster, task)
        clients.append(c)
    await asyncio.sleep(0.1)
    return clients


def _progress(task: int, second: int, published: int) -> Progress:
    return Progress("a", task, step=0, second=second, published=published, consumed=published)


def test_a_restarted_stage_starts_after_the_earlier_attempt_left_and_only_its_progress_counts() -> None:
    server = ControlServer().start()
    server.expect_tasks("a", 2)
    restarts: list[tuple[str, int, list[int]]] = []
    server.board.on_restart.append(lambda c, start, old: restarts.append((c, start.index, sorted(a.attempt for a in old))))
    opened: list[str] = []
    server.board.on_started.append(opened.append)

    async def main() -> tuple[int, int, list[int]]:
        old = await _attempts(server, "a", [(0, 1), (1, 2)])
        first = await asyncio.wait_for(asyncio.gather(old[0].agree_t0("a", 0, 100), old[1].agree_t0("a", 1, 100)), 5)
        for c in old:
            c.send(_progress((c.attempt or 0) - 1, 7, 50))
        await asyncio.sleep(0.1)
        assert server.board.step("a", 0).published == 100
        # Spark restarted the stage: attempts 3 and 4; attempt 1 still runs (Spark kills it 2 s later)
        await old[1].aclose()                              # the lost task
        new = await _attempts(server, "a", [(0, 3), (1, 4)])
        waiting = [asyncio.ensure_future(c.agree_t0("a", t, 500)) for t, c in enumerate(new)]
        await asyncio.sleep(0.3)
        assert not any(w.done() for w in waiting), "the restarted attempt started while the earlier one still ran"
        old[0].send(_progress(0, 8, 9))                    # a line of the dying attempt: it no longer counts after the restart
        await old[0].aclose()
        second = await asyncio.wait_for(asyncio.gather(*waiting), 5)
        new[0].send(_progress(0, 9, 20))
        old_after = server.board.step("a", 0).published   # read before the new line is surely in: 0 or 20
        await asyncio.sleep(0.1)
        for c in new:
            await c.aclose()
        return first[0], second[0], [old_after, server.board.step("a", 0).published]

    try:
        t_first, t_second, published = asyncio.run(main())
    finally:
        server.close()
    assert t_first == 100 + gate_margin_ns(2) and t_second == 500 + gate_margin_ns(2)
    assert published[1] == 20 and published[0] in (0, 20)   # the first attempt's 100 (and 9) are gone
    assert server.board.t0_ns["a"] == t_second
    assert restarts == [("a", 1, [1, 2])]
    assert opened == ["a", "a"]                              # every opening, the restart's too (rbench run's warm-up)
    seen, starts = server.board.cluster_attempts("a")
    assert [s.attempts for s in starts] == [{0: 1, 1: 2}, {0: 3, 1: 4}]
    by_id = {a.attempt: a for a in seen}
    assert by_id[1].reported["published"] == 59 and by_id[1].start == 0 and by_id[3].start == 1
    assert by_id[2].closed_at is not None and not by_id[2].final     # lost: no final report
    assert by_id[3].pid is not None and by_id[3].host


def test_ready_lines_of_a_dead_stage_attempt_never_complete_a_round() -> None:
    """Task 1 died before the gate while task 0 waited there: the restarted stage's task 1 must not start
    with the dead attempt's task 0 (a round of two stage attempts would leave the new task 0 waiting forever)."""
    server = ControlServer().start()
    server.expect_tasks("a", 2)
    server.resolve_stage_attempts("a", {1: 0, 2: 0, 3: 1, 4: 1}.get)

    async def main() -> tuple[bool, list[int]]:
        old = await _attempts(server, "a", [(0, 1), (1, 2)])
        dead_wait = asyncio.ensure_future(old[0].agree_t0("a", 0, 100))
        await old[1].aclose()                               # task 1 of stage attempt 0 died before it was ready
        new = await _attempts(server, "a", [(1, 4)])
        first_new = asyncio.ensure_future(new[0].agree_t0("a", 1, 300))
        await asyncio.sleep(0.3)
        assert not first_new.done(), "a round of the dead attempt's task 0 and the new task 1 opened"
        new += await _attempts(server, "a", [(0, 3)])
        second_new = asyncio.ensure_future(new[1].agree_t0("a", 0, 400))
        await asyncio.sleep(0.3)
        assert not second_new.done(), "opened while the dead attempt's task 0 was still connected"
        await old[0].aclose()                               # Spark killed it
        t0s = await asyncio.wait_for(asyncio.gather(first_new, second_new), 5)
        for c in new:
            await c.aclose()
        return dead_wait.done() and not dead_wait.cancelled() and dead_wait.exception() is None, list(t0s)

    try:
        dead_answered, t0s = asyncio.run(main())
    finally:
        server.close()
    assert not dead_answered
    assert t0s == [400 + gate_margin_ns(2)] * 2


def test_an_earlier_attempt_that_never_leaves_delays_the_restart_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """An executor lost on another machine may leave its connection open until TCP gives up: the gate waits a bounded time."""
    monkeypatch.setattr(gate, "EARLIER_ATTEMPT_WAIT_S", 0.5)
    server = ControlServer().start()
    server.expect_tasks("a", 1)

    async def main() -> int:
        (lingering,) = await _attempts(server, "a", [(0, 1)])
        (new,) = await _attempts(server, "a", [(0, 2)])
        t0 = await asyncio.wait_for(new.agree_t0("a", 0, 10), 5)
        for c in (lingering, new):
            await c.aclose()
        return t0

    try:
        t0 = asyncio.run(main())
    finally:
        server.close()
    (start,) = server.board.starts["a"]
    assert t0 == 10 + gate_margin_ns(1) and start.still_connected == [1] and start.waited_s >= 0.45


def test_the_gate_margin_grows_with_the_tasks_it_answers_up_to_a_bound() -> None:
    # the answers go out one after the other and every executor's loop must wake before t0 (docs/scale.md)
    assert gate_margin_ns(1) > GATE_MARGIN_NS
    assert gate_margin_ns(64) - gate_margin_ns(8) == 56 * gate.GATE_MARGIN_PER_TASK_NS
    assert gate_margin_ns(100_000) == gate.GATE_MARGIN_MAX_NS


def test_an_old_last_proposal_counts_the_margin_from_the_coordinators_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate, "wall_clock_ns", lambda: 5_000)
    server = ControlServer().start()
    server.expect_tasks("a", 1)

    async def main() -> int:
        (client,) = await _clients(server, 1)
        t0 = await asyncio.wait_for(client.agree_t0("a", 0, 1_000), 5)
        await client.aclose()
        return t0

    try:
        assert asyncio.run(main()) == 5_000 + gate_margin_ns(1)
    finally:
        server.close()
