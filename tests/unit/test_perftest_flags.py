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


def test_rate_search_flags_map_to_the_workloads_rate_search() -> None:
    w = parse("-x 2 -y 2 --rate-search 250:16000 --slo-p99 500ms --slo-consume-ratio 95% --search-step 30s "
              "--search-precision 5% --search-max-probes 12 --warmup 5".split())
    rs = w.rate_search
    assert rs is not None
    assert (rs.start, rs.max, rs.step, rs.precision, rs.max_probes) == (250, 16000, 30, pytest.approx(0.05), 12)
    assert (rs.slo.p99, rs.slo.consume_ratio) == (pytest.approx(0.5), pytest.approx(0.95))
    assert w.rate is None and w.duration is None and w.rate_steps is None and w.warmup == 5
    assert w.publisher.random_start_delay == 0          # no PerfTest ramp-up inside a probe unless -prsd
    assert [(s.rate, s.duration) for s in w.steps()] == [(250, 30)]     # the first probe
    # the defaults are the workload's, fractions read like percentages
    d = parse(["--rate-search", "100:100", "--search-precision", "0.1"]).rate_search
    assert d is not None and (d.step, d.precision, d.slo.p99, d.slo.consume_ratio) == (60, 0.1, 1.0, 0.98)


@pytest.mark.parametrize("argv, expected", [
    (["--rate-search", "100:800", "-r", "100"], "--rate-search: give --rate-search or -r/--rate, not both"),
    (["--rate-search", "100:800", "-vr", "100:10"], "--rate-search: give --rate-search or -vr/--variable-rate, not both"),
    (["--rate-search", "100:800", "-V", "100:10"], "--rate-search: give --rate-search or -V, not both"),
    (["--rate-search", "100:800", "--rate-steps", "100:10"], "give --rate-search or --rate-steps, not both"),
    (["--rate-search", "100:800", "-P", "1"], "give --rate-search or -P/--publishing-interval, not both"),
    (["--rate-search", "100:800", "-z", "10"], "give --rate-search or -z/--time, not both"),
    (["--rate-search", "100:800", "-C", "1000"], "give --rate-search or -C/--pmessages, not both"),
    (["--rate-search", "800:100"], "--rate-search: expected 0 < START <= MAX, got '800:100'"),
    (["--rate-search", "800"], "--rate-search: expected START:MAX in msg/s per producer"),
    (["--rate-search", "1:8", "--search-precision", "150%"], "--search-precision: expected a share in (0, 1)"),
    (["--rate-search", "1:8", "--search-precision", "fine"], "--search-precision: expected a share such as 5%"),
    (["--rate-search", "1:8", "--slo-consume-ratio", "0"], "--slo-consume-ratio: expected a share in (0, 1]"),
    (["--rate-search", "1:8", "--slo-p99", "soon"], "--slo-p99:"),
    (["--rate-search", "1:8", "--search-max-probes", "1"], "--search-max-probes: expected a whole number >= 2"),
    (["--rate-search", "1:8", "--search-step", "10s", "--warmup", "10"], "--warmup: expected less than the probe length"),
    (["--slo-p99", "1s", "-z", "10"], "--slo-p99: needs --rate-search START:MAX"),
    (["--search-step", "10s", "-r", "5", "-z", "10"], "--search-step: needs --rate-search START:MAX"),
])
def test_rate_search_flags_refused_in_one_line(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perftest", *argv, "--print-workload"]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1, err


def test_print_workload_shows_the_whole_rate_search_section(capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    assert main(["perftest", "--rate-search", "250:4000", "--slo-p99", "200ms", "--print-workload"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["rate_search"] == {"start": 250.0, "max": 4000.0, "slo": {"p99": 0.2, "consume_ratio": 0.98},
                                    "step": 60.0, "precision": 0.05, "max_probes": 20}
    assert "rate" not in shown and "duration" not in shown
    # the printed file is a workload `rbench run` accepts as it is
    assert workload_from_dict(shown).rate_search == parse(["--rate-search", "250:4000", "--slo-p99", "200ms"]).rate_search


def test_broker_sampler_endpoint_flags_map_to_broker_metrics() -> None:
    w = parse(["-h", "amqp://u:p@127.0.0.1:5680/", "-z", "3", "--management-uri", "http://127.0.0.1:15680",
               "--prometheus-uri", "http://127.0.0.1:15780/,https://n2:15781/metrics"])
    assert w.broker_metrics.management_urls == ["http://127.0.0.1:15680/api"]
    assert w.broker_metrics.prometheus_urls == ["http://127.0.0.1:15780/metrics", "https://n2:15781/metrics"]
    assert parse(["-z", "3"]).broker_metrics.management_urls is None


@pytest.mark.parametrize(("argv", "expected"), [
    (["--management-uri", "127.0.0.1:15680"], "--management-uri: expected an http or https URL naming a host"),
    (["--prometheus-uri", ","], "--prometheus-uri: expected comma-separated http or https URLs"),
    (["--management-uri", "http://admin:secret@h:15680"],
     "--management-uri: expected a URL without user or password (the sampler uses -h's), got one with credentials for h"),
])
def test_broker_sampler_endpoint_flags_refused_in_one_line(argv: list[str], expected: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perftest", "-z", "3", "--print-workload", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "secret" not in err
