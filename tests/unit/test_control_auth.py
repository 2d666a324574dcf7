"""The control channel trusts no stranger (rbench.live.control.auth, server.py, client.py): real sockets, a real
server. A peer without the run's secret, a replayed connection, a line with a wrong MAC, an oversize or a
malformed line change nothing on the board, end no run, print no traceback, and are noted as refused."""
from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rbench.config.types import ControlEndpoint
from rbench.errors import ConfigError
from rbench.live.control import ControlClient, ControlServer, auth
from rbench.live.control import server as server_module
from rbench.live.control.tls import server_context
from rbench.live.control.wire import STOP, Failed, Hello, Progress, Ready
from rbench.samples.refused import MALFORMED_LINE


def _wait(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    return cond()


class Peer:
    """A hand-driven TCP peer of the control port; records every byte it sends (for replay)."""

    def __init__(self, server: ControlServer) -> None:
        self.sock = socket.create_connection(server.address, timeout=5)
        self.rfile = self.sock.makefile("rb")
        self.sent = bytearray()
        self.seal: auth.LineSeal | None = None
        self.opener: auth.LineSeal | None = None
        self._challenge: bytes | None = None

    def challenge(self) -> bytes:
        """The server's first line (read once)."""
        if self._challenge is None:
            self._challenge = self.rfile.readline()
        return self._challenge

    def send(self, data: bytes) -> None:
        self.sent += data
        self.sock.sendall(data)

    def handshake(self, secret: bytes) -> None:
        answer, sn, cn = auth.answer(secret, self.challenge(), "peer/1")
        self.send(answer)
        auth.check_welcome(secret, sn, cn, self.rfile.readline())
        self.seal = auth.LineSeal(secret, sn, cn, auth.TO_COORDINATOR)
        self.opener = auth.LineSeal(secret, sn, cn, auth.TO_TASK)

    def line(self, record: object) -> bytes:
        assert self.seal is not None
        return self.seal.seal(record.to_line())     # type: ignore[attr-defined]

    def hung_up(self) -> bool:
        """The server closed this connection (EOF or reset within 5 s), whatever it sent before."""
        self.sock.settimeout(5)
        try:
            while self.sock.recv(1 << 16):
                pass
        except ConnectionResetError:
            pass
        return True

    def close(self) -> None:
        self.rfile.close()
        self.sock.close()


@pytest.fixture
def server() -> Iterator[ControlServer]:
    s = ControlServer().start()
    s.expect_tasks("a", 1)
    ended: list[tuple[str, str]] = []
    s.board.on_error.append(lambda c, e: ended.append((c, e)))
    s.ended = ended                                  # type: ignore[attr-defined]
    try:
        yield s
    finally:
        s.close()


FORGED = [Progress("a", 0, step=0, second=1, published=1_000_000, consumed=5, attempt=1),
          Failed("a", 0, "BrokerError: forged", attempt=1), Ready("a", 0, 1, attempt=1),
          Hello("a", 0, "evil", 66, attempt=1)]


def _untouched(s: ControlServer) -> None:
    """Nothing a stranger sent reached the board, the gate or the run's end."""
    assert s.board.step("a", 0).published == 0 and not s.board.tasks_seen and not s.board.attempts
    assert not s.board.errors and not s.ended                    # type: ignore[attr-defined]
    assert not s.board.starts and "a" not in s.board.t0_ns


def test_a_real_client_gets_in_and_its_lines_count_with_no_refusal(server: ControlServer) -> None:
    async def main() -> None:
        client = ControlClient(server.endpoint, attempt=3)
        await client.connect()
        assert client.connected and client.problem is None
        client.hello("a", 0)
        t0 = await asyncio.wait_for(client.agree_t0("a", 0, 1_000), 5)
        assert t0 > 1_000
        client.send(Progress("a", 0, step=0, second=1, published=7))
        commands: list[str] = []
        client.on_command = commands.append
        server.pause_consumers(True)                    # sealed answers the client must accept
        server.stop_tasks()
        await asyncio.wait_for(client.stop_requested.wait(), 5)
        assert commands == ["pause"]
        await client.aclose()

    asyncio.run(main())
    assert _wait(lambda: server.board.step("a", 0).published == 7)
    assert server.refused == 0 and server.refused_peers() == ()


@pytest.mark.parametrize("forged", FORGED, ids=lambda r: type(r).__name__)
def test_lines_without_a_handshake_are_never_read(server: ControlServer, forged: object,
                                                  capfd: pytest.CaptureFixture[str]) -> None:
    peer = Peer(server)
    try:
        assert peer.challenge().startswith(auth.PROTOCOL + b" ")
        peer.send(forged.to_line() * 3)               # type: ignore[attr-defined]
        assert peer.hung_up()
    finally:
        peer.close()
    assert _wait(lambda: server.refused == 1)
    _untouched(server)
    (refused,) = server.refused_peers()
    assert (refused.address, refused.reason, refused.count) == ("127.0.0.1", "bad handshake", 1)
    assert "Traceback" not in capfd.readouterr().err


def test_a_wrong_secret_is_refused(server: ControlServer) -> None:
    peer = Peer(server)
    try:
        with pytest.raises(auth.AuthError):               # the server hangs up instead of welcoming it
            peer.handshake(b"not the run's secret")
    finally:
        peer.close()
    assert _wait(lambda: server.refused == 1)
    assert [p.reason for p in server.refused_peers()] == ["bad handshake"]
    _untouched(server)


def test_a_recorded_connection_replayed_gets_nothing_in(server: ControlServer) -> None:
    good = Peer(server)
    good.handshake(server.endpoint.secret)
    good.send(good.line(Progress("a", 0, step=0, second=1, published=5, attempt=1)))
    assert _wait(lambda: server.board.step("a", 0).published == 5)
    good.close()
    replay = Peer(server)                               # byte for byte what the good connection sent
    try:
        replay.challenge()
        replay.send(bytes(good.sent))
        assert replay.hung_up()
    finally:
        replay.close()
    assert _wait(lambda: server.refused == 1)
    assert server.board.step("a", 0).published == 5
    assert [p.reason for p in server.refused_peers()] == ["bad handshake"]


def test_a_line_with_a_wrong_mac_closes_the_connection_and_counts_nothing(server: ControlServer) -> None:
    peer = Peer(server)
    try:
        peer.handshake(server.endpoint.secret)
        first = peer.line(Progress("a", 0, step=0, second=1, published=5, attempt=1))
        peer.send(first)
        assert _wait(lambda: server.board.step("a", 0).published == 5)
        peer.send(first)                                # a line seen before, sent again: its number is old
        assert peer.hung_up()
    finally:
        peer.close()
    assert _wait(lambda: server.refused == 1)
    assert server.board.step("a", 0).published == 5
    assert [p.reason for p in server.refused_peers()] == ["bad line MAC"]

    other = Peer(server)                                # a MAC that is not even the connection's key
    try:
        other.handshake(server.endpoint.secret)
        forged = Progress("a", 0, step=0, second=1, published=9, attempt=1).to_line()
        other.send(b"0" * auth.MAC_HEX + b" " + forged)
        assert other.hung_up()
    finally:
        other.close()
    assert _wait(lambda: server.refused == 2)
    assert server.board.step("a", 0).published == 5 and not server.board.errors


def test_a_4_mib_line_before_the_handshake_is_refused_after_a_few_hundred_bytes(server: ControlServer) -> None:
    peer = Peer(server)
    try:
        peer.challenge()
        chunk = b"x" * (1 << 16)
        try:
            for _ in range(64):                          # 4 MiB, no newline
                peer.sock.sendall(chunk)
        except OSError:
            pass                                         # the server hung up while we were sending
        assert peer.hung_up()
    finally:
        peer.close()
    assert _wait(lambda: server.refused == 1)
    assert [p.reason for p in server.refused_peers()] == ["bad handshake"]
    _untouched(server)


def test_garbage_and_malformed_json_from_an_admitted_task_are_dropped_and_noted(server: ControlServer) -> None:
    peer = Peer(server)
    try:
        peer.handshake(server.endpoint.secret)
        assert peer.seal is not None
        for bad in (b"{oops\n", b"\xff\xfe\n", b'{"cluster": "a", "task": 0, "attempt": "x"}\n', b"[]\n"):
            peer.send(peer.seal.seal(bad))
        peer.send(peer.line(Progress("a", 0, step=0, second=1, published=3, attempt=1)))
        assert _wait(lambda: server.board.step("a", 0).published == 3)      # the connection goes on
    finally:
        peer.close()
    assert [(p.reason, p.count) for p in server.refused_peers()] == [(MALFORMED_LINE, 4)]


def test_a_silent_peer_is_hung_up_on_and_noted(server: ControlServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "HANDSHAKE_TIMEOUT_S", 0.3)
    silent, gone = Peer(server), Peer(server)
    gone.close()                                          # connects and leaves without a word
    try:
        silent.challenge()
        assert silent.hung_up()
    finally:
        silent.close()
    assert _wait(lambda: server.refused == 2)
    assert {(p.reason, p.count) for p in server.refused_peers()} == {("no handshake", 2)}


def test_too_many_handshakes_at_once_are_refused(server: ControlServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "MAX_PENDING", 2)
    waiting = [Peer(server) for _ in range(2)]
    for p in waiting:
        p.challenge()                                # both are in their handshake now
    extra = Peer(server)
    try:
        assert extra.hung_up()
        assert _wait(lambda: server.refused_peers() != ())
        assert [p.reason for p in server.refused_peers()] == ["too many handshakes at once"]
        waiting[0].handshake(server.endpoint.secret)      # the others still get in
    finally:
        for p in [*waiting, extra]:
            p.close()


def test_a_client_does_not_follow_a_stranger_that_answers_on_the_port() -> None:
    """A fake coordinator without the run's secret cannot prove it has it: the task does not get in."""
    fake = socket.create_server(("127.0.0.1", 0))
    port = fake.getsockname()[1]

    def serve() -> None:
        conn, _ = fake.accept()
        with conn:
            conn.sendall(auth.challenge()[1])
            conn.makefile("rb").readline()
            conn.sendall(b"ok " + b"0" * auth.MAC_HEX + b"\n" + STOP.to_line())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    async def main() -> ControlClient:
        client = ControlClient(ControlEndpoint("127.0.0.1", port, b"s" * 32), attempt=1)
        await client.connect()
        return client

    client = asyncio.run(main())
    thread.join(5)
    fake.close()
    assert not client.connected and not client.stop_requested.is_set()
    assert client.problem == "the coordinator did not prove it holds the run's secret"


def test_a_coordinator_line_without_its_mac_is_not_followed() -> None:
    seal_key = (b"k" * 32, b"n" * 32, b"c" * 32)
    opener = auth.LineSeal(*seal_key, auth.TO_TASK)
    sender = auth.LineSeal(*seal_key, auth.TO_TASK)
    assert opener.open(sender.seal(b"pause\n")) == b"pause\n"
    with pytest.raises(auth.AuthError, match="bad line MAC"):
        opener.open(b"stop\n")
    bounced = auth.LineSeal(*seal_key, auth.TO_COORDINATOR).seal(b"stop\n")    # a task's line sent back
    with pytest.raises(auth.AuthError, match="bad line MAC"):
        auth.LineSeal(*seal_key, auth.TO_TASK).open(bounced)


def test_the_secret_is_in_no_repr_and_not_in_the_wire_format() -> None:
    server = ControlServer().start()
    endpoint = server.endpoint
    server.close()
    assert len(endpoint.secret) == 32 and endpoint.secret.hex() not in repr(endpoint)
    assert "secret" not in repr(endpoint)


# ---- TLS ---------------------------------------------------------------------------------------------------

def _self_signed(tmp: Path, name: str) -> tuple[str, str]:
    cert, key = tmp / f"{name}.pem", tmp / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", f"/CN={name}"],
                   check=True, capture_output=True)
    return str(cert), str(key)


def test_over_tls_a_task_gets_in_a_plain_peer_does_not_and_another_certificate_is_refused(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path, "coordinator")
    other_cert, other_key = _self_signed(tmp_path, "impostor")
    context, pin = server_context(cert, key)
    tls_server = ControlServer(tls=(context, pin)).start()
    impostor = ControlServer(tls=server_context(other_cert, other_key)).start()
    try:
        async def main() -> tuple[ControlClient, ControlClient]:
            good = ControlClient(tls_server.endpoint, attempt=1)
            await good.connect()
            good.send(Progress("a", 0, step=0, second=1, published=11))
            await asyncio.sleep(0.1)
            await good.aclose()
            # the impostor has the run's secret, not its certificate: the pin stops the task first
            fooled = ControlClient(ControlEndpoint(*impostor.address, tls_server.endpoint.secret, pin), attempt=1)
            await fooled.connect()
            return good, fooled

        good, fooled = asyncio.run(main())
        assert good.problem is None and tls_server.endpoint.tls_sha256 == pin
        assert _wait(lambda: tls_server.board.step("a", 0).published == 11)
        assert not fooled.connected and fooled.problem == "the coordinator's TLS certificate is not the one in the task plan"

        plain = Peer(tls_server)                          # speaks plain text to the TLS port
        try:
            plain.send(Progress("a", 0, published=99, attempt=1).to_line())
            assert plain.hung_up()
        finally:
            plain.close()
        assert _wait(lambda: tls_server.refused == 1)
        assert [p.reason for p in tls_server.refused_peers()] == ["TLS handshake failed"]
        assert tls_server.board.step("a", 0).published == 11
    finally:
        tls_server.close()
        impostor.close()


def test_a_tls_certificate_without_its_key_is_one_line(tmp_path: Path) -> None:
    cert, _ = _self_signed(tmp_path, "a")
    _, other_key = _self_signed(tmp_path, "b")
    with pytest.raises(ConfigError, match=r"--control-tls-key: .* does not go with"):
        server_context(cert, other_key)
    with pytest.raises(ConfigError, match="--control-tls-cert: cannot read"):
        server_context(str(tmp_path / "missing.pem"), other_key)
    (tmp_path / "empty.pem").write_text("nothing\n")
    with pytest.raises(ConfigError, match="holds no PEM certificate"):
        server_context(str(tmp_path / "empty.pem"), other_key)
    assert isinstance(server_context(cert, str(tmp_path / "a.key"))[0], ssl.SSLContext)


def test_the_plan_carries_the_endpoint_to_every_task_and_pickles_it_whole() -> None:
    import pickle

    from rbench.config.load import workload_from_dict
    from rbench.config.types import MetricsAccess
    from rbench.plan import plan_run

    server = ControlServer().start()
    server.close()
    w = workload_from_dict({"name": "t", "clusters": [{"name": "local", "uris": ["amqp://127.0.0.1:5672"]}],
                            "producers": 2, "consumers": 2, "rate": 10, "duration": 1, "metrics_port": 0,
                            "queues": {"pattern": "q-%d", "from": 1, "to": 2}})
    access = MetricsAccess("127.0.0.1")
    run = plan_run(w, "run-1", "/tmp", {"local": 2}, control=server.endpoint, metrics_access=access)
    tasks = run.clusters[0].tasks
    assert [t.control for t in tasks] == [server.endpoint] * 2 and all(t.metrics_access == access for t in tasks)
    assert pickle.loads(pickle.dumps(tasks[0])).control.secret == server.endpoint.secret     # Spark's channel carries it
    assert server.endpoint.secret.hex() not in repr(tasks[0]) and "secret" not in repr(tasks[0])
