"""The control channel's lines: typed records that round-trip, refused with a named error when malformed,
and bounded in length (rbench.live.control.wire and the server that reads them)."""
from __future__ import annotations

import io
import json
import logging
import socket
import time
from collections.abc import Callable

import pytest

from rbench.errors import CodecError
from rbench.live.control import ControlServer, auth
from rbench.live.control.wire import (
    MAX_LINE,
    PAUSE,
    RESUME,
    STOP,
    Failed,
    Hello,
    LineTooLong,
    MetricsEndpoint,
    Progress,
    Ready,
    Reconnecting,
    StartAt,
    Started,
    TaskLine,
    parse_answer,
    parse_line,
    read_line,
)
from rbench.samples.refused import MALFORMED_LINE

RECORDS: list[TaskLine] = [
    Hello("a", 0, "host-1", 123, attempt=4),
    Ready("a", 1, 1_700_000_000_000_000_000, attempt=5),
    Ready("a", 1, 7),                                        # a client that does not say its attempt
    Failed("b", 2, "BrokerError: queue 'q' not found", attempt=0),
    MetricsEndpoint("a", 0, 9100, "host-1", attempt=4),
    Reconnecting("a", 3, 1, True, attempt=4),
    Reconnecting("a", 3, 1, False),
    Started("a", 0, 1_700_000_000_000_000_000, step=0, attempt=4),
    Progress("a", 0, 2, 1_700_000_001, 500, 499, 480, 1, 0, {12: 400, 13: 80}, False, {9: 499}, 123_456, 7_890,
             {"cpu": 0.25, "loop_lag_p99_ms": 1.5}, attempt=4),
    Progress("a", 0, final=True),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_every_record_round_trips_through_its_line(record: TaskLine) -> None:
    line = record.to_line()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert parse_line(line) == record
    assert type(record).from_line(line) == record


def test_the_wire_keeps_the_keys_tasks_and_coordinators_of_this_version_send() -> None:
    assert json.loads(Hello("a", 0, "h", 9, attempt=2).to_line()) == \
        {"cluster": "a", "task": 0, "hello": True, "host": "h", "pid": 9, "attempt": 2}
    assert json.loads(Ready("a", 1, 77).to_line()) == {"cluster": "a", "task": 1, "ready": True, "proposal_ns": 77}
    assert json.loads(Started("a", 1, 5).to_line()) == {"cluster": "a", "task": 1, "t0_ns": 5, "step": 0}
    assert set(json.loads(Progress("a", 0).to_line())) == {
        "cluster", "task", "step", "second", "published", "confirmed", "consumed", "nacked", "returned", "hist",
        "final", "confirm_hist", "e2e_sum_ns", "confirm_sum_ns", "gen"}
    assert [c.to_line() for c in (STOP, PAUSE, RESUME, StartAt(42))] == [b"stop\n", b"pause\n", b"resume\n", b"t0 42\n"]
    assert [parse_answer(c.to_line()) for c in (STOP, PAUSE, RESUME, StartAt(42))] == [STOP, PAUSE, RESUME, StartAt(42)]


def _progress(**change: object) -> bytes:
    d = json.loads(Progress("a", 0, 1, 2, 3, attempt=1).to_line())
    d.update(change)
    return json.dumps(d).encode() + b"\n"


@pytest.mark.parametrize(("line", "says"), [
    (b"{not json\n", "not JSON"),
    (b"\xff\xfe\n", "not JSON"),
    (b"[1, 2]\n", "expected a JSON object"),
    (b'{"task": 0, "hello": true, "host": "h", "pid": 1}\n', "no 'cluster'"),
    (b'{"cluster": "a", "task": 0, "ready": true}\n', "no 'proposal_ns'"),
    (b'{"cluster": "a", "task": 0, "hello": true, "host": "h"}\n', "no 'pid'"),
    (_progress(attempt="x"), "'attempt' expected an integer"),
    (_progress(task="0"), "'task' expected an integer"),
    (_progress(published=True), "'published' expected an integer"),
    (_progress(final=1), "'final' expected true or false"),
    (_progress(hist={"x": 1}), "'hist' has a bucket 'x'"),
    (_progress(hist=[1]), "'hist' expected an object"),
    (_progress(gen={"cpu": "busy"}), "'gen' expected an object of numbers"),
    (_progress(cluster=None), "'cluster' expected a string"),
    (b'{"cluster": "a", "task": 0, "reconnecting": "yes", "step": 0}\n', "'reconnecting' expected true or false"),
    (b'{"cluster": "a", "task": 0, "ready": 1, "proposal_ns": 5}\n', "'ready' expected true"),
])
def test_a_malformed_line_is_refused_with_what_is_wrong(line: bytes, says: str) -> None:
    with pytest.raises(CodecError, match=says):
        parse_line(line)


def test_a_line_of_one_kind_is_not_read_as_another() -> None:
    with pytest.raises(CodecError, match="expected Ready, got Hello"):
        Ready.from_line(Hello("a", 0, "h", 1).to_line())
    with pytest.raises(CodecError, match="expected stop, pause, resume or t0"):
        parse_answer(b"t0 soon\n")


def test_a_4_mib_line_is_refused_after_reading_no_more_than_the_limit() -> None:
    stream = io.BytesIO(b"x" * (4 << 20) + b"\n")
    with pytest.raises(LineTooLong):
        read_line(stream)
    assert stream.tell() <= MAX_LINE + 1
    fits = io.BytesIO(b"y" * MAX_LINE + b"\n" + b"next\n")
    assert len(read_line(fits)) == MAX_LINE + 1 and read_line(fits) == b"next\n" and read_line(fits) == b""


def _connect(server: ControlServer) -> socket.socket:
    """A connection that passed the handshake; send lines with ``_sealer(sock)``."""
    sock = socket.create_connection(server.address, timeout=5)
    rfile = sock.makefile("rb")
    answer, server_nonce, client_nonce = auth.answer(server.endpoint.secret, rfile.readline(), "test/1")
    sock.sendall(answer)
    auth.check_welcome(server.endpoint.secret, server_nonce, client_nonce, rfile.readline())
    _SEALS[sock.fileno()] = auth.LineSeal(server.endpoint.secret, server_nonce, client_nonce, auth.TO_COORDINATOR)
    return sock


_SEALS: dict[int, auth.LineSeal] = {}


def _sealed(sock: socket.socket, data: bytes) -> bytes:
    """``data``'s lines, each with this connection's next MAC."""
    seal = _SEALS[sock.fileno()]
    return b"".join(seal.seal(line) for line in data.splitlines(keepends=True))


def _wait(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_the_server_refuses_bad_lines_logs_once_per_connection_and_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    server = ControlServer().start()
    try:
        with caplog.at_level(logging.WARNING, logger="rbench.live.control.server"), _connect(server) as sock:
            sock.sendall(_sealed(sock, b"{oops\n" + _progress(attempt="x") + b"[]\n"))
            sock.sendall(_sealed(sock, Progress("a", 0, step=0, second=1, published=7, attempt=1).to_line()))
            _wait(lambda: server.board.step("a", 0).published == 7)
            assert server.board.step("a", 0).published == 7          # the good line after the bad ones counted
            assert server.refused == 3
            # every line read counts in run.json's control_traffic, refused ones too; its bytes are the sealed lines'
            good = _sealed(sock, Progress("a", 0, step=0, second=2, published=8, attempt=1).to_line())
            sock.sendall(good)
            _wait(lambda: server.traffic.lines == 5)
            assert server.traffic.lines == 5 and server.traffic.connections == 1 and server.traffic.bytes > len(good)
        warnings = [r for r in caplog.records if r.name == "rbench.live.control.server"]
        assert len(warnings) == 1 and "not JSON" in warnings[0].getMessage() and warnings[0].exc_info is None
        assert [(p.reason, p.count) for p in server.refused_peers()] == [(MALFORMED_LINE, 3)]
    finally:
        server.close()


def test_the_server_hangs_up_on_a_line_longer_than_the_limit() -> None:
    server = ControlServer().start()
    try:
        with _connect(server) as sock:
            chunk = b"z" * (1 << 16)
            sent = 0
            try:
                while sent < 4 << 20:                 # 4 MiB and no newline
                    sock.sendall(chunk)
                    sent += len(chunk)
            except OSError:
                pass                                  # the server closed it while we were still sending
            sock.settimeout(5)
            try:
                rest = sock.recv(1 << 16)
            except ConnectionResetError:
                rest = b""
            assert rest == b""                        # closed by the server
        _wait(lambda: server.refused == 1)
        assert server.refused == 1 and server.idle()
        assert [p.reason for p in server.refused_peers()] == ["line too long"]
    finally:
        server.close()
