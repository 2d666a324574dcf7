"""The driver's start gate: every task of a stage gets the same t0, and only once all are ready."""
from __future__ import annotations

import asyncio

import pytest

from rbench.live.control import GATE_MARGIN_NS, ControlClient, ControlServer


async def _clients(server: ControlServer, n: int) -> list[ControlClient]:
    clients = [ControlClient(server.address) for _ in range(n)]
    for c in clients:
        await c.connect()
        assert c.connected
    return clients


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
    assert t0s == [1_001 + GATE_MARGIN_NS] * 3


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
    assert b == 7 + GATE_MARGIN_NS
    assert t0 == t1 == 200 + GATE_MARGIN_NS


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
