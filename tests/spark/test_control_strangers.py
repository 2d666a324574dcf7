"""A live run on Spark while a stranger on the network talks to every port the coordinator opens.

The stranger knows the wire format but not the run's secret: it sends a forged progress line (a billion
messages), a forged task error, a forged ready, garbage, a 4 MiB line, a handshake with the wrong secret,
and a replay of a recorded handshake to the control port, and garbage, a forged POST and a 4 MiB header
to the run's /metrics. The run must complete; the live table, the run-wide Prometheus figures and
run.json must equal what the tasks really did; no traceback; run.json and one warning line name the peer.
A second run goes over TLS (control channel and /metrics) and must refuse no one.
"""
from __future__ import annotations

import io
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rbench.config.load import workload_from_dict
from rbench.coordinator import run as run_module
from rbench.coordinator.options import Listening
from rbench.coordinator.run import run_workload
from rbench.live.control import ControlServer, auth
from rbench.live.control.wire import Failed, Progress, Ready
from rbench.samples.record import RunRecord
from tests.promserver import free_port
from tests.runhelpers import read, run_json, workload_dict


class _Recording(ControlServer):
    """The run's own ControlServer, kept where the test can see it (its address, its board, its secret)."""

    made: list[ControlServer] = []

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        _Recording.made.append(self)


def _send_and_wait_close(address: tuple[str, int], data: bytes | Callable[[bytes], bytes], read_first: bool = True) -> None:
    """Send ``data`` (or what it makes of the server's first line) and read until the server hangs up."""
    with socket.create_connection(address, timeout=10) as s:
        first = s.makefile("rb").readline() if read_first else b""
        if callable(data):
            data = data(first)
        try:
            s.sendall(data)
            while s.recv(1 << 16):
                pass
        except OSError:
            pass                   # hung up on while still sending


def _stranger(server: ControlServer, metrics_port: int, done: list[str]) -> None:
    """Everything a stranger tries, once the load runs; ``done`` says what was sent (or what went wrong)."""
    try:
        deadline = time.monotonic() + 60
        while "local" not in server.board.t0_ns and time.monotonic() < deadline:
            time.sleep(0.05)
        address = server.address
        forged = [Progress("local", 0, step=0, second=int(time.time()), published=10**9, consumed=10**9, attempt=0),
                  Failed("local", 0, "BrokerError: forged by a stranger", attempt=0), Ready("local", 0, 1, attempt=0)]
        for record in forged:
            _send_and_wait_close(address, record.to_line())
            done.append(type(record).__name__)
        _send_and_wait_close(address, b"\x00\xff garbage \x01\n")
        _send_and_wait_close(address, b"y" * (4 << 20))
        _send_and_wait_close(address, lambda challenge: auth.answer(b"a guessed secret", challenge, "stranger/1")[0]
                             + forged[0].to_line())
        # a recorded handshake (made with the secret, as a real task's would be) replayed on a new connection
        with socket.create_connection(address, timeout=10) as s:
            recorded, _, _ = auth.answer(server.endpoint.secret, s.makefile("rb").readline(), "task/1")
            s.sendall(recorded)
            s.makefile("rb").readline()
        _send_and_wait_close(address, recorded + forged[0].to_line())
        done.append("control")
        metrics = ("127.0.0.1", metrics_port)
        _send_and_wait_close(metrics, b"\x16\x03\x01garbage\r\n\r\n", read_first=False)
        body = b"rbench_run_published_total 1e12\n"
        _send_and_wait_close(metrics, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
                             read_first=False)
        _send_and_wait_close(metrics, b"GET /" + b"a" * (4 << 20) + b" HTTP/1.1\r\n\r\n", read_first=False)
        done.append("metrics")
    except Exception as exc:
        done.append(f"stranger failed: {type(exc).__name__}: {exc}")


def _published_metric(server: ControlServer) -> float:
    """rbench_run_published_total as the run-wide /metrics serves it (the board's hook is its collector)."""
    (metrics,) = [h.__self__ for h in server.board.hooks]        # type: ignore[attr-defined]
    family = next(f for f in metrics.collect() if f.name == "rbench_run_published")
    return sum(s.value for s in family.samples if s.name == "rbench_run_published_total")


def test_a_stranger_on_every_port_changes_nothing_and_is_named(spark: Any, amqp_url: str, unique_name: str,
                                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capfd: pytest.CaptureFixture[str]) -> None:
    _Recording.made = []
    monkeypatch.setattr(run_module, "ControlServer", _Recording)
    w = workload_from_dict(workload_dict(amqp_url, unique_name, producers=2, consumers=2, rate=200, duration=6))
    port = free_port()
    done: list[str] = []
    out = io.StringIO()

    def attack() -> None:
        while not _Recording.made:
            time.sleep(0.02)
        _stranger(_Recording.made[0], port, done)

    thread = threading.Thread(target=attack, daemon=True)
    thread.start()
    result = run_workload(w, tmp_path, spark, out=out, metrics_port=port)
    thread.join(30)
    shown = out.getvalue()
    assert done == ["Progress", "Failed", "Ready", "control", "metrics"], done
    assert result.status == "complete", shown
    server = _Recording.made[0]
    info = run_json(result.run_dir)
    tasks = info["clusters"][0]["task_results"]
    published = sum(r["published"] for r in tasks)
    assert published == read(result.run_dir, "published").num_rows > 0
    # the live table, the run-wide metrics and run.json all hold what the tasks did, not what was forged
    assert server.board.step("local", 0).published == published
    assert _published_metric(server) == published
    assert "step 2/" not in shown and "forged" not in shown and not server.board.errors
    assert {a.host for a in server.board.attempts.values()} == {socket.gethostname()}
    # run.json names the peer; one warning line says it at the end
    assert info["control_refused"] == [r.to_json() for r in RunRecord.from_json(info).control_refused]
    (refused,) = info["control_refused"]
    assert (refused["address"], refused["reason"], refused["count"]) == ("127.0.0.1", "bad handshake", 7)
    assert "rbench: warning: control channel: refused 7 connection(s) from 127.0.0.1 (bad handshake)" in shown
    assert "Traceback" not in capfd.readouterr().err


def _self_signed(tmp: Path) -> tuple[str, str]:
    cert, key = tmp / "run.pem", tmp / "run.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=rbench-run",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return str(cert), str(key)


def test_a_run_over_tls_with_metrics_on_https_refuses_no_one(spark: Any, amqp_url: str, unique_name: str,
                                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TLS on the control channel, HTTPS and basic auth on the run's and the task's /metrics: the run works, a
    scrape with the user's credentials reads the figures, one without gets a 401."""
    import base64
    import urllib.error

    cert, key = _self_signed(tmp_path)
    monkeypatch.setenv("RBENCH_METRICS_PASSWORD", "scrape-me")
    w = workload_from_dict(workload_dict(amqp_url, unique_name, producers=1, consumers=1, rate=100, duration=3,
                                         metrics_port=0))
    port = free_port()
    scraped: list[str] = []
    anonymous: list[int] = []

    def scrape() -> None:
        context = ssl.create_default_context(cafile=cert)
        deadline = time.monotonic() + 120
        request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics",
                                         headers={"Authorization": "Basic " + base64.b64encode(b"prom:scrape-me").decode()})
        while time.monotonic() < deadline and not any("rbench_run_published_total{" in s for s in scraped):
            try:
                scraped.append(urllib.request.urlopen(request, timeout=5, context=context).read().decode())
                urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=5, context=context)
            except urllib.error.HTTPError as refused:
                anonymous.append(refused.code)
            except OSError:
                time.sleep(0.2)

    thread = threading.Thread(target=scrape, daemon=True)
    thread.start()
    out = io.StringIO()
    listening = Listening(metrics_bind="127.0.0.1", metrics_tls_cert=cert, metrics_tls_key=key,
                          control_tls_cert=cert, control_tls_key=key, metrics_user="prom")
    result = run_workload(w, tmp_path, spark, out=out, metrics_port=port, metrics_linger_s=1.0, listening=listening)
    thread.join(10)
    assert result.status == "complete", out.getvalue()
    info = run_json(result.run_dir)
    assert info["control_refused"] == [] and "refused" not in out.getvalue()
    assert info["metrics_endpoint"] == f"https://127.0.0.1:{port}/metrics"
    assert sum(r["published"] for r in info["clusters"][0]["task_results"]) == read(result.run_dir, "published").num_rows > 0
    assert any("rbench_run_published_total{" in s for s in scraped) and anonymous and set(anonymous) == {401}
    # the task served its own /metrics over HTTPS too (its PEM came in the task plan)
    assert all(e.startswith("https://127.0.0.1:") for e in info["clusters"][0]["metrics_endpoints"]), info["clusters"][0]
    # the tasks got in over TLS: their hello (pid) and ready lines reached the coordinator
    tasks = info["clusters"][0]["stage_attempts"][0]["tasks"]
    assert tasks and all(t["pid"] and t["reached_t0"] for t in tasks), tasks
