"""PerfTest options → the workload mapping a YAML file would give (and the run's notes).

Semantics follow PerfTest (PerfTest.java, MulticastParams): `-c N` enables confirms
(N >= 0; 0 = no window), `-L` is in microseconds, `-ad` defaults to true, queues are
durable when `-f persistent` is given, `-qq`/`-sq` imply persistent messages and no
auto-delete, the exchange is named after its type unless `-e`, producers start after
a random delay of up to 1 s when a rate is given without `-prsd`. Where rbench cannot do
what an option asks, the ConfigError says "not supported by rbench: <reason>".
"""
from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass, field
from typing import Any

from rbench.errors import ConfigError
from rbench.perftest import values as v
from rbench.perftest.connection import broker_metrics, connection_layout, connection_uris
from rbench.perftest.grammar import Parsed
from rbench.perftest.option import NO_EFFECT
from rbench.perftest.options import PERFTEST_OPTIONS, opt, refuse
from rbench.runtime.stamp import STAMP_SIZE

OPEN_ENDED_S = 365 * 86400.0        # -ew without -z: the run ends when the consumers exit
STREAM_MAX_LENGTH_BYTES = 20 * 10**9          # what PerfTest sets on -sq streams
STREAM_MAX_SEGMENT_BYTES = 500 * 10**6

# PerfTest's -mp names (Java client builder) → AMQP basic property names (rbench's codec)
PROPERTY_NAMES = {"contentType": "content_type", "contentEncoding": "content_encoding", "deliveryMode": "delivery_mode",
                  "priority": "priority", "correlationId": "correlation_id", "replyTo": "reply_to",
                  "expiration": "expiration", "messageId": "message_id", "timestamp": "timestamp",
                  "type": "message_type", "userId": "user_id", "appId": "app_id", "clusterId": "cluster_id"}


@dataclass
class Mapped:
    workload: dict[str, Any]
    run: dict[str, Any]                                  # rbench's run options: out, master, tasks, conf …
    notes: list[str] = field(default_factory=list)       # said once before the run


def _positive_int(p: Parsed, key: str, default: int, minimum: int = 0) -> int:
    if not p.has(key):
        return default
    n = v.integer(opt(key), p.first(key))
    if n < minimum:
        raise ConfigError(f"{opt(key).label}: expected a whole number >= {minimum}, got {n}")
    return n


def _properties(p: Parsed) -> dict[str, Any]:
    if not p.has("message-properties"):
        return {}
    raw = v.key_values(opt("message-properties"), p.all("message-properties"))
    props: dict[str, Any] = {}
    headers: dict[str, Any] = {}
    for key, value in raw.items():
        name = PROPERTY_NAMES.get(key)
        if name is None:
            headers[key] = value
        elif name in ("delivery_mode", "priority"):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 255:
                raise ConfigError(f"{opt('message-properties').label}: {key}: expected a whole number 0-255, got {value!r}")
            props[name] = value
        elif name == "timestamp":
            try:
                when = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            except ValueError:
                raise ConfigError(f"{opt('message-properties').label}: timestamp: expected an ISO 8601 date-time with "
                                  f"offset, e.g. 2007-12-03T10:15:30+01:00, got {value!r}") from None
            props[name] = when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)
        else:
            props[name] = str(value)
    if headers:
        props["headers"] = headers
    return props


def _queues(p: Parsed, w: dict[str, Any], persistent: bool) -> None:
    qa = v.key_values(opt("queue-args"), p.all("queue-args")) if p.has("queue-args") else {}
    if qa.get("x-dead-letter-exchange") == "amq.default":            # as PerfTest
        qa["x-dead-letter-exchange"] = ""
    if "x-single-active-consumer" in qa:
        qa["x-single-active-consumer"] = qa["x-single-active-consumer"] is True
    qtype = str(qa.pop("x-queue-type", "classic"))
    if p.has("quorum-queue") and p.has("stream-queue"):
        raise ConfigError("-qq/--quorum-queue, -sq/--stream-queue: use quorum queues or stream queues, not both")
    if p.has("quorum-queue"):
        qtype = "quorum"
    if p.has("stream-queue"):
        qtype = "stream"
        qa.setdefault("x-max-length-bytes", STREAM_MAX_LENGTH_BYTES)
        qa.setdefault("x-stream-max-segment-size-bytes", STREAM_MAX_SEGMENT_BYTES)
    if qtype not in ("classic", "quorum", "stream"):
        raise ConfigError(f"{opt('queue-args').label}: x-queue-type: expected classic, quorum or stream, got {qtype!r}")
    if p.has("max-length-bytes"):
        n = v.byte_capacity(opt("max-length-bytes"), p.first("max-length-bytes"))
        if n == 0:
            qa.pop("x-max-length-bytes", None)
        else:
            qa["x-max-length-bytes"] = n
    if p.has("stream-max-segment-size-bytes"):
        n = v.byte_capacity(opt("stream-max-segment-size-bytes"), p.first("stream-max-segment-size-bytes"))
        if n > 3 * 10**9:
            raise ConfigError(f"{opt('stream-max-segment-size-bytes').label}: the maximum segment size cannot be more "
                              f"than 3 GB, got {n} bytes")
        qa["x-stream-max-segment-size-bytes"] = n
    if "x-max-length-bytes" in qa and "x-stream-max-segment-size-bytes" in qa and qtype == "stream" \
            and qa["x-max-length-bytes"] <= qa["x-stream-max-segment-size-bytes"]:
        raise ConfigError(f"{opt('max-length-bytes').label}: max length bytes must be greater than the stream max "
                          "segment size")
    if p.has("max-age"):
        qa["x-max-age"] = f"{v.iso_duration_seconds(opt('max-age'), p.first('max-age'))}s"
    if p.has("leader-locator"):
        ll = p.first("leader-locator")
        if ll not in ("client-local", "balanced"):
            raise ConfigError(f"{opt('leader-locator').label}: expected client-local or balanced, got {ll!r}")
        qa["x-queue-leader-locator"] = ll
    durable = bool(qa.pop("durable", persistent))
    auto_delete = v.boolean(opt("auto-delete"), p.first("auto-delete")) if p.has("auto-delete") else True
    auto_delete = bool(qa.pop("auto-delete", auto_delete))
    exclusive = bool(qa.pop("exclusive", p.has("exclusive")))
    if qtype in ("quorum", "stream"):      # PerfTest: -qq/-sq turn auto-delete off; the broker requires durable
        durable, auto_delete = True, False
    queues: dict[str, Any] = {"type": qtype, "durable": durable, "auto_delete": auto_delete, "exclusive": exclusive,
                              "predeclared": p.has("predeclared"), "arguments": qa, "bind": not p.has("skip-binding-queues")}
    if p.has("auto-delete") and not auto_delete:    # `-ad false` asks for queues that outlive the run: keep them
        queues["keep"] = True
    pattern_keys = ("queue-pattern", "queue-pattern-from", "queue-pattern-to")
    if p.has("queue-file"):
        raise refuse("queue-file", opt("queue-file").rbench)
    if any(p.has(k) for k in pattern_keys):
        if not all(p.has(k) for k in pattern_keys):
            raise ConfigError("-qp/--queue-pattern, -qpf/--queue-pattern-from, -qpt/--queue-pattern-to: give all "
                              "three or none (as PerfTest requires)")
        pattern = str(p.first("queue-pattern"))
        if re.search(r"%0?\d+d", pattern):
            raise refuse("queue-pattern", f"padded numbers ({pattern!r}); rbench's pattern takes a plain %d")
        start = _positive_int(p, "queue-pattern-from", 0)
        end = _positive_int(p, "queue-pattern-to", 0)
        if start > end:
            raise ConfigError(f"{opt('queue-pattern-to').label}: expected a number >= --queue-pattern-from ({start}), got {end}")
        queues.update(pattern=pattern, **{"from": start}, to=end)
    else:
        name = p.first("queue")
        if name is not None and "," in name:
            raise refuse("queue", "several queue names: PerfTest has every consumer consume from all of them and "
                                  "routes every message to all of them; use --queue-pattern for one queue per client")
        queues["name"] = name or "perf-test"
    w["queues"] = queues


def _exchange(p: Parsed) -> dict[str, Any]:
    etype = p.first("type") or "direct"
    if p.has("exchange") and p.first("exchange") is not None:
        name = str(p.first("exchange"))
        name = "" if name == "amq.default" else name
    else:
        name = etype
    # PerfTest (Utils.exchangeDeclare, 2.20 and later) declares its exchange durable
    return {"name": name, "type": etype, "durable": True}


def _rates(p: Parsed, w: dict[str, Any]) -> bool:
    """Sets rate / variable_rate / rate_steps; True when producers have rate instructions."""
    rate: float | None = None
    instructed = False
    if p.has("rate"):
        r = v.number(opt("rate"), p.first("rate"))
        if r == 0:
            raise refuse("rate", "a rate of 0 (producers that never publish); use -x 0 for consumers only")
        if r < 0 and r != -1:
            raise ConfigError(f"{opt('rate').label}: expected a rate > 0 msg/s, or -1 for no limit (PerfTest's "
                              f"default), got {r:g}")
        if r > 0:
            rate, instructed = r, True
    if p.has("publishing-interval"):
        interval = v.number(opt("publishing-interval"), p.first("publishing-interval"))
        if interval < 0.1:
            raise ConfigError(f"{opt('publishing-interval').label}: expected at least 0.1 s, got {interval:g}")
        rate, instructed = 1.0 / interval, True
    steps = p.all("rate-steps")
    vr = [(opt("variable-rate"), t) for t in p.all("variable-rate")] + [(opt("V"), t) for t in p.all("V")]
    if rate is not None and not steps and not vr:     # PerfTest: a variable rate replaces -r
        w["rate"] = rate
    if steps:
        parsed = [v.rate_seconds(opt("rate-steps"), s) for text in steps for s in text.split(",") if s]
        w["rate_steps"] = [{"rate": r, "duration": d} for r, d in parsed]
        instructed = True
    elif vr:
        pairs = [v.rate_seconds(o, t) for o, t in vr]
        if any(r == 0 for r, _ in pairs):
            raise refuse("variable-rate", "a rate of 0 (a pause between rates)")
        w["variable_rate"] = [{"rate": r, "duration": d} for r, d in pairs]
        instructed = True
    return instructed


SEARCH_KEYS = ("slo-p99", "slo-consume-ratio", "search-step", "search-precision", "search-max-probes")
# what a rate search replaces or cannot run with, and why (each probe sets its own rate and length)
SEARCH_EXCLUDES = (("rate", "each probe sets its own rate"), ("publishing-interval", "each probe sets its own rate"),
                   ("variable-rate", "each probe holds one rate"), ("V", "each probe holds one rate"),
                   ("rate-steps", "the probes are the steps"), ("time", "each probe lasts --search-step"),
                   ("pmessages", "a probe runs for --search-step, whatever the count"),
                   ("exit-when", "consumers that exit would end a probe early"))


def _rate_search(p: Parsed, w: dict[str, Any]) -> bool:
    """--rate-search START:MAX and its SLO flags → the workload's rate_search section (docs/rate-search.md)."""
    if not p.has("rate-search"):
        given = [k for k in SEARCH_KEYS if p.has(k)]
        if given:
            raise ConfigError(f"{opt(given[0]).label}: needs --rate-search START:MAX (it sets the rate search's SLO)")
        return False
    for key, why in SEARCH_EXCLUDES:
        if p.has(key):
            raise ConfigError(f"--rate-search: give --rate-search or {opt(key).label}, not both ({why})")
    start, top = v.rate_range(opt("rate-search"), p.first("rate-search"))
    search: dict[str, Any] = {"start": start, "max": top}
    slo: dict[str, Any] = {}
    if p.has("slo-p99"):
        slo["p99"] = v.seconds(opt("slo-p99"), p.first("slo-p99"))
        if slo["p99"] <= 0:
            raise ConfigError(f"{opt('slo-p99').label}: expected a duration > 0, got {p.first('slo-p99')!r}")
    if p.has("slo-consume-ratio"):
        slo["consume_ratio"] = v.fraction(opt("slo-consume-ratio"), p.first("slo-consume-ratio"))
        if not 0 < slo["consume_ratio"] <= 1:
            raise ConfigError(f"{opt('slo-consume-ratio').label}: expected a share in (0, 1], e.g. 0.98 or 98%, "
                              f"got {p.first('slo-consume-ratio')!r}")
    if slo:
        search["slo"] = slo
    if p.has("search-step"):
        search["step"] = v.seconds(opt("search-step"), p.first("search-step"))
        if search["step"] <= 0:
            raise ConfigError(f"{opt('search-step').label}: expected a duration > 0, got {p.first('search-step')!r}")
    if p.has("search-precision"):
        search["precision"] = v.fraction(opt("search-precision"), p.first("search-precision"))
        if not 0 < search["precision"] < 1:
            raise ConfigError(f"{opt('search-precision').label}: expected a share in (0, 1), e.g. 5% or 0.05, "
                              f"got {p.first('search-precision')!r}")
    if p.has("search-max-probes"):
        search["max_probes"] = _positive_int(p, "search-max-probes", 20, 2)
    if p.has("warmup") and v.seconds(opt("warmup"), p.first("warmup")) >= search.get("step", 60.0):
        raise ConfigError(f"{opt('warmup').label}: expected less than the probe length (--search-step, default 60s)")
    w["rate_search"] = search
    return True


def _bodies(p: Parsed, w: dict[str, Any], notes: list[str]) -> None:
    pub = w["publisher"]
    size = _positive_int(p, "size", 12)
    w["size"] = size
    if p.has("body"):
        files = [f.strip() for f in str(p.first("body")).split(",") if f.strip()]
        if not files:
            raise ConfigError(f"{opt('body').label}: expected comma-separated file names")
        pub["body_files"] = files
        notes.append(opt("body").notice or "")
    if p.has("json-body"):
        if p.has("body"):
            raise ConfigError("-jb/--json-body, -B/--body: give one body source")
        pub["json_body"] = True
        pub["json_body_fields"] = _positive_int(p, "body-field-count", 1000, 1)
        pub["json_bodies"] = _positive_int(p, "body-count", 100, 1)
        notes.append(opt("json-body").notice or "")
    if p.has("variable-size"):
        if p.has("body"):
            raise ConfigError("-vs/--variable-size, -B/--body: file bodies have their own sizes")
        pairs = [v.rate_seconds(opt("variable-size"), t, "SIZE") for t in p.all("variable-size")]
        if any(s <= 0 or s != int(s) for s, _ in pairs):
            raise ConfigError(f"{opt('variable-size').label}: expected SIZE > 0 (whole bytes):SECONDS")
        w["variable_size"] = [{"size": int(s), "duration": d} for s, d in pairs]
        if min(int(s) for s, _ in pairs) < STAMP_SIZE:
            notes.append(f"-vs/--variable-size: sizes below {STAMP_SIZE} bytes are sent as {STAMP_SIZE} bytes (rbench's stamp)")
    elif not p.has("body") and max(size, 12) < STAMP_SIZE:
        notes.append(opt("size").notice or "")


def _consumers(p: Parsed, w: dict[str, Any], qtype: str) -> None:
    c = w["consumer"]
    auto_ack = p.has("autoack")
    prefetch = _positive_int(p, "qos", 0)
    if qtype == "stream" and prefetch == 0:
        prefetch = 200                       # PerfTest's default for streams (they need a prefetch)
    multi = _positive_int(p, "multi-ack-every", 0)
    if multi and prefetch and multi > prefetch:
        raise ConfigError(f"{opt('multi-ack-every').label}: --multi-ack-every must be less than or equal to --qos "
                          f"({multi} > {prefetch}), as PerfTest requires")
    latency_us = _positive_int(p, "consumer-latency", 0)
    c.update(prefetch=prefetch, auto_ack=auto_ack, multi_ack_every=multi, processing_delay=latency_us / 1e6)
    if p.has("consumer-latency") and latency_us and auto_ack:
        raise refuse("consumer-latency", "with -a/--autoack: the broker does not wait for an auto-ack consumer, so "
                                         "rbench cannot slow it without stalling its task's shared connection")
    if p.has("consumer-rate"):
        r = v.number(opt("consumer-rate"), p.first("consumer-rate"))
        if r < 0 and r != -1:
            raise ConfigError(f"{opt('consumer-rate').label}: expected a rate > 0 msg/s, or -1 for no limit "
                              f"(PerfTest's default), got {r:g}")
        if r > 0:
            if auto_ack:
                raise refuse("consumer-rate", "with -a/--autoack: the broker does not wait for an auto-ack consumer, "
                                              "so rbench cannot slow it without stalling its task's shared connection")
            c["rate"] = r
    if p.has("global-qos"):
        c["global_prefetch"] = _positive_int(p, "global-qos", 0)
    if p.has("cmessages"):
        n = _positive_int(p, "cmessages", 0)
        if n:
            c["message_count"] = n
    if p.has("nack"):
        if auto_ack:
            raise ConfigError("-na/--nack: an auto-ack consumer cannot nack; drop -a/--autoack")
        c["nack"] = True
    if p.has("requeue"):
        c["requeue"] = v.boolean(opt("requeue"), p.first("requeue"))
    args = v.key_values(opt("consumer-args"), [str(p.first("consumer-args"))]) if p.has("consumer-args") else {}
    if p.has("stream-consumer-offset"):
        arg, offset = v.stream_offset(opt("stream-consumer-offset"), p.first("stream-consumer-offset"))
        args["x-stream-offset"] = arg
        c["offset"] = offset
    if args:
        c["arguments"] = args
    if p.has("ctxsize"):
        c["tx_size"] = _positive_int(p, "ctxsize", 0)
    if p.has("slow-start"):
        c["start_interval"] = 1.0
    if p.has("consumer-start-delay"):
        delay = v.seconds(opt("consumer-start-delay"), p.first("consumer-start-delay"))
        if delay > 0:
            c["start_delay"] = delay
    if p.has("exit-when"):
        ew = p.first("exit-when")
        if ew not in ("empty", "idle"):
            raise ConfigError(f"{opt('exit-when').label}: --exit-when must be 'empty' or 'idle', got {ew!r}")
        c["exit_when"] = ew


def _metrics(p: Parsed, w: dict[str, Any]) -> None:
    if p.has("metrics-prometheus-endpoint"):
        path = str(p.first("metrics-prometheus-endpoint")).strip("/")
        if path != "metrics":
            raise ConfigError(f"{opt('metrics-prometheus-endpoint').label}: not supported by rbench: an endpoint "
                              f"other than /metrics (got {p.first('metrics-prometheus-endpoint')!r})")
    if p.has("metrics-prometheus"):
        w["metrics_port"] = _positive_int(p, "metrics-prometheus-port", 8080)


def _progress(p: Parsed, w: dict[str, Any], test_id: str) -> None:
    progress: dict[str, Any] = {"id": test_id}
    if p.has("interval"):
        progress["interval"] = float(_positive_int(p, "interval", 1, 1))
    if p.has("output-file"):
        progress["csv"] = p.first("output-file")
    if p.has("metrics-format"):
        fmt = p.first("metrics-format")
        if fmt not in ("default", "compact"):
            raise ConfigError(f"{opt('metrics-format').label}: unknown metrics formatter {fmt!r}; possible values "
                              "are compact, default")
        progress["format"] = fmt
    if p.has("use-millis"):
        progress["latency_unit"] = "ms"
    w["progress"] = progress


def _name(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")
    return cleaned or "perftest"


def to_workload(p: Parsed) -> Mapped:
    """The workload and run options ``p`` describes; ConfigError on anything rbench cannot honour."""
    for o in p.order:
        if o.handling == "refused":
            raise ConfigError(o.refusal())
    notes = [f"{o.label}: given {len(p.values[o.key])} times; the first value, {p.first(o.key)!r}, is used (as "
             f"PerfTest does)" for o in p.repeated]
    notes += [f"{o.label}: accepted, no effect: {o.rbench}" for o in p.order if o.handling == NO_EFFECT]
    if p.has("tcp-no-delay") and not v.boolean(opt("tcp-no-delay"), p.first("tcp-no-delay")):
        raise refuse("tcp-no-delay", "TCP_NODELAY off; rbench's sockets always have it on")
    flags = p.all("flag")
    for f in flags:
        if f not in ("persistent", "mandatory", "immediate"):
            raise ConfigError(f"{opt('flag').label}: expected persistent or mandatory, got {f!r}")
    if "immediate" in flags:
        notes.append("-f/--flag immediate: accepted, no effect (RabbitMQ has no immediate flag; PerfTest never sets it)")
    persistent = "persistent" in flags or p.has("quorum-queue") or p.has("stream-queue")

    test_id = p.first("id") or time.strftime("test-%H%M%S-") + f"{int(time.time() * 1000) % 1000:03d}"
    name = p.first("name") or (_name(p.first("id") or "") if p.has("id") else "perftest")
    x = _positive_int(p, "producers", 1)
    y = _positive_int(p, "consumers", 1)
    xc = _positive_int(p, "producer-channel-count", 1, 1)
    yc = _positive_int(p, "consumer-channel-count", 1, 1)
    w: dict[str, Any] = {
        "name": name,
        "clusters": [{"name": p.first("cluster-name") or "default", "uris": connection_uris(p),
                      "nodes": _positive_int(p, "nodes", 1, 1),
                      "instance_type": p.first("instance-type") or "local",
                      "volume_type": p.first("volume-type") or "local"}],
        "producers": x * xc, "consumers": y * yc,
        **connection_layout(p, xc, yc),
        "exchange": _exchange(p),
        "publisher": {"mandatory": "mandatory" in flags, "persistent": persistent},
        "consumer": {},
    }
    _queues(p, w, persistent)
    qtype = w["queues"]["type"]
    if p.has("routing-key"):
        w["routing_key"] = p.first("routing-key")
    if p.has("driver"):
        w["driver"] = p.first("driver")
    elif qtype == "stream":
        w["driver"] = "amqp091"              # PerfTest reaches streams over AMQP 0-9-1
    pub = w["publisher"]
    confirm = v.integer(opt("confirm"), p.first("confirm")) if p.has("confirm") else -1
    pub.update(confirm=confirm >= 0, confirm_window=max(confirm, 0))
    if p.has("confirm-timeout"):
        ct = v.integer(opt("confirm-timeout"), p.first("confirm-timeout"))
        pub["confirm_timeout"] = None if ct < 0 else float(ct)
    if p.has("ptxsize"):
        pub["tx_size"] = _positive_int(p, "ptxsize", 0)
        if pub["tx_size"] and pub["confirm"]:
            raise refuse("ptxsize", "with -c/--confirm: the broker allows transactions or publisher confirms on a "
                                    "channel, not both")
    if p.has("pmessages"):
        n = _positive_int(p, "pmessages", 0)
        if n:
            pub["message_count"] = n
    if p.has("body-content-type"):
        pub["content_type"] = p.first("body-content-type")
    props = _properties(p)
    if props:
        pub["properties"] = props
    if p.has("random-routing-key"):
        pub["random_routing_key"] = True
    if p.has("routing-key-cache-size"):
        n = _positive_int(p, "routing-key-cache-size", 0)
        if n:
            pub.update(random_routing_key=True, routing_key_cache=n)
    _bodies(p, w, notes)
    searching = _rate_search(p, w)
    instructed = not searching and _rates(p, w)
    if p.has("producer-random-start-delay"):
        prsd = v.seconds(opt("producer-random-start-delay"), p.first("producer-random-start-delay"))
        pub["random_start_delay"] = prsd
    elif instructed:
        # PerfTest's ramp-up when a rate is given without -prsd; not for a rate search, whose probes are
        # judged against their target from the first second of the measurement window
        pub["random_start_delay"] = 1.0
    _consumers(p, w, qtype)
    if p.has("time") and "rate_steps" not in w:
        z = v.seconds(opt("time"), p.first("time"))
        if z > 0:
            w["duration"] = z
    if p.has("shutdown-timeout"):
        w["drain_timeout"] = v.seconds(opt("shutdown-timeout"), p.first("shutdown-timeout"))
    if p.has("servers-startup-timeout"):
        w["startup_timeout"] = v.seconds(opt("servers-startup-timeout"), p.first("servers-startup-timeout"))
    if p.has("warmup"):
        w["warmup"] = v.seconds(opt("warmup"), p.first("warmup"))
    if "duration" not in w and "rate_steps" not in w and "message_count" not in pub and not searching:
        if w["consumer"].get("exit_when") in ("empty", "idle"):
            w["duration"] = OPEN_ENDED_S
        else:
            raise ConfigError("-z: expected a run time (-z SECONDS), --rate-steps, --rate-search, a message count (-C N) or -ew "
                              "(rbench runs have an end; PerfTest's default is to run until stopped)")
    _metrics(p, w)
    if (sampled := broker_metrics(p)) is not None:
        w.update(broker_metrics=sampled)          # the workload dict being built, not run.json
    _progress(p, w, test_id)
    for o in p.order:
        if o.notice and o.key in ("uris",):
            notes.append(o.notice)
    run = {"out": p.first("out") or "results", "master": p.first("master"),
           "tasks": _positive_int(p, "tasks", 0, 1) if p.has("tasks") else None,
           "conf": p.all("conf"), "no_reduce": p.has("no-reduce"), "quiet": p.has("quiet"),
           "timings": p.has("timings")}
    return Mapped(w, run, [n for n in notes if n])


def supported_keys() -> list[str]:
    """Keys of every PerfTest option rbench accepts (all but the refused)."""
    return [o.key for o in PERFTEST_OPTIONS if o.handling != "refused"]
