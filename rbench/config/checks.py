"""Every rule a workload must meet before anything runs, in one place (issue #26: validate = run).

Workload's validator calls ``check_workload``, so `rbench validate`, `plan`, `run`, `perftest`
and `nightly` refuse the same workloads, at load time, with the same line. What only the
host (a busy port, an unreadable body file) or the broker can answer is checked where
it is asked, not here. Each rule raises ValueError("field: what was expected"), which the
loader prints as one line naming the file and the field.
"""
from __future__ import annotations

from collections.abc import Callable

from rbench.config.base import MAX_PORT, MAX_STEPS
from rbench.config.cluster import Fault
from rbench.config.fields import WorkloadFields
from rbench.config.uri import check_driver_options
from rbench.errors import ConfigError
from rbench.faults.terms import FAULT_STEPS, local_node


def check_workload(w: WorkloadFields) -> None:
    """Refuse the first rule ``w`` breaks: its schedule, its faults, what its driver and the broker allow, its task split."""
    _check_schedule(w)
    if w.faults:
        _check_faults(w)
    _check_driver(w)
    _check_clients(w)
    _check_connections(w)
    problem = task_count_problem(w, w.tasks if isinstance(w.tasks, int) else w.most_tasks())
    if problem:
        raise ValueError(problem)


def task_count_problem(w: WorkloadFields, n_tasks: int) -> str | None:
    """Why ``w`` cannot run as ``n_tasks`` Spark tasks, or None.

    Validation asks with the workload's own task count, or for ``tasks: auto`` with the most tasks
    auto can pick (a task left without consumers at some count is left without them at every higher
    one, so this covers any cluster); the planner asks again with a count given on the command line."""
    queues = w.queues.count()
    if w.colocate and n_tasks > queues:
        return (f"tasks: {n_tasks} tasks but only {queues} queue(s); with colocate each queue lives in one task, "
                f"so use at most {queues} tasks or set colocate: false")
    if w.consumer.exit_when != "never":
        publishing = {w.task_of(i, n_tasks) for i in range(w.producers)}
        consuming = {w.task_of(j, n_tasks) for j in range(w.consumers)}
        idle = sorted(publishing - consuming)
        if idle:
            return (f"consumer.exit_when: Spark task {idle[0]} (of {n_tasks}) has producers but no consumers, so it "
                    "would never end; give every queue a consumer")
    return None


def _check_schedule(w: WorkloadFields) -> None:
    """Clusters, rates, sizes, steps and lengths that fit together."""
    names = [c.name for c in w.clusters]
    if len(set(names)) != len(names):
        raise ValueError("clusters: expected unique cluster names")
    if w.rate_steps is not None and w.variable_rate is not None:
        raise ValueError("rate_steps: give rate_steps or variable_rate, not both")
    if w.rate is not None and (w.rate_steps is not None or w.variable_rate is not None):
        other = "rate_steps" if w.rate_steps is not None else "variable_rate"
        raise ValueError(f"rate: give rate or {other}, not both ({other} sets the rate of each step)")
    limit = min(c.max_message_size for c in w.clusters)
    sizes = [("size", w.size)] + [(f"variable_size.{i}.size", s.size) for i, s in enumerate(w.variable_size or [])]
    for where, size in sizes:
        if size > limit:
            owner = next(c.name for c in w.clusters if c.max_message_size == limit)
            raise ValueError(f"{where}: expected at most {limit} bytes, the max_message_size of cluster {owner} "
                             f"(RabbitMQ's default is 128 MiB; raise it on the broker and in the cluster's "
                             f"max_message_size), got {size}")
    if w.metrics_port and isinstance(w.tasks, int) and w.metrics_port + w.tasks - 1 > MAX_PORT:
        raise ValueError(f"metrics_port: task i listens on metrics_port + i, so expected at most "
                         f"{MAX_PORT - w.tasks + 1} with {w.tasks} tasks, got {w.metrics_port}")
    if w.rate_search is not None:
        for other in ("rate", "rate_steps", "variable_rate", "duration"):
            if getattr(w, other) is not None:
                raise ValueError(f"rate_search: give rate_search or {other}, not both (each probe sets its own rate and length)")
        if w.warmup >= w.rate_search.step:
            raise ValueError("warmup: expected less than rate_search.step")
    if w.rate_steps is not None and not w.rate_steps:
        raise ValueError("rate_steps: expected at least one step")
    if w.rate_steps is not None and len(w.rate_steps) > MAX_STEPS:
        raise ValueError(f"rate_steps: expected at most {MAX_STEPS} steps, got {len(w.rate_steps)}")
    if w.variable_rate is not None and not w.variable_rate:
        raise ValueError("variable_rate: expected at least one entry")
    if w.variable_rate is not None and w.duration is not None:
        cycle = sum(s.duration for s in w.variable_rate)
        if w.duration / cycle * len(w.variable_rate) > MAX_STEPS:
            raise ValueError(f"variable_rate: cycling it over duration {w.duration:g} s makes more than "
                             f"{MAX_STEPS} steps; expected longer entries or a shorter duration")
    if w.variable_rate is not None and w.duration is None:
        raise ValueError("duration: variable_rate needs a duration to cycle over")
    if w.rate_steps is None and w.duration is None and w.publisher.message_count is None and w.rate_search is None:
        raise ValueError("duration: expected a duration, rate_steps or publisher.message_count")
    if w.producers == 0 and w.consumers == 0:
        raise ValueError("producers: expected at least one producer or consumer")
    if w.warmup >= min(s.duration for s in w.steps()):
        raise ValueError("warmup: expected less than the shortest step's duration")


def _check_faults(w: WorkloadFields) -> None:
    """What a fault names must exist, fall inside the run and have the commands it needs."""
    if w.rate_search is not None:
        raise ValueError("faults: not with rate_search (each probe is a run of its own); use rate_steps")
    end = w.run_length()
    down: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for i, f in enumerate(w.faults):
        where = f"faults[{i}]"
        if f.action == "restart" and f.restart_after is not None:
            raise ValueError(f"{where}.restart_after: restart starts the node again at once; drop restart_after "
                             "or use stop")
        if f.at >= end:
            raise ValueError(f"{where}.at: expected a duration inside the run (0–{end:g} s), got {f.at:g}s")
        if f.cluster is not None and f.cluster not in {c.name for c in w.clusters}:
            raise ValueError(f"{where}.cluster: no cluster named {f.cluster!r} "
                             f"(clusters: {', '.join(c.name for c in w.clusters)})")
        targets = w.fault_targets(f)
        if not targets:
            raise ValueError(f"{where}.node: {_no_node(w, f)}")
        for c in targets:
            if c.fault_control.command is not None:
                given = c.fault_control.command.templates()
                for verb in FAULT_STEPS[f.action]:
                    if verb not in given:
                        j = w.clusters.index(c)
                        raise ValueError(f"{where}.action: {f.action} needs clusters[{j}].fault_control.command.{verb} "
                                         f"(cluster {c.name}), which is not given")
            local = local_node(f.node) if c.fault_control.local else None
            key = (c.name, local.name if local is not None else f.node)
            start = f.at
            # a restart is an instant (a nanosecond here); without restart_after a node is down until the end
            stop = f.at + 1e-9 if f.action == "restart" else (f.at + f.restart_after if f.restart_after else float("inf"))
            for other_start, other_stop, j in down.get(key, []):
                if max(start, other_start) < min(stop, other_stop):
                    back = "the end of the run" if other_stop == float("inf") else f"{other_stop:g} s"
                    raise ValueError(f"{where}.at: {f.node} of cluster {c.name} is down from faults[{j}] "
                                     f"({other_start:g} s) until {back}; one fault per node at a time")
            down.setdefault(key, []).append((start, stop, i))


def _no_node(w: WorkloadFields, f: Fault) -> str:
    """Why no cluster has the fault's node, naming the nodes there are."""
    parts = []
    for c in w.clusters:
        if f.cluster not in (None, c.name):
            continue
        if c.fault_control.local and not c.local_uris():
            parts.append(f"cluster {c.name}: none, its URIs name other hosts and fault_control is local "
                         f"(give fault_control.command for a real cluster)")
        elif c.fault_control.local:
            which = {"3": ", as its URIs' ports say", "4": ", RabbitMQ 4.0's, as its URIs' ports say"}.get(
                c.local_layout() or "", "")
            parts.append(f"cluster {c.name}: {', '.join(c.fault_nodes())} (the local cluster's nodes up to "
                         f"nodes: {c.nodes}{which})")
        else:
            parts.append(f"cluster {c.name}: {', '.join(c.fault_nodes())} (fault_control.nodes)")
    return f"expected a node of {'; '.join(parts)}, got {f.node}"


_AMQP091 = ("amqp091",)
_STREAM = ("stream",)
# settings only some drivers honour: (field, the drivers that do, whether the workload uses it)
_DRIVER_ONLY: tuple[tuple[str, tuple[str, ...], Callable[[WorkloadFields], bool]], ...] = (
    ("publisher.properties", _AMQP091, lambda w: bool(w.publisher.properties)),
    ("publisher.content_type", _AMQP091, lambda w: w.publisher.content_type is not None),
    ("publisher.random_routing_key", _AMQP091, lambda w: w.publisher.random_routing_key),
    ("publisher.tx_size", _AMQP091, lambda w: w.publisher.tx_size > 0),
    ("consumer.processing_delay", ("amqp091", "aiopika", "amqp10"), lambda w: w.consumer.processing_delay > 0),
    ("consumer.rate", ("amqp091", "amqp10"), lambda w: w.consumer.rate is not None),
    ("consumer.global_prefetch", _AMQP091, lambda w: w.consumer.global_prefetch > 0),
    ("consumer.nack", _AMQP091, lambda w: w.consumer.nack),
    ("consumer.arguments", _AMQP091, lambda w: bool(w.consumer.arguments)),
    ("consumer.tx_size", _AMQP091, lambda w: w.consumer.tx_size > 0),
    ("consumer.exit_when: empty", _AMQP091, lambda w: w.consumer.exit_when == "empty"),
    ("consumer.pause", _AMQP091, lambda w: w.consumer.pause is not None),
    ("publisher.filter", _STREAM, lambda w: w.publisher.filter is not None),
    ("consumer.filter", _STREAM, lambda w: bool(w.consumer.filter)),
    ("queues.super_stream", _STREAM, lambda w: w.queues.super_stream is not None),
)


def _check_driver(w: WorkloadFields) -> None:
    """A setting the workload's driver would ignore is refused, not run as if it were honoured."""
    driver = w.resolved_driver()
    for cluster in w.clusters:
        for uri in cluster.uris + cluster.stream_uris:
            try:
                check_driver_options(uri, driver)
            except ConfigError as exc:                  # a validator's refusal is a ValueError (pydantic words it)
                raise ValueError(f"clusters.{cluster.name}: {exc}") from None
    for what, drivers, used in _DRIVER_ONLY:
        if driver not in drivers and used(w):
            raise ValueError(f"{what}: honoured by the {' and '.join(drivers)} driver{'s' if len(drivers) > 1 else ''} "
                             f"only (this workload uses {driver})")


def _check_clients(w: WorkloadFields) -> None:
    """Publisher and consumer settings that exclude each other (or that the broker would refuse together)."""
    p, c = w.publisher, w.consumer
    if p.tx_size and p.confirm:
        raise ValueError("publisher.tx_size: the broker allows transactions or publisher confirms on a channel, "
                         "not both")
    if c.auto_ack and (c.rate or c.nack or c.tx_size):
        raise ValueError("consumer.auto_ack: rate, nack and tx_size need acknowledgements; turn auto_ack off")
    if p.json_body and p.body_files:
        raise ValueError("publisher.json_body: give json_body or body_files, not both")
    if c.pause is not None and w.queues.auto_delete:
        raise ValueError("consumer.pause: a paused consumer cancels its subscription, which deletes an auto-delete "
                         "queue; set queues.auto_delete: false")
    if c.pause is not None and c.auto_ack:
        raise ValueError("consumer.pause: auto_ack consumers cannot hold messages back; turn auto_ack off")
    if c.match_unfiltered and not c.filter:
        raise ValueError("consumer.match_unfiltered: only means something with consumer.filter; give the values to "
                         "filter on")
    if w.variable_size and (p.json_body or p.body_files):
        raise ValueError("variable_size: file and JSON bodies have their own sizes; drop variable_size")


# which driver honours which connection setting (docs/connections.md): the stream driver opens its own
# connections (one per producer and per consumer, plus a locator), so only per_client describes it
LAYOUT_DRIVERS = ("amqp091", "aiopika", "amqp10")
IDLE_DRIVERS = ("amqp091",)


def _check_connections(w: WorkloadFields) -> None:
    """A connection layout the driver cannot open, or channel counts without per_client, are refused."""
    driver = w.resolved_driver()
    for name, value in (("producer_channels", w.producer_channels), ("consumer_channels", w.consumer_channels)):
        if value > 1 and w.connections != "per_client":
            raise ValueError(f"{name}: clients share a connection {value} at a time only with connections: per_client "
                             f"(this workload has connections: {w.connections or 'per_task'})")
    if driver not in LAYOUT_DRIVERS and w.connections not in (None, "per_client"):
        raise ValueError(f"connections: the {driver} driver opens one connection per producer and per consumer "
                         f"(per_client); {w.connections} is honoured by the {', '.join(LAYOUT_DRIVERS)} drivers only")
    if driver not in LAYOUT_DRIVERS and (w.producer_channels > 1 or w.consumer_channels > 1):
        raise ValueError(f"producer_channels: the {driver} driver opens one connection per client; "
                         f"honoured by the {', '.join(LAYOUT_DRIVERS)} drivers only")
    if w.idle_connections and driver not in IDLE_DRIVERS:
        raise ValueError(f"idle_connections: honoured by the {' and '.join(IDLE_DRIVERS)} driver only "
                         f"(this workload uses {driver})")
    churned = [s for s in w.steps() if w.step_churn(s) is not None]
    if churned and driver not in IDLE_DRIVERS:
        raise ValueError(f"churn: honoured by the {' and '.join(IDLE_DRIVERS)} driver only (this workload uses {driver})")
    if w.connect_rate is not None and driver not in LAYOUT_DRIVERS:
        raise ValueError(f"connect_rate: honoured by the {', '.join(LAYOUT_DRIVERS)} drivers only "
                         f"(this workload uses {driver})")
