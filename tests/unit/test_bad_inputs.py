"""Each bad input issue 11 listed, through the CLI's main(): one line, exit 2, the field named, no secret.

The classes these belong to are covered by the generated cases of test_validation_properties.py;
here each reported case is pinned with the first line it now prints.
"""
from __future__ import annotations

import contextlib
import io
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from rbench.cli import main
from rbench.config.load import load_workload
from rbench.config.uri import BrokerUri, mask_text, mask_uri, parse_uri
from rbench.errors import ConfigError

SECRET = "Zq-s3cret-pw"


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def refused(*argv: str) -> str:
    """The one line a refused command prints (and checks it is one line, exit 2, no secret)."""
    code, out, err = run_cli(*argv)
    assert code == 2, (code, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert SECRET not in out + err
    return lines[0]


def workload_file(tmp_path: Path, uris: Any = None, **fields: Any) -> str:
    doc = {"name": "t", "clusters": [{"name": "a", "uris": uris or [f"amqp://guest:{SECRET}@127.0.0.1:5672/"]}],
           "duration": 5, **fields}
    cluster_extra = fields.pop("cluster_extra", None)
    if cluster_extra:
        doc.pop("cluster_extra")
        doc["clusters"][0].update(cluster_extra)
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(doc))
    return str(f)


# ---- URIs: parsed once, masked always ----------------------------------------------------------

def test_port_out_of_range_is_one_masked_line(tmp_path: Path) -> None:
    line = refused("validate", workload_file(tmp_path, [f"amqp://guest:{SECRET}@127.0.0.1:99999/"]))
    assert line.endswith("clusters.0.uris: [0] amqp://***@127.0.0.1:99999/: expected a port 1-65535"), line


def test_unclosed_ipv6_bracket_is_one_masked_line(tmp_path: Path) -> None:
    line = refused("validate", workload_file(tmp_path, [f"amqp://guest:{SECRET}@[::1:5672/"]))
    assert "clusters.0.uris: [0] amqp://***@[::1:5672/: unclosed '['" in line, line


def test_uri_given_as_a_string_names_the_type_not_the_value(tmp_path: Path) -> None:
    line = refused("validate", workload_file(tmp_path, f"amqp://guest:{SECRET}@127.0.0.1:5672/"))
    assert line.endswith("clusters.0.uris: Input should be a valid list (got a string)"), line


def test_unknown_password_field_is_named_without_its_value(tmp_path: Path) -> None:
    line = refused("validate", workload_file(tmp_path, cluster_extra={"password": SECRET}))
    assert line.endswith("clusters.0.password: unknown field"), line


@pytest.mark.parametrize("uri, expected", [
    ("amqp://u:p@h:5673/v", ("amqp", "h", 5673, "u", "p", "v")),
    ("amqps://h", ("amqps", "h", 5671, "guest", "guest", "/")),
    ("amqp://u:p%40ss@[::1]:5672/%2F", ("amqp", "::1", 5672, "u", "p@ss", "/")),
    ("amqp://", ("amqp", "localhost", 5672, "guest", "guest", "/")),
    ("rabbitmq-stream://u:p@h/", ("rabbitmq-stream", "h", 5552, "u", "p", "/")),
])
def test_uri_parts(uri: str, expected: tuple[Any, ...]) -> None:
    schemes = ("amqp", "amqps", "rabbitmq-stream")
    u = parse_uri(uri, schemes)
    assert (u.scheme, u.host, u.port, u.user, u.password, u.vhost) == expected


def test_tls_options_are_typed_and_unknown_options_refused() -> None:
    u = parse_uri("amqps://u:p@h:5671/?verify=verify_none&cacertfile=/ca.pem&server_name_indication=b&heartbeat=5")
    assert u.tls and u.option("verify") == "verify_none" and u.option("cacertfile") == "/ca.pem"
    assert u.int_option("heartbeat", 60) == 5
    for bad in ("amqp://h/?heartbeat=x", "amqp://h/?verify=maybe", f"amqp://u:{SECRET}@h/?nosuch=1"):
        with pytest.raises(ConfigError) as info:
            parse_uri(bad)
        assert SECRET not in str(info.value)


def test_typed_uri_never_prints_its_password() -> None:
    u = parse_uri(f"amqp://guest:{SECRET}@h:5672/v")
    assert isinstance(u, BrokerUri)
    for shown in (str(u), repr(u), u.masked, f"{u}"):
        assert SECRET not in shown
    assert u.text() == f"amqp://guest:{SECRET}@h:5672/v"       # the handshake still has it


@pytest.mark.parametrize("text", [
    f"amqp://guest:{SECRET}@127.0.0.1:99999/", f"amqp://guest:{SECRET}@[::1:5672/", f"amqp://guest:{SECRET}",
    f"amqp://gu\nest:{SECRET}@h", f"guest:{SECRET}@h", f"amqp://a@b:{SECRET}@h/", f"http://u:{SECRET}@[zz]:1",
])
def test_masking_never_raises_and_never_shows_the_secret(text: str) -> None:
    assert SECRET not in mask_uri(text)
    assert SECRET not in mask_text(f"error near '{text}', again {text}.")


def test_masking_takes_anything() -> None:
    for value in (None, 5, ["amqp://u:p@h"], b"amqp://u:p@h", "", "://", "[", "amqp://[", "amqp://@"):
        assert isinstance(mask_uri(value), str)


# ---- limits at validation ----------------------------------------------------------------------

def test_message_size_over_the_brokers_limit_is_refused(tmp_path: Path) -> None:
    line = refused("validate", workload_file(tmp_path, size=200_000_000))
    assert "size: expected at most 134217728 bytes, the max_message_size of cluster a" in line, line
    ok = workload_file(tmp_path, size=200_000_000, cluster_extra={"max_message_size": 512 * 1024 * 1024})
    assert run_cli("validate", ok)[0] == 0                  # configurable: a broker with a raised limit


def test_metrics_port_out_of_range(tmp_path: Path) -> None:
    line = refused("validate", workload_file(tmp_path, metrics_port=70000))
    assert line.endswith("metrics_port: Input should be less than or equal to 65535 (got 70000)"), line


@pytest.mark.parametrize("other", ["rate_steps", "variable_rate"])
def test_rate_beside_steps_is_refused(tmp_path: Path, other: str) -> None:
    line = refused("validate", workload_file(tmp_path, rate=10, **{other: [{"rate": 5, "duration": 2}]}))
    assert f"rate: give rate or {other}, not both" in line, line


@pytest.mark.parametrize("field, value, expected", [
    ("tasks", 0, "tasks"), ("producers", -1, "producers"), ("consumer", {"prefetch": 70000}, "consumer.prefetch"),
    ("queues", {"pattern": "q-%d", "from": 1, "to": 10**9}, "to: expected at most 100000 queues"),
    ("duration", float("inf"), "duration"),
])
def test_counts_and_numbers_out_of_range(tmp_path: Path, field: str, value: Any, expected: str) -> None:
    assert expected in refused("validate", workload_file(tmp_path, **{field: value}))


def test_perftest_negative_rate_is_refused() -> None:
    line = refused("perftest", "-r", "-100", "-z", "1", "--print-workload")
    assert line == "rbench perftest: -r/--rate: expected a rate > 0 msg/s, or -1 for no limit (PerfTest's default), " \
                   "got -100", line
    code, out, _ = run_cli("perftest", "-r", "-1", "-z", "1", "--print-workload")
    assert code == 0 and "rate:" not in out                # -1 is PerfTest's own "no limit"


def test_plan_with_zero_slots_is_refused() -> None:
    line = refused("plan", "--slots", "0", "conf/workloads/quickstart.yaml")
    assert line == "rbench plan: argument --slots: expected a whole number >= 1, got 0", line


def test_fixed_metrics_port_in_use_is_an_error_before_spark(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        f = workload_file(tmp_path, uris=["amqp://guest:guest@127.0.0.1:5672/"], metrics_port=port, tasks=1)
        line = refused("run", f, "--master", "local[1]")
    assert f"metrics_port: port {port} is already in use on this host" in line, line


# ---- --print-workload runs as printed ----------------------------------------------------------

def test_print_workload_writes_password_as_a_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run_cli("perftest", "-h", f"amqp://guest:{SECRET}@127.0.0.1:5672/", "-z", "1", "--print-workload")
    assert code == 0 and SECRET not in out + err
    assert "# credentials: ${RBENCH_PASSWORD} is the password of amqp://guest:***@127.0.0.1:5672/" in out
    f = tmp_path / "printed.yaml"
    f.write_text(out)
    with pytest.raises(ConfigError, match="RBENCH_PASSWORD is not set"):
        load_workload(f)
    monkeypatch.setenv("RBENCH_PASSWORD", SECRET)
    assert load_workload(f).clusters[0].uris == [f"amqp://guest:{SECRET}@127.0.0.1:5672/"]


# ---- small ones --------------------------------------------------------------------------------

def test_stream_publish_does_not_guess_5552_for_another_amqp_port() -> None:
    line = refused("stream-publish", "--uri", f"amqp://guest:{SECRET}@127.0.0.1:5999/", "--single", "1",
                   "--batch", "1", "--rounds", "1")
    assert line.startswith("rbench stream-publish: amqp://guest:***@127.0.0.1:5999/: AMQP port 5999 is not the "
                           "default, so the stream port cannot be derived"), line
