"""Property: no credential a URI carries, in its user-info or in its query, reaches mask_uri's or
mask_text's output, and neither function ever raises.

Generated (issue 29): URIs that parse and URIs that do not, with one or two credential-shaped
query options (any case, percent-encoded names, ``&``/``;`` separators, before or after other
options, a fragment after) whose value is the planted secret, which may hold ``@``, ``:``, ``/``
and ``?``. The secret's head and tail (marked Zq…Qz) are checked too, so a half-masked value fails.
"""
from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rbench.cli import main
from rbench.config.uri import KNOWN_OPTIONS, is_credential_option, mask_text, mask_uri, parse_uri
from rbench.errors import ConfigError

SETTINGS = dict(derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow])
ALNUM = "ABCDEFGHJKMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz23456789"

BASES = [
    "amqp://guest:guest@127.0.0.1:5672/", "amqp://guest@[::1]:5680/", "amqps://h:5671/vh", "amqp://h",
    "amqp://u:p@h:5672/?heartbeat=5", "amqp://h/?nosuch=1", "rabbitmq-stream://u:p@h:5552/",
    "http://push:9091/metrics/job/x", "https://u:p@gw:443/", "s3://bucket/path/to", "hdfs://nn:8020/a",
    "amqp://h:99999/", "amqp://[::1:5672/", "amqp://u:p@h/a/b", "amqp://ho st/", "guest@h:5672", "h:5672/", "",
]
NAMES = ["password", "passwd", "pass", "pwd", "secret", "token", "key", "api_key", "apikey", "access_key",
         "secret_key", "auth", "authorization", "credential", "credentials", "sig", "signature",
         "X-Amz-Security-Token", "X-Amz-Credential", "client_secret", "db_pass", "sas_token", "private_key",
         "passphrase", "oauth_token", "session_cookie"]

secrets = st.tuples(st.text(ALNUM, min_size=6, max_size=8), st.text("@:/?=%+.-_~!$()*,", max_size=4),
                    st.text(ALNUM, min_size=6, max_size=8)).map(lambda p: "Zq" + "".join(p) + "Qz")


@st.composite
def option_names(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(NAMES))
    case = draw(st.sampled_from(["as is", "lower", "upper", "mixed"]))
    if case == "lower":
        name = name.lower()
    elif case == "upper":
        name = name.upper()
    elif case == "mixed":
        flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
        name = "".join(c.upper() if f else c.lower() for c, f in zip(name, flips))
    if draw(st.booleans()) and draw(st.booleans()):          # a percent-encoded first letter
        name = f"%{ord(name[0]):02X}{name[1:]}"
    return name


@st.composite
def uris_with_query_credentials(draw: st.DrawFn) -> tuple[str, list[str]]:
    uri = draw(st.sampled_from(BASES))
    planted = []
    for _ in range(draw(st.integers(1, 2))):
        secret = draw(secrets)
        planted.append(secret)
        option = f"{draw(option_names())}={secret}"
        if "?" not in uri:
            uri += ("" if uri.endswith("/") or draw(st.booleans()) else "/") + "?" + option
        elif draw(st.booleans()):                            # first in the query, before the others
            head, _, rest = uri.partition("?")
            uri = f"{head}?{option}{draw(st.sampled_from(['&', ';']))}{rest}"
        else:
            uri += draw(st.sampled_from(["&", ";"])) + option
    uri += draw(st.sampled_from(["", "", "&heartbeat=5", "#frag", "&x=1#frag"]))
    return uri, planted


def _shows(text: str, secret: str) -> bool:
    return secret in text or secret[:6] in text or secret[-6:] in text


@settings(max_examples=2000, **SETTINGS)  # type: ignore[arg-type]
@given(case=uris_with_query_credentials())
def test_no_query_credential_is_ever_shown(case: tuple[str, list[str]]) -> None:
    uri, planted = case
    shown = [mask_uri(uri), mask_text(uri), mask_text(f"error near '{uri}', again {uri}."),
             mask_text(f"cannot reach {uri}: refused")]
    for text in shown:
        assert isinstance(text, str)
        for secret in planted:
            assert not _shows(text, secret), (uri, text)


@settings(max_examples=1000, **SETTINGS)  # type: ignore[arg-type]
@given(value=st.one_of(st.text(), st.text("amqp:/?&;=#@[]%:+ a1", max_size=40), st.binary(), st.integers(),
                       st.none(), st.lists(st.text(max_size=5), max_size=2)))
def test_masking_never_raises(value: object) -> None:
    assert isinstance(mask_uri(value), str)
    if isinstance(value, str):
        assert isinstance(mask_text(value), str)


def test_the_issue_line_masks_the_query_password() -> None:
    """issue 29: -h 'amqp://guest@[::1]:5680/?password=Sup3rS3cret' echoed the password."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["perftest", "-h", "amqp://guest@[::1]:5680/?password=Sup3rS3cret", "--print-workload"])
    out, err = out.getvalue(), err.getvalue()
    assert code == 2 and "Sup3rS3cret" not in out + err, err
    assert "?password=***" in err and "unknown URI option 'password'" in err, err


@pytest.mark.parametrize(("uri", "masked"), [
    ("amqp://h/?password=abc@def", "amqp://***"),          # the query's '@' is not a user-info's end
    ("amqp://u:pa?ss&token=x@h/", "amqp://***"),           # nor is the password's '?' a query's start
    ("amqp://u:p@h/,amqp://guest:Zq2222", "amqp://u:***@h/,amqp://guest:***"),    # a -H list: each URI masked
    ("amqp://u:p@h:1/,u:Zq2222@h:1", "amqp://***@h:1"),    # a vhost with an @ is not shown
    ("http://h:9091/a/b?X-Amz-Signature=abc&X-Amz-Credential=def&n=1",
     "http://h:9091/a/b?X-Amz-Signature=***&X-Amz-Credential=***&n=1"),
    ("amqps://h/?keyfile=/k.pem&auth_mechanism=PLAIN&nosuch=1", "amqps://h/?keyfile=/k.pem&auth_mechanism=PLAIN&nosuch=1"),
])
def test_what_masking_keeps_and_hides(uri: str, masked: str) -> None:
    assert mask_uri(uri) == masked


def test_rbench_options_are_not_credentials() -> None:
    """The options rbench reads are shown as given (a key file's path, a SASL mechanism's name)."""
    assert not any(is_credential_option(name) for name in KNOWN_OPTIONS)
    assert all(is_credential_option(name) for name in NAMES)
    assert is_credential_option("%70assword") and is_credential_option("Pass+Word")
    with pytest.raises(ConfigError):                        # and a credential is never an option rbench takes
        parse_uri("amqp://h/?password=x")


def test_masking_a_long_output_takes_linear_time() -> None:
    """The fault executor masks whole command outputs: a megabyte without '://' or '@' is read once
    (a scheme match tried at every character took 3 s for 20 kB)."""
    import time

    started = time.perf_counter()
    for text in ("x" * 1_000_000, " ?password=" + "x" * 1_000_000, "a1" * 500_000):
        assert mask_text(text).startswith(text[:3])
    assert time.perf_counter() - started < 10
