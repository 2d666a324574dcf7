"""TLS for the control channel (optional): the coordinator serves a certificate the user gives
(``--control-tls-cert``/``--control-tls-key``), and each task accepts that certificate and no other.

No CA is involved: the certificate's SHA-256 travels to the tasks in their TaskPlan beside the run's
secret (rbench.config.types.ControlEndpoint), and a task compares it with what the coordinator
presents. The TLS handshake proves the coordinator holds the certificate's private key, so a
self-signed certificate made for the run is enough, and its host name does not matter. TLS hides the
lines from the network; who may send them is still decided by the handshake of rbench.live.control.auth.
"""
from __future__ import annotations

import hashlib
import ssl

from rbench.errors import ConfigError


def server_context(cert: str, key: str, flag: str = "--control-tls") -> tuple[ssl.SSLContext, bytes]:
    """(the coordinator's context, its certificate's SHA-256 to pin); ConfigError naming a file that will not do
    (``flag``: the options the files came from)."""
    try:
        with open(cert, "rb") as f:
            pem = f.read().decode("ascii", "replace")
    except OSError as exc:
        raise ConfigError(f"{flag}-cert: cannot read {cert!r} ({exc.strerror or exc})") from None
    start = pem.find("-----BEGIN CERTIFICATE-----")
    end = pem.find("-----END CERTIFICATE-----", start)
    if start < 0 or end < 0:
        raise ConfigError(f"{flag}-cert: {cert!r} holds no PEM certificate")
    try:
        der = ssl.PEM_cert_to_DER_cert(pem[start:end + len("-----END CERTIFICATE-----")])
    except ValueError as exc:
        raise ConfigError(f"{flag}-cert: {cert!r}: {exc}") from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{flag}-key: {key!r} does not go with {cert!r} or cannot be read "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    return context, hashlib.sha256(der).digest()


def client_context() -> ssl.SSLContext:
    """The task's context: no CA and no host name check; ``pinned`` decides (the certificate's SHA-256)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def pinned(ssl_object: ssl.SSLObject | ssl.SSLSocket | None, sha256: bytes) -> bool:
    """Whether the peer of this TLS connection presented the certificate with this SHA-256."""
    der = None if ssl_object is None else ssl_object.getpeercert(binary_form=True)
    return der is not None and hashlib.sha256(der).digest() == sha256
