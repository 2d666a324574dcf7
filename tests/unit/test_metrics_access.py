"""Who can read /metrics (rbench.live.metrics_http): basic auth checked in constant time, HTTPS from PEM text
(as the executors get it), and the run options' one-line errors; real servers on 127.0.0.1."""
from __future__ import annotations

import base64
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from rbench.config.types import MetricsAccess
from rbench.coordinator.options import METRICS_PASSWORD_ENV, Listening
from rbench.errors import ConfigError
from rbench.live.metrics_http import password_digest, serve_registry


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Counter("rbench_test_things", "things", registry=reg).inc(3)
    return reg


def get(url: str, auth: tuple[str, str] | None = None, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if auth is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def cert_pair(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "m.pem", tmp_path / "m.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "1", "-subj", "/CN=rbench-metrics", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


def test_basic_auth_lets_the_user_in_and_no_one_else() -> None:
    server, port = serve_registry(registry(), 0, MetricsAccess("127.0.0.1", "prom", password_digest("s3cret")))
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        assert get(url) == (401, "")
        assert get(url, ("prom", "wrong")) == (401, "")
        assert get(url, ("other", "s3cret")) == (401, "")
        status, body = get(url, ("prom", "s3cret"))
        assert status == 200 and "rbench_test_things_total 3.0" in body
    finally:
        server.shutdown()


def test_https_from_pem_text_and_plain_http_gets_nothing(tmp_path: Path) -> None:
    cert, key = cert_pair(tmp_path)
    access = MetricsAccess("127.0.0.1", tls_cert_pem=cert.read_bytes(), tls_key_pem=key.read_bytes())
    server, port = serve_registry(registry(), 0, access)
    try:
        context = ssl.create_default_context(cafile=str(cert))
        context.check_hostname = False
        status, body = get(f"https://127.0.0.1:{port}/metrics", context=context)
        assert status == 200 and "rbench_test_things_total" in body
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        # the server still serves after a plain-text peer
        assert get(f"https://127.0.0.1:{port}/metrics", context=context)[0] == 200
    finally:
        server.shutdown()


def test_the_password_comes_from_the_environment_and_is_never_held_in_clear(monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path: Path) -> None:
    monkeypatch.delenv(METRICS_PASSWORD_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"--metrics-user: expected the password in the environment variable "
                                          f"{METRICS_PASSWORD_ENV}"):
        Listening(metrics_user="prom").metrics_access()
    monkeypatch.setenv(METRICS_PASSWORD_ENV, "Sup3rS3cret")
    access = Listening(metrics_bind="127.0.0.1", metrics_user="prom").metrics_access()
    assert access.password_sha256 == password_digest("Sup3rS3cret")
    assert "Sup3rS3cret" not in repr(access) and "password" not in repr(access)
    with pytest.raises(ConfigError, match="--metrics-tls-cert: cannot read"):
        Listening(metrics_tls_cert=str(tmp_path / "none.pem"), metrics_tls_key=str(tmp_path / "none.key")).metrics_access()
