"""Every option RabbitMQ PerfTest defines, and what `rbench perftest` does with each.

One table serves the parser (names, whether a value follows), the help text and the
compatibility table in docs/perftest.md, so the three cannot drift apart. The
``perftest`` column quotes PerfTest's own option description (PerfTest.java and its
metrics classes, rabbitmq-perf-test, MPL-2.0/Apache-2.0) so users see the words they
know; ``rbench`` says what rbench does instead, in rbench's words.

Handling, one of four:

* ``honoured``  — rbench does what PerfTest does (the workload field it sets is named);
* ``differs``   — rbench does it, with a difference stated in ``rbench``;
* ``no_effect`` — accepted so saved command lines run, changes nothing, said so at run time;
* ``refused``   — the run stops with one line: ``not supported by rbench: <reason>``.
"""
from __future__ import annotations

from rbench.errors import ConfigError
from rbench.perftest.option import DIFFERS, HONOURED, NO_EFFECT, RBENCH, REFUSED, Arg, Handling, Option


def _o(short: str | None, long: str | None, arg: Arg, metavar: str, perftest: str, handling: Handling, rbench: str,
       group: str, notice: str | None = None) -> Option:
    return Option(short, long, arg, metavar, perftest, handling, rbench, group, notice)


_NO_OAUTH = ("the amqp091 driver authenticates with the user and password of the AMQP URI (SASL PLAIN); "
             "there is no OAuth2 token flow")
_NO_JVM_IO = "rbench's clients run on a uvloop event loop per Spark task; Java NIO and Netty transports do not exist here"
_NO_JVM_METRICS = "there is no JVM in rbench's clients; rbench's Prometheus endpoint (-mpr) serves rbench_* metrics only"
_NO_SYNC = ("one rbench run already starts every Spark task together (a barrier stage); run one rbench with the total "
            "load instead of synchronising several instances")
_NO_DATADOG = "rbench has no Datadog registry; scrape rbench's Prometheus endpoint (-mpr) instead"

PERFTEST_OPTIONS: tuple[Option, ...] = (
    # ---- general -----------------------------------------------------------------------------
    _o("?", "help", "none", "", "show usage", HONOURED,
       "prints this help: every PerfTest option in PerfTest's words with rbench's meaning beside it", "general"),
    _o("v", "version", "none", "", "print version information", DIFFERS,
       "prints rbench's version (and the PerfTest grammar it reads), not PerfTest's", "general"),
    _o("env", "environment-variables", "none", "", "show usage with environment variables", REFUSED,
       "rbench reads PerfTest options from the command line only, never from environment variables", "general"),
    _o("d", "id", "one", "ID", "test ID, default is auto-generated", HONOURED,
       "progress.id: the id column of the CSV and of PerfTest-format lines; also the workload name (unless --name)",
       "output"),
    _o("z", "time", "one", "SECONDS", "run duration in seconds (unlimited by default)", DIFFERS,
       "duration; rbench then waits up to the drain timeout (-st, default 10 s) for outstanding confirms and "
       "deliveries before closing, where PerfTest stops at the time limit; a run needs -z, -C, --rate-steps, --rate-search or -ew "
       "(rbench has no run-until-Ctrl-C); fractions and units (90s, 5m) are accepted", "general"),
    # ---- connection ------------------------------------------------------------------------
    _o("h", "uri", "one", "URI", "connection URI, default is amqp://localhost", HONOURED,
       "clusters[0].uris (default amqp://guest:guest@127.0.0.1:5672/)", "connection"),
    _o("H", "uris", "one", "URI,URI", "connection URIs (separated by commas)", HONOURED,
       "clusters[0].uris: connections spread over them round-robin (connection i to URI i mod N first, then the next "
       "ones on failure), as PerfTest spreads its connections; with --connections per_task each Spark task's one "
       "connection goes to the first URI that answers", "connection"),
    _o("b", "heartbeat", "one", "SECONDS", "requested heartbeat interval, default is 0 (no interval requested)", HONOURED,
       "heartbeat=N on every AMQP URI (0 leaves rbench's request of 60 s, which the broker's value caps, as "
       "PerfTest's 0 takes the broker's)", "connection"),
    _o("M", "framemax", "one", "BYTES", "requested maximum frame size, default is 0 (no limit)", DIFFERS,
       "frame_max=N on every AMQP URI; rbench never requests more than 131072 bytes (its read buffer), so larger "
       "values are capped", "connection"),
    _o("st", "shutdown-timeout", "one", "SECONDS", "shutdown timeout, default is 5 seconds", DIFFERS,
       "drain_timeout: after publishing stops, how long rbench waits for outstanding confirms and deliveries before "
       "it closes (rbench's default is 10 s)", "connection"),
    _o("sst", "servers-startup-timeout", "one", "SECONDS",
       "start timeout in seconds (in case the servers(s) is (are) not available when the run starts). "
       "Default is to fail immediately if the servers(s) is (are) not available.", HONOURED,
       "startup_timeout: the driver keeps retrying a broker that refuses connections this long before failing",
       "connection"),
    _o("sul", "servers-up-limit", "one", "N",
       "number of available servers needed before starting the run. Used in conjunction with "
       "--servers-start-timeout. Default is deduced from --uri or --uris.", REFUSED,
       "rbench starts once one URI of -h/-H answers (it connects to the first that does)", "connection"),
    _o("dcr", "disable-connection-recovery", "none", "",
       "disable automatic connection recovery, default is false (recovery enabled)", NO_EFFECT,
       "rbench always rides through a lost connection (next URI first, until the workload's reconnect_timeout, "
       "60 s here; docs/drivers.md); -dcr does not turn that off (reconnect_timeout: 0 in a workload file does)",
       "connection"),
    _o("cri", "connection-recovery-interval", "one", "SECONDS",
       "connection recovery interval in seconds. Default is 5 seconds. Interval syntax, e.g. 30-60, is supported to "
       "specify an random interval between 2 values between each attempt.", REFUSED,
       "rbench's reconnect rounds follow a fixed back-off (0.1, 0.25, 0.5, 1, then every 2 s, until "
       "reconnect_timeout; docs/drivers.md): there is no interval to set", "connection"),
    _o("cal", "connection-allocation", "one", "random|round-robin",
       "the way to allocate connection across nodes (random or round-robin), default is random.", DIFFERS,
       "connections spread over the URIs of -h/-H round-robin (connection i of the cluster to node i mod N first, then "
       "the next ones on failure) whatever the value: round-robin is what it asks, random spreads them as evenly "
       "on average", "connection"),
    # ---- producers -------------------------------------------------------------------------
    _o("x", "producers", "one", "N", "producer count, default is 1", HONOURED, "producers (times -X)", "producers"),
    _o("X", "producer-channel-count", "one", "N", "channels per producer, default is 1", HONOURED,
       "producers = -x × -X and producer_channels = -X: each PerfTest producer channel is one rbench producer (own "
       "channel, own rate), and with connections: per_client (rbench perftest's default) each -X of them share one "
       "connection, as PerfTest's producer does (a Spark task's producers are grouped in order, so a group split "
       "over two tasks opens one connection in each)", "producers"),
    _o("r", "rate", "one", "MSG/S", "producer rate limit, default is no limit", HONOURED,
       "rate (msg/s per producer); -1 (PerfTest's default) is unlimited; other negative values and 0 are refused (use -x 0 for no publishing)",
       "producers"),
    _o("P", "publishing-interval", "one", "SECONDS",
       "publishing interval in seconds (opposite of producer rate limit)", HONOURED,
       "rate = 1/INTERVAL msg/s per producer (at least 0.1 s, as in PerfTest); overrides -r", "producers"),
    _o("vr", "variable-rate", "many", "RATE:SECONDS",
       "variable publishing rate with [RATE]:[DURATION] syntax, where [RATE] integer >= 0 and [DURATION] integer > 0. "
       "Use the option several times to specify several values.", HONOURED,
       "variable_rate, cycled until -z ends; a rate of 0 (a pause) is refused", "producers"),
    _o("prsd", "producer-random-start-delay", "one", "SECONDS",
       "max random delay in seconds to start producers, default is no delay", DIFFERS,
       "publisher.random_start_delay: each producer starts after a continuous uniform delay in [0, N) s (PerfTest: "
       "a whole number of ms in [1 ms, N s]); as in PerfTest it is 1 s when -r, -P or -vr is given without -prsd",
       "producers"),
    _o("C", "pmessages", "one", "N", "producer message count, default is 0 (no limit)", HONOURED,
       "publisher.message_count (0 = no limit)", "producers"),
    _o("s", "size", "one", "BYTES", "message size in bytes, default (and minimum value) is 12", DIFFERS,
       "size; every body carries rbench's 24-byte stamp, so bodies are at least 24 bytes (PerfTest's minimum is 12)",
       "producers", notice="-s/--size: bodies below 24 bytes are sent as 24 bytes (rbench's stamp: producer, sequence, "
                           "intended and actual send time); PerfTest's minimum is 12"),
    _o("vs", "variable-size", "many", "BYTES:SECONDS",
       "variable message size with [SIZE]:[DURATION] syntax, where [SIZE] integer > 0 and [DURATION] integer > 0. "
       "Use the option several times to specify several values.", DIFFERS,
       "variable_size, cycled over the run; sizes below 24 bytes are sent as 24", "producers"),
    _o("f", "flag", "many", "FLAG",
       "message flag(s), supported values: persistent and mandatory. Use the option several times to specify several "
       "values.", HONOURED,
       "persistent → publisher.persistent and durable queues; mandatory → publisher.mandatory", "producers"),
    _o("c", "confirm", "one", "N", "max unconfirmed publishes, default is -1 (no confirm)", HONOURED,
       "publisher.confirm (N >= 0) and confirm_window (0 = unbounded)", "producers"),
    _o("ct", "confirm-timeout", "one", "SECONDS",
       "waiting timeout for unconfirmed publishes before failing (in seconds), default is 30", DIFFERS,
       "publisher.confirm_timeout (-1: wait until the drain timeout): a message without a confirm after this long "
       "is counted timed out in the samples, and a producer whose window is full keeps waiting for room until the "
       "run ends; PerfTest stops a producer that waited this long for room in its confirm window", "producers"),
    _o("k", "routing-key", "one", "KEY", "routing key, default is auto-generated", HONOURED,
       "routing_key (default: the queue's name, which routes like PerfTest's generated key)", "producers"),
    _o("K", "random-routing-key", "none", "", "use random routing key per message, default is false", HONOURED,
       "publisher.random_routing_key: a new random (UUID) key per message", "producers"),
    _o("rkcs", "routing-key-cache-size", "one", "N",
       "size of the random routing keys cache. See --random-routing-key. Default is 0 (no cache).", HONOURED,
       "publisher.routing_key_cache: cycle through N random keys (N > 0 also turns -K on, as in PerfTest)",
       "producers"),
    _o("B", "body", "one", "FILE,FILE", "comma-separated list of files to use in message bodies", DIFFERS,
       "publisher.body_files, used in turn; the first 24 bytes of each body carry rbench's stamp (PerfTest sends the "
       "files unchanged and puts its timestamp in a header); files shorter than 24 bytes are padded", "producers",
       notice="-B/--body: the first 24 bytes of every body are rbench's stamp, not the file's bytes"),
    _o("T", "body-content-type", "one", "TYPE", "body content-type", HONOURED, "publisher.content_type", "producers"),
    _o("jb", "json-body", "none", "", "generate a random JSON document for message body. Use with --size.", DIFFERS,
       "publisher.json_body: random JSON documents of -s bytes, but their first 24 bytes carry rbench's binary "
       "stamp, so a body is not valid JSON", "producers",
       notice="--json-body: the first 24 bytes of every JSON body are rbench's binary stamp (the body is not valid JSON)"),
    _o("bfc", "body-field-count", "one", "N",
       "number of pre-generated fields and values for body. Use with --json-body. Default is 1000.", HONOURED,
       "publisher.json_body_fields", "producers"),
    _o("bc", "body-count", "one", "N",
       "number of pre-generated message bodies. Use with --json-body. Default is 100.", HONOURED,
       "publisher.json_bodies", "producers"),
    _o("mp", "message-properties", "one", "KEY=VALUE,…",
       "message properties as key/value pairs, separated by commas, e.g. priority=5. Non-standard properties are "
       "treated like arbitrary headers.", HONOURED,
       "publisher.properties (PerfTest's names, e.g. contentType, become AMQP's content_type; others go to headers)",
       "producers"),
    _o("pst", "producer-scheduler-threads", "one", "N",
       "number of threads to use when using --publishing-interval, default is calculated by PerfTest", NO_EFFECT,
       "rbench's producers run on each Spark task's event loop; there is no scheduler thread pool", "producers"),
    # ---- consumers -------------------------------------------------------------------------
    _o("y", "consumers", "one", "N", "consumer count, default is 1", HONOURED, "consumers (times -Y)", "consumers"),
    _o("Y", "consumer-channel-count", "one", "N", "channels per consumer, default is 1", HONOURED,
       "consumers = -y × -Y and consumer_channels = -Y: each PerfTest consumer channel is one rbench consumer, and each "
       "-Y of them share one connection (connections: per_client), as PerfTest's consumer does", "consumers"),
    _o("R", "consumer-rate", "one", "MSG/S", "consumer rate limit, default is no limit", HONOURED,
       "consumer.rate: each consumer finishes (acks) at most this many messages per second; -1 (PerfTest's default) is "
       "unlimited, other negative values are refused; refused with -a",
       "consumers"),
    _o("S", "slow-start", "none", "", "start consumers slowly (1 sec delay between each), default is false", DIFFERS,
       "consumer.start_interval = 1 s: consumers start 1 s apart within each Spark task (tasks start theirs in "
       "parallel)", "consumers"),
    _o("csd", "consumer-start-delay", "one", "SECONDS",
       "fixed delay before starting consumers in seconds, default is no delay", HONOURED,
       "consumer.start_delay: consumers subscribe this long after publishing starts", "consumers"),
    _o("a", "autoack", "none", "", "auto ack, default is false (no auto-ack)", HONOURED, "consumer.auto_ack",
       "consumers"),
    _o("A", "multi-ack-every", "one", "N", "multi ack every, default is 0 (no multi-ack)", HONOURED,
       "consumer.multi_ack_every (must not exceed -q, as in PerfTest)", "consumers"),
    _o("q", "qos", "one", "N", "consumer prefetch count, default is 0 (unlimited)", HONOURED, "consumer.prefetch",
       "consumers"),
    _o("Q", "global-qos", "one", "N", "channel prefetch count, default is 0 (unlimited)", HONOURED,
       "consumer.global_prefetch: basic.qos with global=true on each consumer's channel", "consumers"),
    _o("L", "consumer-latency", "one", "MICROSECONDS", "consumer latency in microseconds, default is 0", HONOURED,
       "consumer.processing_delay (in seconds there); refused with -a (an auto-ack consumer is never slowed)",
       "consumers"),
    _o("vl", "variable-latency", "many", "MICROSECONDS:SECONDS",
       "variable consumer processing latency with [MICROSECONDS]:[DURATION] syntax, where [MICROSECONDS] integer >= 0 "
       "and [DURATION] integer > 0. Use the option several times to specify several values.", REFUSED,
       "rbench's processing delay is fixed for a run; use -L", "consumers"),
    _o("D", "cmessages", "one", "N", "consumer message count, default is 0 (no limit)", HONOURED,
       "consumer.message_count (0 = no limit)", "consumers"),
    _o("na", "nack", "none", "", "nack messages, requeue them by default.", HONOURED,
       "consumer.nack: basic.nack instead of basic.ack", "consumers"),
    _o("re", "requeue", "one", "true|false", "should nacked messages be requeued, default is true.", HONOURED,
       "consumer.requeue", "consumers"),
    _o("ca", "consumer-args", "one", "KEY=VALUE,…",
       "consumer arguments as key/value pairs, separated by commas, e.g. x-priority=10", HONOURED,
       "consumer.arguments (basic.consume arguments)", "consumers"),
    _o("ew", "exit-when", "one", "empty|idle",
       "exit when queue(s) empty or consumer(s) idle for 1 second, valid values are empty or idle", HONOURED,
       "consumer.exit_when: checked every second; the run ends when every consumer has stopped (or at -z)",
       "consumers"),
    _o("po", "polling", "none", "", "use basic.get to consume messages. Do not use this in real applications. "
       "Default is false.", REFUSED, "rbench's consumers use basic.consume only", "consumers"),
    _o("pi", "polling-interval", "one", "MILLISECONDS",
       "time to wait before polling with basic.get, in millisecond, default is 0.", REFUSED,
       "rbench's consumers use basic.consume only (no polling)", "consumers"),
    _o("ctp", "consumers-thread-pools", "one", "N",
       "number of thread pools to use for all consumers, default is to use a thread pool for each consumer",
       NO_EFFECT, "rbench's consumers run on each Spark task's event loop; there are no consumer thread pools",
       "consumers"),
    # ---- queues and exchanges --------------------------------------------------------------
    _o("u", "queue", "one", "NAME", "queue name, default is auto-generated", DIFFERS,
       "queues.name; without -u rbench declares one queue, perf-test, shared by all consumers, where PerfTest gives "
       "each consumer its own server-named queue (every consumer then gets every message); several comma-separated "
       "names are refused (use --queue-pattern)", "queues and exchanges"),
    _o("qp", "queue-pattern", "one", "PATTERN",
       "queue name pattern for creating queues in sequence, e.g. 'perf-test-%d'", HONOURED,
       "queues.pattern (%d only; padded forms such as %03d are refused)", "queues and exchanges"),
    _o("qpf", "queue-pattern-from", "one", "N", "queue name pattern range start (inclusive)", HONOURED,
       "queues.from", "queues and exchanges"),
    _o("qpt", "queue-pattern-to", "one", "N", "queue name pattern range end (inclusive)", HONOURED, "queues.to",
       "queues and exchanges"),
    _o("qf", "queue-file", "one", "FILE", "file to look up queue names from", REFUSED,
       "a list of unrelated queue names has no place in rbench's queue model; use --queue-pattern",
       "queues and exchanges"),
    _o("qq", "quorum-queue", "none", "", "create quorum queue(s)", HONOURED,
       "queues.type = quorum (durable, persistent messages, no auto-delete, as PerfTest does)", "queues and exchanges"),
    _o("sq", "stream-queue", "none", "", "create stream queue(s)", DIFFERS,
       "queues.type = stream over AMQP 0-9-1 (driver amqp091, as PerfTest), persistent messages, prefetch 200 unless "
       "-q, x-max-length-bytes 20 GB and x-stream-max-segment-size-bytes 500 MB unless given; rbench publishes to "
       "streams through the default exchange where PerfTest binds them to its exchange", "queues and exchanges"),
    _o("qa", "queue-args", "many", "KEY=VALUE,…",
       "queue arguments as key/value pairs, separated by commas, e.g. x-max-length=10", HONOURED,
       "queues.arguments; x-queue-type sets queues.type; the keys durable, auto-delete and exclusive set those queue "
       "properties", "queues and exchanges"),
    _o("ad", "auto-delete", "one", "true|false", "should the queue be auto-deleted, default is true", HONOURED,
       "queues.auto_delete, and -ad false also sets queues.keep (the queues outlive the run; otherwise rbench deletes the "
       "queues it created after the run); values other than true/false are an error, PerfTest reads them as false",
       "queues and exchanges"),
    _o("E", "exclusive", "none", "",
       "use server-named exclusive queues. Such queues can only be used by their declaring connection! "
       "Default is false.", DIFFERS,
       "queues.exclusive: exclusive to the connection of the Spark task that declares and uses them, but named by "
       "rbench (-u or perf-test), not by the server", "queues and exchanges"),
    _o("p", "predeclared", "none", "", "allow use of predeclared objects, default is false", HONOURED,
       "queues.predeclared: queues are not declared, but bound to the exchange as PerfTest binds them (not with -sb "
       "or the default exchange)", "queues and exchanges"),
    _o("mlb", "max-length-bytes", "one", "SIZE",
       "max size of created queues, use 0 for no limit, default is no limit", HONOURED,
       "queues.arguments x-max-length-bytes (100gb, 50mb … in powers of 1000)", "queues and exchanges"),
    _o("smssb", "stream-max-segment-size-bytes", "one", "SIZE",
       "max size of stream segments when streams are in use, default is set by server", HONOURED,
       "queues.arguments x-stream-max-segment-size-bytes (at most 3gb)", "queues and exchanges"),
    _o("ma", "max-age", "one", "ISO-8601",
       "max age of stream segments using the ISO 8601 duration format, e.g. PT10M30S for 10 minutes 30 seconds, "
       "P5DT8H for 5 days 8 hours. Default is no max age.", HONOURED,
       "queues.arguments x-max-age (as whole seconds, e.g. 630s)", "queues and exchanges"),
    _o("ll", "leader-locator", "one", "client-local|balanced",
       "leader locator strategy for created quorum queues and streams. Possible values: client-local, balanced. "
       "Default is set by server.", HONOURED, "queues.arguments x-queue-leader-locator", "queues and exchanges"),
    _o("sco", "stream-consumer-offset", "one", "OFFSET",
       "stream offset to start listening from. Valid values are 'first', 'last', 'next', an unsigned long, or an ISO "
       "8601 formatted timestamp (eg. 2022-06-03T07:45:54Z). Default is 'next'.", HONOURED,
       "consumer.arguments x-stream-offset (and consumer.offset)", "queues and exchanges"),
    _o("t", "type", "one", "TYPE", "exchange type, default is direct", HONOURED,
       "exchange.type: any type the broker has, e.g. x-consistent-hash (the broker refuses unknown types)",
       "queues and exchanges"),
    _o("e", "exchange", "optional", "NAME", "exchange name, default is 'direct'", HONOURED,
       "exchange.name (default: the exchange type, as in PerfTest; amq.default is the default exchange); "
       "declared durable like PerfTest's; one that exists non-durable is used as it is", "queues and exchanges"),
    _o("sb", "skip-binding-queues", "none", "", "don't bind queues to the exchange, default is false", HONOURED,
       "queues.bind = false", "queues and exchanges"),
    # ---- transactions ----------------------------------------------------------------------
    _o("m", "ptxsize", "one", "N", "producer tx size, default is 0 (no transaction)", HONOURED,
       "publisher.tx_size: tx.select, tx.commit every N messages (refused with -c: the broker allows one or the "
       "other on a channel)", "transactions"),
    _o("n", "ctxsize", "one", "N", "consumer tx size, default is 0 (no transaction)", HONOURED,
       "consumer.tx_size: acks in transactions, tx.commit every N messages", "transactions"),
    # ---- output ----------------------------------------------------------------------------
    _o("i", "interval", "one", "SECONDS", "sampling interval in seconds, default is 1", HONOURED,
       "progress.interval: one status line and one CSV row per interval", "output"),
    _o("o", "output-file", "one", "FILE", "output file for timing results", DIFFERS,
       "progress.csv: PerfTest's CSV columns, one row per interval; consumer latency there is rbench's end-to-end "
       "latency from each message's intended send time (PerfTest: from its actual send time; equal while producers "
       "keep their schedule), read from log-bucket histograms (±6 %); exact percentiles are in the run's summary",
       "output"),
    _o("mf", "metrics-format", "one", "default|compact", "metrics format to use on the console, possible values are "
       "compact, default", HONOURED,
       "progress.format: PerfTest's default or compact status lines instead of rbench's", "output"),
    _o("ms", "use-millis", "none", "",
       "should latency be collected in milliseconds, default is false. Set to true if producers and consumers run on "
       "different machines.", DIFFERS,
       "progress.latency_unit = ms for PerfTest-format lines and the CSV; rbench always measures in nanoseconds with "
       "wall clocks (a queue's producers and consumers share a task, hence a clock)", "output"),
    _o(None, "verbose", "none", "", "Output message information. Use only with slow rates.", NO_EFFECT,
       "rbench prints no line per message; every message's timings are in the run's Parquet samples", "output"),
    _o(None, "verbose-full", "none", "",
       "Same as --verbose, but with message headers and body as well. Use only with slow rates.", NO_EFFECT,
       "rbench prints no line per message; every message's timings are in the run's Parquet samples", "output"),
    # ---- metrics ---------------------------------------------------------------------------
    _o("mh", "metrics-help", "none", "", "show metrics usage", HONOURED,
       "prints the metrics options with rbench's meaning", "metrics"),
    _o("mpr", "metrics-prometheus", "none", "", "enable Prometheus metrics", DIFFERS,
       "metrics_port (8080 unless -mpp): each Spark task serves /metrics on port + task index, with rbench_* "
       "metric names and run_id/cluster/step/task labels, not perftest_*", "metrics"),
    _o("mpe", "metrics-prometheus-endpoint", "one", "PATH", "the HTTP metrics endpoint, default is /metrics", DIFFERS,
       "rbench serves /metrics only; another path is refused", "metrics"),
    _o("mpp", "metrics-prometheus-port", "one", "PORT",
       "the port to launch the HTTP metrics endpoint on, default is 8080", HONOURED,
       "metrics_port with -mpr (task i listens on PORT + i)", "metrics"),
    _o("em", "exposed-metrics", "one", "KEY=VALUE,…",
       "metrics to be exposed as key/value pairs, separated by commas, e.g. expected_published=50000", NO_EFFECT,
       "rbench's Prometheus endpoint exposes measured metrics only", "metrics"),
    _o("mt", "metrics-tags", "one", "KEY=VALUE,…", "metrics tags as key-value pairs separated by commas", REFUSED,
       "rbench's metrics carry the fixed labels run_id, cluster, step and task", "metrics"),
    _o("mcla", "metrics-command-line-arguments", "none", "", "add fixed metrics with command line arguments label",
       REFUSED, "rbench exposes no command-line metric; run.json records the workload", "metrics"),
    _o("mpx", "metrics-prefix", "one", "PREFIX", "prefix for PerfTest metrics, default is perftest_", REFUSED,
       "rbench's metric names are fixed (rbench_*)", "metrics"),
    _o("mc", "metrics-client", "none", "", "enable client metrics", REFUSED,
       "these are the Java client's metrics; rbench's are rbench_*", "metrics"),
    _o("mcl", "metrics-class-loader", "none", "", "enable JVM class loader metrics", REFUSED, _NO_JVM_METRICS,
       "metrics"),
    _o("mjm", "metrics-jvm-memory", "none", "", "enable JVM memory metrics", REFUSED, _NO_JVM_METRICS, "metrics"),
    _o("mjgc", "metrics-jvm-gc", "none", "", "enable JVM GC metrics", REFUSED, _NO_JVM_METRICS, "metrics"),
    _o("mjp", "metrics-processor", "none", "", "enable processor metrics (gathered by JVM)", REFUSED, _NO_JVM_METRICS,
       "metrics"),
    _o("mjt", "metrics-jvm-thread", "none", "", "enable JVM thread metrics", REFUSED, _NO_JVM_METRICS, "metrics"),
    _o("mjx", "metrics-jmx", "none", "", "enable JMX metrics", REFUSED, _NO_JVM_METRICS, "metrics"),
    _o("mda", "metrics-datadog", "none", "", "enable Datadog metrics", REFUSED, _NO_DATADOG, "metrics"),
    _o("mdk", "metrics-datadog-api-key", "one", "KEY", "Datadog API key", REFUSED, _NO_DATADOG, "metrics"),
    _o("mds", "metrics-datadog-step-size", "one", "SECONDS",
       "step size (reporting frequency) to use in seconds, default is 10 seconds", REFUSED, _NO_DATADOG, "metrics"),
    _o("mdak", "metrics-datadog-application-key", "one", "KEY", "Datadog application key", REFUSED, _NO_DATADOG,
       "metrics"),
    _o("mdh", "metrics-datadog-host-tag", "one", "TAG",
       "tag that will be mapped to \"host\" when shipping metrics to datadog", REFUSED, _NO_DATADOG, "metrics"),
    _o("mdd", "metrics-datadog-descriptions", "none", "", "if meter descriptions should be sent to Datadog", REFUSED,
       _NO_DATADOG, "metrics"),
    _o("mdu", "metrics-datadog-uri", "one", "URI",
       "URI to ship metrics, useful when using a proxy, default is https://app.datadoghq.com", REFUSED, _NO_DATADOG,
       "metrics"),
    # ---- TLS and authentication ------------------------------------------------------------
    _o("udsc", "use-default-ssl-context", "none", "", "use JVM default SSL context, default is false", NO_EFFECT,
       "amqps:// connections always use the system's default trust store (plus the URI's cacertfile, certfile, "
       "keyfile, verify parameters; docs/amqp091.md)", "TLS and authentication"),
    _o("se", "sasl-external", "none", "",
       "use SASL EXTERNAL authentication, default is false. Set to true if using client certificate authentication "
       "with the rabbitmq_auth_mechanism_ssl plugin.", REFUSED,
       "the amqp091 driver authenticates with SASL PLAIN only", "TLS and authentication"),
    _o("sni", "server-name-indication", "one", "NAME",
       "server names for Server Name Indication TLS parameter, separated by commas", HONOURED,
       "server_name_indication=NAME on every amqps:// URI (one name; several are refused)", "TLS and authentication"),
    _o("o2uri", "oauth2-token-endpoint", "one", "URI",
       "OAuth2 token endpoint URI. At least --oauth2-client-id and --oauth2-client-secret should be also specified "
       "for OAuth2 flow to work.", REFUSED, _NO_OAUTH, "TLS and authentication"),
    _o("o2id", "oauth2-client-id", "one", "ID", "OAuth2 client id", REFUSED, _NO_OAUTH, "TLS and authentication"),
    _o("o2sec", "oauth2-client-secret", "one", "SECRET", "OAuth2 client secret", REFUSED, _NO_OAUTH,
       "TLS and authentication"),
    _o("o2gr", "oauth2-grant-type", "one", "TYPE", "OAuth2 grant type. Default is 'client_credential'", REFUSED,
       _NO_OAUTH, "TLS and authentication"),
    _o("o2p", "oauth2-parameters", "many", "KEY=VALUE",
       "Additional parameters for OAuth2 token endpoint, e.g. orgId=1234. Can be specified multiple times.", REFUSED,
       _NO_OAUTH, "TLS and authentication"),
    # ---- Java client tuning ----------------------------------------------------------------
    _o("hst", "heartbeat-sender-threads", "one", "N",
       "number of threads for producers and consumers heartbeat senders, default is 1 thread per connection "
       "(not necessary when using Netty)", NO_EFFECT,
       "rbench sends heartbeats from each connection's event loop; there are no heartbeat threads",
       "Java client tuning"),
    _o("niot", "nio-threads", "one", "N",
       "number of NIO threads to use, default is 1 (deprecated, use Netty instead)", REFUSED, _NO_JVM_IO,
       "Java client tuning"),
    _o("niotp", "nio-thread-pool", "one", "N",
       "size of NIO thread pool, should be slightly higher than number of NIO threads, default is --nio-threads + 2 "
       "(deprecated, use Netty instead)", REFUSED, _NO_JVM_IO, "Java client tuning"),
    _o("nty", "netty", "none", "", "use Netty for IO", REFUSED, _NO_JVM_IO, "Java client tuning"),
    _o("ntyt", "netty-threads", "one", "N", "number of Netty threads to use (default is Netty's default)", REFUSED,
       _NO_JVM_IO, "Java client tuning"),
    _o("ntyep", "netty-epoll", "none", "", "use Netty's native epoll transport (Linux x86-64 only)", REFUSED,
       _NO_JVM_IO, "Java client tuning"),
    _o("ntykq", "netty-kqueue", "none", "", "use Netty's native kqueue transport (macOS aarch64 only)", REFUSED,
       _NO_JVM_IO, "Java client tuning"),
    _o("tsbs", "tcp-send-buffer-size", "one", "BYTES", "value for TCP SO_SNDBUF option", REFUSED,
       "rbench leaves socket buffer sizes to the operating system", "Java client tuning"),
    _o("trbs", "tcp-receive-buffer-size", "one", "BYTES", "value for TCP SO_RCVBUF option", REFUSED,
       "rbench leaves socket buffer sizes to the operating system", "Java client tuning"),
    _o("tnd", "tcp-no-delay", "one", "true|false", "value for TCP NODELAY option", NO_EFFECT,
       "rbench's sockets always have TCP_NODELAY on (uvloop/asyncio); -tnd false is refused", "Java client tuning"),
    # ---- several PerfTest instances --------------------------------------------------------
    _o("ei", "expected-instances", "one", "N",
       "number of expected PerfTest instances to synchronize. Default is 0, that is no synchronization.Test ID is "
       "mandatory when instance synchronization is in use.", REFUSED, _NO_SYNC, "several PerfTest instances"),
    _o("isn", "instance-sync-namespace", "one", "NAMESPACE", "Kubernetes namespace for instance synchronization",
       REFUSED, _NO_SYNC, "several PerfTest instances"),
    _o("ist", "instance-sync-timeout", "one", "SECONDS",
       "Instance synchronization time in seconds. Default is 600 seconds.", REFUSED, _NO_SYNC,
       "several PerfTest instances"),
)

# rbench's own options, in the same grammar; none shares a name with PerfTest's
RBENCH_OPTIONS: tuple[Option, ...] = (
    _o(None, "rate-steps", "one", "RATE:SECONDS,…", "", RBENCH,
       "rate_steps: increasing-intensity steps (replaces -r/-vr and -z)", "rbench"),
    _o("V", None, "many", "RATE:SECONDS", "", RBENCH, "older rbench spelling of -vr", "rbench"),
    _o(None, "rate-search", "one", "START:MAX", "", RBENCH,
       "rate_search: find the highest rate (msg/s per producer, like -r) that meets the SLO, probing from START up to "
       "MAX (doubling, then bisecting; docs/rate-search.md); replaces -r/-P/-vr/--rate-steps and -z, refused with -C "
       "and -ew; no ramp-up (-prsd) unless given", "rbench"),
    _o(None, "slo-p99", "one", "DURATION", "", RBENCH,
       "rate_search.slo.p99: a probe meets the SLO when its exact end-to-end p99 is at most this (default 1s)", "rbench"),
    _o(None, "slo-consume-ratio", "one", "RATIO", "", RBENCH,
       "rate_search.slo.consume_ratio: … and it consumed at least this share of its target (0.98 or 98%, the default)",
       "rbench"),
    _o(None, "search-step", "one", "DURATION", "", RBENCH, "rate_search.step: length of each probe (default 60s)",
       "rbench"),
    _o(None, "search-precision", "one", "PERCENT", "", RBENCH,
       "rate_search.precision: stop when (first fail − last pass) ÷ last pass is at most this (5% or 0.05, the "
       "default)", "rbench"),
    _o(None, "search-max-probes", "one", "N", "", RBENCH, "rate_search.max_probes: stop after N probes (default 20)",
       "rbench"),
    _o(None, "warmup", "one", "SECONDS", "", RBENCH, "warmup: excluded from each step's statistics (each probe's with "
       "--rate-search)", "rbench"),
    _o(None, "name", "one", "NAME", "", RBENCH, "workload name (default: -d, else perftest)", "rbench"),
    _o(None, "cluster-name", "one", "NAME", "", RBENCH, "clusters[0].name (default default)", "rbench"),
    _o(None, "nodes", "one", "N", "", RBENCH, "clusters[0].nodes, for the cost model", "rbench"),
    _o(None, "instance-type", "one", "TYPE", "", RBENCH, "clusters[0].instance_type, for the cost model", "rbench"),
    _o(None, "volume-type", "one", "TYPE", "", RBENCH, "clusters[0].volume_type, for the cost model", "rbench"),
    _o(None, "management-uri", "one", "URL,…", "", RBENCH,
       "broker_metrics.management_urls: the broker sampler's management API (http://HOST:PORT, /api added), the "
       "first that answers speaks for the cluster; default: off the standard AMQP port, the one the broker serving "
       "-h lists (docs/broker.md), else the -h host at 15672", "rbench"),
    _o(None, "prometheus-uri", "one", "URL,…", "", RBENCH,
       "broker_metrics.prometheus_urls: every node's Prometheus endpoint (http://HOST:PORT, /metrics added); "
       "default: the node's own, as its management API lists it, else the -h host at 15692", "rbench"),
    _o(None, "driver", "one", "amqp091|aiopika|stream", "", RBENCH, "driver (default amqp091)", "rbench"),
    _o(None, "print-workload", "none", "", "", RBENCH, "print the workload YAML these options mean and exit",
       "rbench"),
    _o(None, "compat-table", "none", "", "", RBENCH,
       "print the compatibility table of docs/perftest.md (markdown) and exit", "rbench"),
    _o(None, "out", "one", "DIR", "", RBENCH, "results root; the run goes to DIR/<run_id>/ (default results)",
       "rbench"),
    _o(None, "master", "one", "MASTER", "", RBENCH, "Spark master, e.g. local[2] (default local[*])", "rbench"),
    _o(None, "tasks", "one", "N", "", RBENCH, "Spark tasks per cluster (default min(queues, slots))", "rbench"),
    _o(None, "conf", "many", "KEY=VALUE", "", RBENCH, "extra Spark configuration (repeatable)", "rbench"),
    _o(None, "no-reduce", "none", "", "", RBENCH, "skip the summary after the run", "rbench"),
    _o(None, "quiet", "none", "", "", RBENCH, "no status line per interval (the CSV of -o is still written)", "rbench"),
    _o(None, "timings", "none", "", "", RBENCH, "print where the wall-clock seconds went (start-up, load, reduce)",
       "rbench"),
    _o(None, "connections", "one", "per_client|per_task|N", "", RBENCH, "connections: per_client (default here: one per "
       "producer and consumer, as PerfTest), per_task or N per Spark task (docs/connections.md)", "rbench"),
    _o(None, "idle-connections", "one", "N", "", RBENCH, "idle_connections: N idle connections per task", "rbench"),
    _o(None, "connect-rate", "one", "R/s", "", RBENCH, "connect_rate: open every connection paced at R per second",
       "rbench"),
)

ALL_OPTIONS: tuple[Option, ...] = PERFTEST_OPTIONS + RBENCH_OPTIONS
BY_KEY: dict[str, Option] = {o.key: o for o in ALL_OPTIONS}


def _index() -> tuple[dict[str, Option], dict[str, Option]]:
    by_short: dict[str, Option] = {}
    by_long: dict[str, Option] = {}
    for o in ALL_OPTIONS:
        for name, index in ((o.short, by_short), (o.long, by_long)):
            if name is None:
                continue
            if name in index:
                raise AssertionError(f"option name {name!r} defined twice")
            index[name] = o
    return by_short, by_long


BY_SHORT, BY_LONG = _index()


def counts() -> dict[str, int]:
    """How many PerfTest options rbench honours, honours differently, accepts without effect, refuses."""
    out: dict[str, int] = {HONOURED: 0, DIFFERS: 0, NO_EFFECT: 0, REFUSED: 0}
    for o in PERFTEST_OPTIONS:
        out[o.handling] += 1
    return out


def opt(key: str) -> Option:
    """The option whose key (long name, or short for the few without one) is ``key``."""
    return BY_KEY[key]


def refuse(key: str, reason: str) -> ConfigError:
    """The one-line refusal of an option rbench cannot honour."""
    return ConfigError(f"{opt(key).label}: not supported by rbench: {reason}")
