"""Serve a Prometheus registry over HTTP or HTTPS, optionally behind basic auth (rbench.config.types.MetricsAccess).

prometheus_client's ``start_http_server`` binds and does TLS but has no authentication; a Prometheus scrape
config sends ``basic_auth`` credentials, so the endpoint checks them here, with the client's own WSGI app
behind. The password is compared as a SHA-256 digest in constant time (``hmac.compare_digest``) and a
refusal is a plain 401: no figure, no hint which half was wrong. Requests are not logged (a scrape a
second would flood the terminal), as prometheus_client does.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from rbench.config.types import MetricsAccess
from rbench.live import SHUTDOWN_POLL_S

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def password_digest(password: str) -> bytes:
    return hashlib.sha256(password.encode()).digest()


def _checked(app: Wsgi, user: str, digest: bytes) -> Wsgi:
    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        header = str(environ.get("HTTP_AUTHORIZATION", ""))
        ok = False
        if header.startswith("Basic "):
            try:
                given_user, _, given = base64.b64decode(header[6:], validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                given_user, given = "", ""
            ok = hmac.compare_digest(given_user.encode(), user.encode()) & \
                hmac.compare_digest(password_digest(given), digest)
        if ok:
            return app(environ, start_response)
        start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="rbench metrics"'),
                                            ("Content-Type", "text/plain")])
        return [b"unauthorized\n"]
    return guarded


def tls_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """A server context from PEM text (ssl loads key material from files only: a private temporary
    directory holds them for the call, and is removed at once)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="rbench-tls-") as folder:
        cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
        for path, data in ((cert, cert_pem), (key, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        context.load_cert_chain(cert, key)
    return context


def serve_registry(registry: CollectorRegistry, port: int, access: MetricsAccess) -> tuple[WSGIServer, int]:
    """Serve ``registry`` on ``access.bind``:``port`` (0: any free port) in a daemon thread; (server, port).
    OSError when the address cannot be bound; ssl.SSLError for key material that does not load."""
    app: Wsgi = make_wsgi_app(registry)
    if access.user is not None and access.password_sha256 is not None:
        app = _checked(app, access.user, access.password_sha256)
    context = tls_context(access.tls_cert_pem, access.tls_key_pem) \
        if access.tls_cert_pem is not None and access.tls_key_pem is not None else None
    server = make_server(access.bind, port, app, _Server, handler_class=_Quiet)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, name="rbench-metrics",
                     daemon=True).start()
    return server, int(server.server_port)
