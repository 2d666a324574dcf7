"""PerfTest flags map onto the workload model as PerfTest means them."""
from __future__ import annotations

from pathlib import Path

import pytest

from rbench.cli import build_parser, main
from rbench.commands.perftest import workload_dict
from rbench.config.load import load_workload, workload_from_dict

ROOT = Path(__file__).resolve().parents[2]
SIZING = ("-z 1800 -f persistent -q 1000 -c 1000 -ct -1 -ad false --rate 50 --size 1024 "
          "--queue-pattern perf-test-%d --queue-pattern-from 1 --queue-pattern-to 100 "
          "-qa auto-delete=false,durable=false,x-queue-type=quorum --producers 200 --consumers 200 "
          "--consumer-latency 10000 --producer-random-start-delay 30").split()


def parse(argv: list[str]):
    return workload_from_dict(workload_dict(build_parser().parse_args(["perftest", *argv])))


def test_cluster_sizing_command_matches_committed_workload() -> None:
    flags = parse(SIZING)
    committed = load_workload(ROOT / "conf" / "workloads" / "cluster-sizing.yaml")
    assert flags.producers == committed.producers == 200
    assert flags.consumers == committed.consumers == 200
    assert flags.size == committed.size == 1024
    assert flags.queues.names("x") == committed.queues.names("x")
    assert flags.queues.type == committed.queues.type == "quorum"
    assert flags.queues.durable and not flags.queues.auto_delete
    assert flags.publisher == committed.publisher
    assert flags.consumer.prefetch == committed.consumer.prefetch == 1000
    assert flags.consumer.processing_delay == committed.consumer.processing_delay == pytest.approx(0.01)
    assert flags.rate == committed.steps()[0].rate == 50
    assert flags.duration == sum(s.duration for s in committed.steps()) == 1800


def test_common_flags() -> None:
    w = parse("-h amqp://u:p@h:5672/ -x 3 -y 2 -u q1 -z 10 -s 100 -q 50 -a -r 200 -A 10 -e ex -t topic -k rk "
              "-f mandatory -C 1000 -D 500".split())
    assert (w.producers, w.consumers, w.size, w.rate, w.duration) == (3, 2, 100, 200, 10)
    assert w.queues.names("x") == ["q1"] and w.queues.auto_delete            # PerfTest's -ad default
    assert w.consumer.auto_ack and w.consumer.prefetch == 50 and w.consumer.multi_ack_every == 10
    assert w.exchange.name == "ex" and w.exchange.type == "topic" and w.routing_key == "rk"
    assert w.publisher.mandatory and not w.publisher.confirm
    assert w.publisher.message_count == 1000 and w.consumer.message_count == 500


def test_uris_and_variable_rate() -> None:
    w = parse("-H amqp://a:1@h1/,amqp://a:1@h2/ -z 30 -V 100:10 -V 200:5".split())
    assert w.clusters[0].uris == ["amqp://a:1@h1/", "amqp://a:1@h2/"]
    assert [(s.rate, s.duration) for s in w.steps()] == [(100, 10), (200, 5), (100, 10), (200, 5)]


@pytest.mark.parametrize("argv, expected", [
    (["-x", "two", "-z", "1"], "-x/--producers: invalid int value"),
    (["--bogus", "-z", "1"], "unrecognized arguments: --bogus"),
    (["-qa", "novalue", "-z", "1"], "-qa/--queue-args: expected key=value"),
    (["-V", "100", "-z", "1"], "expected RATE:SECONDS"),
    (["-ad", "maybe", "-z", "1"], "expected true or false"),
    (["-x", "1"], "-z: expected a run time"),
])
def test_bad_flags_are_one_line(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perftest", *argv, "--print-workload"]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_print_workload_masks_password(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perftest", "-h", "amqp://bob:s3cret@h:5672/", "-z", "5", "--print-workload"]) == 0
    out = capsys.readouterr().out
    assert "s3cret" not in out and "bob:***@h:5672" in out
