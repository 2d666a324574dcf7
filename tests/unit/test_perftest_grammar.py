"""PerfTest's whole option table: every option parses into its workload field or is refused in one line."""
from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rbench.cli import main
from rbench.config.load import workload_from_dict
from rbench.config.model import Workload
from rbench.errors import ConfigError
from rbench.perftest import compat, connection, grammar, mapping
from rbench.perftest.lines import CsvWriter, Interval, PerfTestOutput, format_rate
from rbench.perftest.option import DIFFERS, HONOURED, NO_EFFECT, REFUSED
from rbench.perftest.options import PERFTEST_OPTIONS, counts
from rbench.plan import plan

ROOT = Path(__file__).resolve().parents[2]
BASE = ["-z", "5"]

# (short, long) of every option PerfTest 2.x defines: PerfTest.getOptions() plus the options() of BaseMetrics,
# PrometheusMetrics, DatadogMetrics and JmxMetrics (rabbitmq-perf-test), listed independently of the table
PERFTEST_NAMES = [
    ("?", "help"), ("d", "id"), ("h", "uri"), ("H", "uris"), ("t", "type"), ("e", "exchange"), ("u", "queue"),
    ("k", "routing-key"), ("K", "random-routing-key"), ("sb", "skip-binding-queues"), ("i", "interval"),
    ("r", "rate"), ("R", "consumer-rate"), ("x", "producers"), ("y", "consumers"), ("S", "slow-start"),
    ("X", "producer-channel-count"), ("Y", "consumer-channel-count"), ("m", "ptxsize"), ("n", "ctxsize"),
    ("c", "confirm"), ("ct", "confirm-timeout"), ("a", "autoack"), ("A", "multi-ack-every"), ("q", "qos"),
    ("Q", "global-qos"), ("s", "size"), ("z", "time"), ("C", "pmessages"), ("D", "cmessages"), ("f", "flag"),
    ("M", "framemax"), ("b", "heartbeat"), ("p", "predeclared"), ("B", "body"), ("T", "body-content-type"),
    ("o", "output-file"), ("ad", "auto-delete"), ("ms", "use-millis"), ("qa", "queue-args"),
    ("L", "consumer-latency"), ("udsc", "use-default-ssl-context"), ("se", "sasl-external"), ("v", "version"),
    ("qp", "queue-pattern"), ("qpf", "queue-pattern-from"), ("qpt", "queue-pattern-to"),
    ("hst", "heartbeat-sender-threads"), ("mp", "message-properties"), ("rkcs", "routing-key-cache-size"),
    ("E", "exclusive"), ("P", "publishing-interval"), ("prsd", "producer-random-start-delay"),
    ("pst", "producer-scheduler-threads"), ("niot", "nio-threads"), ("niotp", "nio-thread-pool"),
    ("mh", "metrics-help"), ("env", "environment-variables"), ("dcr", "disable-connection-recovery"),
    ("ctp", "consumers-thread-pools"), ("st", "shutdown-timeout"), ("sst", "servers-startup-timeout"),
    ("sul", "servers-up-limit"), ("vr", "variable-rate"), ("vs", "variable-size"), ("vl", "variable-latency"),
    ("po", "polling"), ("pi", "polling-interval"), ("na", "nack"), ("re", "requeue"), ("jb", "json-body"),
    ("bfc", "body-field-count"), ("bc", "body-count"), ("ca", "consumer-args"),
    ("cri", "connection-recovery-interval"), ("qf", "queue-file"), ("sni", "server-name-indication"),
    ("qq", "quorum-queue"), ("sq", "stream-queue"), ("ew", "exit-when"), ("csd", "consumer-start-delay"),
    ("em", "exposed-metrics"), ("mf", "metrics-format"), ("mlb", "max-length-bytes"),
    ("smssb", "stream-max-segment-size-bytes"), ("ll", "leader-locator"), ("ma", "max-age"),
    ("sco", "stream-consumer-offset"), ("ei", "expected-instances"), ("isn", "instance-sync-namespace"),
    ("ist", "instance-sync-timeout"), ("o2uri", "oauth2-token-endpoint"), ("o2id", "oauth2-client-id"),
    ("o2sec", "oauth2-client-secret"), ("o2gr", "oauth2-grant-type"), ("o2p", "oauth2-parameters"),
    (None, "verbose"), (None, "verbose-full"), ("tsbs", "tcp-send-buffer-size"), ("trbs", "tcp-receive-buffer-size"),
    ("tnd", "tcp-no-delay"), ("cal", "connection-allocation"), ("nty", "netty"), ("ntyt", "netty-threads"),
    ("ntyep", "netty-epoll"), ("ntykq", "netty-kqueue"),
    ("mt", "metrics-tags"), ("mcla", "metrics-command-line-arguments"), ("mpx", "metrics-prefix"),
    ("mc", "metrics-client"), ("mcl", "metrics-class-loader"), ("mjm", "metrics-jvm-memory"),
    ("mjgc", "metrics-jvm-gc"), ("mjp", "metrics-processor"), ("mjt", "metrics-jvm-thread"),
    ("mpr", "metrics-prometheus"), ("mpe", "metrics-prometheus-endpoint"), ("mpp", "metrics-prometheus-port"),
    ("mda", "metrics-datadog"), ("mdk", "metrics-datadog-api-key"), ("mds", "metrics-datadog-step-size"),
    ("mdak", "metrics-datadog-application-key"), ("mdh", "metrics-datadog-host-tag"),
    ("mdd", "metrics-datadog-descriptions"), ("mdu", "metrics-datadog-uri"), ("mjx", "metrics-jmx"),
]

Check = Callable[[Workload], bool]
# every option rbench accepts: the tokens to give it (after -z 5) and what the workload must then say
ACCEPTED: dict[str, tuple[list[str], Check]] = {
    "id": (["-d", "nightly run 1"], lambda w: w.progress.id == "nightly run 1" and w.name == "nightly-run-1"),
    "time": (["-z", "7"], lambda w: w.duration == 7),
    "uri": (["-h", "amqp://u:p@broker:5673/v"], lambda w: w.clusters[0].uris == ["amqp://u:p@broker:5673/v"]),
    "uris": (["-H", "amqp://a/,amqp://b/"], lambda w: w.clusters[0].uris == ["amqp://a/", "amqp://b/"]),
    "heartbeat": (["-b", "15"], lambda w: w.clusters[0].uris[0].endswith("?heartbeat=15")),
    "framemax": (["-M", "65536"], lambda w: w.clusters[0].uris[0].endswith("?frame_max=65536")),
    "shutdown-timeout": (["-st", "3"], lambda w: w.drain_timeout == 3),
    "servers-startup-timeout": (["-sst", "30"], lambda w: w.startup_timeout == 30),
    "disable-connection-recovery": (["-dcr"], lambda w: True),
    "producers": (["-x", "3"], lambda w: w.producers == 3),
    "producer-channel-count": (["-x", "2", "-X", "3"], lambda w: w.producers == 6 and w.producer_channels == 3
                               and w.connections == "per_client"),
    "rate": (["-r", "250"], lambda w: w.rate == 250 and w.publisher.random_start_delay == 1.0),
    "publishing-interval": (["-P", "0.5"], lambda w: w.rate == 2.0),
    "variable-rate": (["-vr", "100:2", "-vr", "200:3"],
                      lambda w: [(s.rate, s.duration) for s in w.steps()] == [(100, 2), (200, 3)]),
    "producer-random-start-delay": (["-prsd", "7"], lambda w: w.publisher.random_start_delay == 7),
    "pmessages": (["-C", "1000"], lambda w: w.publisher.message_count == 1000),
    "size": (["-s", "4000"], lambda w: w.size == 4000),
    "variable-size": (["-vs", "100:2", "-vs", "1000:3"],
                      lambda w: [(s.size, s.duration) for s in w.variable_size or []] == [(100, 2), (1000, 3)]),
    "flag": (["-f", "persistent", "-f", "mandatory"],
             lambda w: w.publisher.persistent and w.publisher.mandatory and w.queues.durable),
    "confirm": (["-c", "50"], lambda w: w.publisher.confirm and w.publisher.confirm_window == 50),
    "confirm-timeout": (["-c", "1", "-ct", "-1"], lambda w: w.publisher.confirm_timeout is None),
    "routing-key": (["-k", "rk1"], lambda w: w.routing_key == "rk1"),
    "random-routing-key": (["-K"], lambda w: w.publisher.random_routing_key and w.publisher.routing_key_cache == 0),
    "routing-key-cache-size": (["-rkcs", "10"],
                               lambda w: w.publisher.random_routing_key and w.publisher.routing_key_cache == 10),
    "body": (["-B", "a.json,b.json"], lambda w: w.publisher.body_files == ["a.json", "b.json"]),
    "body-content-type": (["-T", "application/json"], lambda w: w.publisher.content_type == "application/json"),
    "json-body": (["-jb"], lambda w: w.publisher.json_body),
    "body-field-count": (["-jb", "-bfc", "20"], lambda w: w.publisher.json_body_fields == 20),
    "body-count": (["-jb", "-bc", "7"], lambda w: w.publisher.json_bodies == 7),
    "message-properties": (["-mp", "priority=5,contentType=text/plain,appId=x,tenant=t1"],
                           lambda w: w.publisher.properties == {"priority": 5, "content_type": "text/plain",
                                                                "app_id": "x", "headers": {"tenant": "t1"}}),
    "producer-scheduler-threads": (["-pst", "4"], lambda w: True),
    "consumers": (["-y", "4"], lambda w: w.consumers == 4),
    "consumer-channel-count": (["-y", "2", "-Y", "2"], lambda w: w.consumers == 4 and w.consumer_channels == 2),
    "connection-allocation": (["-cal", "round-robin"], lambda w: w.connections == "per_client"),
    "consumer-rate": (["-R", "50"], lambda w: w.consumer.rate == 50),
    "slow-start": (["-S"], lambda w: w.consumer.start_interval == 1.0),
    "consumer-start-delay": (["-csd", "3"], lambda w: w.consumer.start_delay == 3),
    "autoack": (["-a"], lambda w: w.consumer.auto_ack),
    "multi-ack-every": (["-q", "100", "-A", "10"], lambda w: w.consumer.multi_ack_every == 10),
    "qos": (["-q", "300"], lambda w: w.consumer.prefetch == 300),
    "global-qos": (["-Q", "500"], lambda w: w.consumer.global_prefetch == 500),
    "consumer-latency": (["-L", "2500"], lambda w: w.consumer.processing_delay == pytest.approx(0.0025)),
    "cmessages": (["-D", "300"], lambda w: w.consumer.message_count == 300),
    "nack": (["-na"], lambda w: w.consumer.nack and w.consumer.requeue),
    "requeue": (["-na", "-re", "false"], lambda w: w.consumer.nack and not w.consumer.requeue),
    "consumer-args": (["-ca", "x-priority=10"], lambda w: w.consumer.arguments == {"x-priority": 10}),
    "exit-when": (["-ew", "empty"], lambda w: w.consumer.exit_when == "empty"),
    "consumers-thread-pools": (["-ctp", "2"], lambda w: True),
    "queue": (["-u", "q1"], lambda w: w.queues.names("x") == ["q1"]),
    "queue-pattern": (["-qp", "q-%d", "-qpf", "1", "-qpt", "3"], lambda w: w.queues.names("x") == ["q-1", "q-2", "q-3"]),
    "queue-pattern-from": (["-qp", "q-%d", "-qpf", "2", "-qpt", "3"], lambda w: w.queues.names("x") == ["q-2", "q-3"]),
    "queue-pattern-to": (["-qp", "q-%d", "-qpf", "1", "-qpt", "2"], lambda w: w.queues.names("x") == ["q-1", "q-2"]),
    "quorum-queue": (["-qq"], lambda w: w.queues.type == "quorum" and w.queues.durable and not w.queues.auto_delete
                     and w.publisher.persistent),
    "stream-queue": (["-sq"], lambda w: w.queues.type == "stream" and w.resolved_driver() == "amqp091"
                     and w.consumer.prefetch == 200 and w.queues.arguments["x-max-length-bytes"] == 20 * 10**9),
    "queue-args": (["-qa", "x-max-length=10", "-qa", "x-overflow=reject-publish"],
                   lambda w: w.queues.arguments == {"x-max-length": 10, "x-overflow": "reject-publish"}),
    "auto-delete": (["-ad", "false"], lambda w: not w.queues.auto_delete),
    "exclusive": (["-E"], lambda w: w.queues.exclusive),
    "predeclared": (["-p"], lambda w: w.queues.predeclared),
    "max-length-bytes": (["-mlb", "50mb"], lambda w: w.queues.arguments["x-max-length-bytes"] == 50 * 10**6),
    "stream-max-segment-size-bytes": (["-sq", "-smssb", "100mb"],
                                      lambda w: w.queues.arguments["x-stream-max-segment-size-bytes"] == 10**8),
    "max-age": (["-sq", "-ma", "PT10M30S"], lambda w: w.queues.arguments["x-max-age"] == "630s"),
    "leader-locator": (["-qq", "-ll", "balanced"], lambda w: w.queues.arguments["x-queue-leader-locator"] == "balanced"),
    "stream-consumer-offset": (["-sq", "-sco", "first"],
                               lambda w: w.consumer.arguments["x-stream-offset"] == "first" and w.consumer.offset == "first"),
    "type": (["-t", "x-consistent-hash"], lambda w: w.exchange.type == "x-consistent-hash"
             and w.exchange.name == "x-consistent-hash"),
    "exchange": (["-e", "ex1"], lambda w: w.exchange.name == "ex1" and w.exchange.durable),
    "skip-binding-queues": (["-sb"], lambda w: not w.queues.bind),
    "ptxsize": (["-m", "10"], lambda w: w.publisher.tx_size == 10),
    "ctxsize": (["-n", "5"], lambda w: w.consumer.tx_size == 5),
    "interval": (["-i", "5"], lambda w: w.progress.interval == 5),
    "output-file": (["-o", "out.csv"], lambda w: w.progress.csv == "out.csv"),
    "metrics-format": (["-mf", "compact"], lambda w: w.progress.format == "compact"),
    "use-millis": (["-ms"], lambda w: w.progress.latency_unit == "ms"),
    "verbose": (["--verbose"], lambda w: True),
    "verbose-full": (["--verbose-full"], lambda w: True),
    "metrics-prometheus": (["-mpr"], lambda w: w.metrics_port == 8080),
    "metrics-prometheus-endpoint": (["-mpr", "-mpe", "/metrics"], lambda w: w.metrics_port == 8080),
    "metrics-prometheus-port": (["-mpr", "-mpp", "9100"], lambda w: w.metrics_port == 9100),
    "exposed-metrics": (["-em", "expected_published=100"], lambda w: True),
    "use-default-ssl-context": (["-udsc"], lambda w: True),
    "server-name-indication": (["-h", "amqps://h/", "-sni", "broker.example"],
                               lambda w: w.clusters[0].uris == ["amqps://h/?server_name_indication=broker.example"]),
    "heartbeat-sender-threads": (["-hst", "4"], lambda w: True),
    "tcp-no-delay": (["-tnd", "true"], lambda w: True),
}
EXITS = {"help": ["-?"], "version": ["-v"], "metrics-help": ["-mh"]}     # print and exit, no workload


def base(tokens: list[str]) -> list[str]:
    return tokens if "-z" in tokens else BASE + tokens


def workload(tokens: list[str]) -> Workload:
    return workload_from_dict(mapping.to_workload(grammar.parse(base(tokens))).workload)


def test_the_table_is_perftests_option_list() -> None:
    table = {(o.short, o.long) for o in PERFTEST_OPTIONS}
    assert table == set(PERFTEST_NAMES) and len(PERFTEST_OPTIONS) == len(PERFTEST_NAMES) == 126
    c = counts()
    assert sum(c.values()) == 126 and all(c[k] > 0 for k in (HONOURED, DIFFERS, NO_EFFECT, REFUSED))


def test_every_accepted_option_has_an_expectation_here() -> None:
    accepted = {o.key for o in PERFTEST_OPTIONS if o.handling != REFUSED}
    assert accepted == set(ACCEPTED) | set(EXITS)


@pytest.mark.parametrize("key", sorted(ACCEPTED))
def test_accepted_option_sets_its_workload_field(key: str) -> None:
    tokens, check = ACCEPTED[key]
    w = workload(tokens)
    assert check(w), f"{key}: {tokens} gave {w.model_dump(exclude_defaults=True)}"
    if not w.publisher.body_files:          # (the sample files do not exist; reading them is tested elsewhere)
        assert len(plan(w, w.clusters[0].name, 1, "r", "/tmp/x")) == 1      # the workload plans and runs


@pytest.mark.parametrize("key", sorted(ACCEPTED))
def test_accepted_option_runs_through_the_cli(key: str, capsys: pytest.CaptureFixture[str]) -> None:
    tokens, _ = ACCEPTED[key]
    assert main(["perftest", *base(tokens), "--print-workload"]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert "invalid" not in captured.err and "unrecognized" not in captured.err


@pytest.mark.parametrize("option", [o for o in PERFTEST_OPTIONS if o.handling == REFUSED], ids=lambda o: o.key)
@pytest.mark.parametrize("spelling", ["short", "long"])
def test_refused_option_is_one_line_naming_it(option: Any, spelling: str, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"-{option.short}" if spelling == "short" and option.short else f"--{option.long}"
    tokens = [name] + (["1"] if option.takes_value else [])
    assert main(["perftest", *BASE, *tokens, "--print-workload"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{option.label}: not supported by rbench: " in err
    assert "invalid" not in err and "unrecognized" not in err


@pytest.mark.parametrize("key, tokens", sorted(EXITS.items()))
def test_help_version_and_metrics_help_print_and_exit(key: str, tokens: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perftest", *tokens]) == 0
    out = capsys.readouterr().out
    assert {"help": "--consumer-latency", "version": "rbench", "metrics-help": "--metrics-prometheus"}[key] in out


def test_help_lists_every_option_with_perftests_words_and_rbench_meaning(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perftest", "--help"]) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())
    for o in PERFTEST_OPTIONS:
        assert ", ".join(o.names) in out, o.key
        assert " ".join(o.perftest.split()) in flat, o.key
        assert " ".join(o.rbench.split()) in flat, o.key


def test_docs_table_is_generated_from_the_parser_table() -> None:
    committed = (ROOT / "docs" / "perftest.md").read_text(encoding="utf-8")
    assert committed == compat.render_into(committed), "run `python -m rbench.perftest.compat docs/perftest.md`"
    for o in PERFTEST_OPTIONS:
        assert " ".join(f"`{n}`" for n in o.names) in committed


# ---- the grammar ----------------------------------------------------------------------------------
@pytest.mark.parametrize("tokens", [["-x", "2"], ["-x=2"], ["--producers", "2"], ["--producers=2"], ["-producers", "2"],
                                    ["-x2"]])
def test_value_forms_commons_cli_accepts(tokens: list[str]) -> None:
    assert workload(tokens).producers == 2


def test_multi_letter_short_options_are_never_split() -> None:
    w = workload(["-qq", "-st", "5", "-hst", "4", "-qa", "x-max-length=5", "-q", "10"])
    assert w.queues.type == "quorum" and w.drain_timeout == 5 and w.consumer.prefetch == 10
    assert w.clusters[0].uris == [connection.DEFAULT_URI]          # -hst is not -h st


def test_no_prefix_matching(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perftest", "-z", "1", "--prod", "2", "--print-workload"]) == 2
    assert "unrecognized arguments: --prod" in capsys.readouterr().err


def test_run_together_flags_and_lists() -> None:
    w = workload(["-aS", "-f", "persistent", "mandatory", "-e"])
    assert w.consumer.auto_ack and w.consumer.start_interval == 1.0
    assert w.publisher.persistent and w.publisher.mandatory and w.exchange.name == "direct"
    assert workload(["-e", "amq.default"]).exchange.name == ""


def test_negative_numbers_are_values_and_missing_values_are_named() -> None:
    assert workload(["-c", "0", "-ct", "-1"]).publisher.confirm_timeout is None
    with pytest.raises(ConfigError, match=r"-u/--queue: expects a value"):
        grammar.parse(["-u", "-x", "1"])
    with pytest.raises(ConfigError, match="unexpected argument 'stray'"):
        grammar.parse(["-x", "1", "stray"])


def test_repeated_single_value_keeps_the_first_and_says_so() -> None:
    mapped = mapping.to_workload(grammar.parse(BASE + ["-x", "2", "-x", "5"]))
    assert mapped.workload["producers"] == 2
    assert any("-x/--producers: given 2 times" in n for n in mapped.notes)


@pytest.mark.parametrize("tokens, expected", [
    (["-u", "a,b"], "-u/--queue: not supported by rbench: several queue names"),
    (["-vr", "0:5"], "-vr/--variable-rate: not supported by rbench: a rate of 0"),
    (["-r", "0"], "-r/--rate: not supported by rbench"),
    (["-a", "-R", "10"], "-R/--consumer-rate: not supported by rbench: with -a/--autoack"),
    (["-a", "-L", "10"], "-L/--consumer-latency: not supported by rbench: with -a/--autoack"),
    (["-c", "10", "-m", "5"], "-m/--ptxsize: not supported by rbench: with -c/--confirm"),
    (["-qp", "q-%03d", "-qpf", "1", "-qpt", "2"], "-qp/--queue-pattern: not supported by rbench: padded"),
    (["-mpe", "/prom"], "-mpe/--metrics-prometheus-endpoint: not supported by rbench"),
    (["-tnd", "false"], "-tnd/--tcp-no-delay: not supported by rbench"),
    (["-qp", "q-%d"], "give all three or none"),
    (["-q", "5", "-A", "10"], "--multi-ack-every must be less than or equal to --qos"),
    (["-ew", "never"], "--exit-when must be 'empty' or 'idle'"),
    (["-mf", "fancy"], "possible values are compact, default"),
    (["-qq", "-sq"], "not both"),
])
def test_values_rbench_cannot_honour_are_one_line(tokens: list[str], expected: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perftest", *BASE, *tokens, "--print-workload"]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_no_time_limit_is_allowed_with_exit_when() -> None:
    w = workload_from_dict(mapping.to_workload(grammar.parse(["-x", "0", "-ew", "idle"])).workload)
    assert w.duration == mapping.OPEN_ENDED_S and w.consumer.exit_when == "idle"


def test_small_sizes_are_said_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perftest", "-z", "1", "-s", "12", "-hst", "2", "--print-workload"]) == 0
    out = capsys.readouterr().out
    assert out.count("-s/--size: bodies below 24 bytes") == 1 and "-hst/--heartbeat-sender-threads: accepted, no effect" in out
    assert main(["perftest", "-z", "1", "-s", "100", "--print-workload"]) == 0
    assert "24 bytes" not in capsys.readouterr().out


# ---- PerfTest's outputs ---------------------------------------------------------------------------
def test_csv_columns_and_rows_follow_perftest(tmp_path: Path) -> None:
    fmt = PerfTestOutput("t1", producers=True, consumers=True, confirm=True, mandatory=False)
    header = fmt.csv_header().split(",")
    assert len(header) == 17 and header[:3] == ["id", "time (s)", "published (msg/s)"]
    assert header[7] == "min consumer latency (µs)" and header[-1] == "99th p. confirm latency (µs)"
    import numpy as np

    from rbench.live import histogram
    iv = Interval(elapsed_s=2.0004, seconds=2, published=2000, confirmed=1990, consumed=1980,
                  hist=histogram.bucket_counts(np.full(100, 2_000_000)),
                  confirm_hist=histogram.bucket_counts(np.full(100, 500_000)))
    row = fmt.csv_row(iv).split(",")
    assert row[:7] == ["t1", "2.000", "1000", "", "995", "0", "990"]        # returned empty: no mandatory flag
    assert 1880 <= int(row[8]) <= 2120 and 470 <= int(row[13]) <= 530      # µs, within the ±6 % buckets
    writer = CsvWriter(str(tmp_path / "o.csv"), fmt)
    writer.write(iv)
    writer.close()
    assert (tmp_path / "o.csv").read_text().splitlines()[1] == fmt.csv_row(iv)
    assert [format_rate(r) for r in (0, 0.256, 2.56, 25.6)] == ["0", "0.26", "2.6", "25"]


def test_progress_printer_sums_seconds_into_intervals(tmp_path: Path) -> None:
    from rbench.coordinator.progress import ProgressPrinter
    from rbench.live.control import ProgressBoard
    from rbench.live.control.wire import Progress, Started

    board = ProgressBoard()
    t0_s = 1_000_000
    board.add(Started("c", 0, t0_s * 10**9, step=0))
    fmt = PerfTestOutput("id1", consumers=True)
    csv = CsvWriter(str(tmp_path / "p.csv"), fmt)
    out = io.StringIO()
    from rbench.config.types import RunPlan, StepWindow

    plan = RunPlan(run_id="r", workload_name="w", driver="amqp091", steps=(StepWindow(0, None, 0.0, 4.0),), producers=1,
                   consumers=1, warmup_s=0.0, message_count=None, colocate=True, clusters=())
    printer = ProgressPrinter(board, plan, out=out, interval_s=2, style="default", perftest=fmt, csv=csv)
    printer.cluster = "c"
    lines = []
    for sec in range(t0_s, t0_s + 8):
        if sec < t0_s + 6:
            board.add(Progress("c", 0, step=0, second=sec, published=100, consumed=100))
        lines += printer.tick(sec)
    csv.close()
    assert lines[:3] == [f"id: id1, time {t:.3f} s, sent: 100 msg/s, received: 100 msg/s, min/median/75th/95th/99th "
                         "consumer latency: 0/0/0/0/0 µs" for t in (2.0, 4.0, 6.0)]
    rows = (tmp_path / "p.csv").read_text().splitlines()
    # past the planned end (4 s) an interval is written only when it holds counts (lines a busy machine delivered
    # late, a drain): every message is in a row, and the empty seconds after the run are not PerfTest's
    assert [r.split(",")[1] for r in rows[1:]] == ["2.000", "4.000", "6.000"]


def test_skip_binding_leaves_queues_unbound() -> None:
    bound = plan(workload(["-u", "q1"]), "default", 1, "r", "/tmp/x")[0].topology
    unbound = plan(workload(["-u", "q1", "-sb"]), "default", 1, "r", "/tmp/x")[0].topology
    assert bound.bindings == (("q1", "q1"),) and bound.exchange == "direct"
    assert unbound.bindings == () and unbound.exchange == "direct"
