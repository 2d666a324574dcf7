"""Every URI option the docs name works where the docs say it does (issue 31).

docs/amqp10.md gives ``address`` (v1 | v2), ``credit`` and ``sasl`` for the amqp10 driver and
`rbench amqp10`; the generic check used to refuse them before the AMQP 1.0 reader saw them, so the
4.x address form could not be used. They are now read by the one URI reader, refused with one line
naming the option and its driver wherever a driver would ignore them, and never on stream URIs.
"""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml

from rbench.cli import main
from rbench.config.load import workload_from_dict
from rbench.config.uri import STREAM_SCHEMES, check_driver_options, parse_uri
from rbench.drivers.amqp091_connect import AmqpUri
from rbench.drivers.amqp10_uri import Amqp10Uri
from rbench.errors import ConfigError

SECRET = "Zq-opt-s3cret"
V2 = f"amqp://guest:{SECRET}@127.0.0.1:5680/?address=v2&credit=200&sasl=plain"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _workload(uri: str, **fields: object) -> dict[str, object]:
    return {"name": "t", "clusters": [{"name": "a", "uris": [uri]}], "duration": 5, **fields}


def test_the_amqp10_options_are_read_and_their_values_checked() -> None:
    u = parse_uri(V2)
    assert (u.option("address"), u.option("credit"), u.option("sasl")) == ("v2", "200", "plain")
    a = Amqp10Uri(V2)                                    # the AMQP 1.0 reader takes what validation let through
    assert (a.address, a.credit, a.sasl, a.port) == ("v2", 200, "plain", 5680)
    AmqpUri(V2)                                          # and so does the 0.9.1 admin that declares its queues
    assert parse_uri("amqp://h/?address=V2").option("address") == "V2"
    for bad, why in [("address=v3", "option address: expected v1"), ("credit=0", "option credit: expected"),
                     ("credit=x", "option credit: expected"), ("sasl=external", "option sasl: expected plain")]:
        with pytest.raises(ConfigError, match=why) as info:
            parse_uri(f"amqp://u:{SECRET}@h/?{bad}")
        assert SECRET not in str(info.value)


def test_amqp10_options_are_refused_on_stream_uris() -> None:
    with pytest.raises(ConfigError, match="option address: read by the amqp10 driver only, not on rabbitmq-stream://"):
        parse_uri("rabbitmq-stream://h:5552/?address=v2", STREAM_SCHEMES)


@pytest.mark.parametrize("driver", ["amqp091", "aiopika", "stream"])
def test_a_driver_that_ignores_them_refuses_them_naming_the_option(driver: str) -> None:
    check_driver_options(V2, "amqp10")
    for option in ("address=v2", "credit=5", "sasl=anonymous"):
        with pytest.raises(ConfigError) as info:
            check_driver_options(f"amqp://guest:{SECRET}@h/?heartbeat=5&{option}", driver)
        line = str(info.value)
        name = option.partition("=")[0]
        assert f"option {name}: read by the amqp10 driver only (here the {driver} driver)" in line, line
        assert SECRET not in line and "\n" not in line


def test_a_workload_takes_them_with_the_amqp10_driver_only() -> None:
    workload_from_dict(_workload(V2, driver="amqp10"))       # loading runs every rule (rbench.config.checks)
    with pytest.raises(ConfigError, match="option address: read by the amqp10 driver only \\(here the amqp091"):
        workload_from_dict(_workload(V2))


def test_the_cli_takes_address_v2_where_the_docs_say(tmp_path: Path) -> None:
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump(_workload(V2, driver="amqp10")))
    code, out, err = _cli("validate", str(f))
    assert code == 0, err
    # port 1: were the option not refused first, the broker probe would fail, not a run start
    code, out, err = _cli("perftest", "-h", V2.replace(":5680/", ":1/"), "-z", "5")
    assert code == 2 and len(err.splitlines()) == 1 and SECRET not in out + err, err
    assert "option address: read by the amqp10 driver only (here the amqp091 driver)" in err, err
