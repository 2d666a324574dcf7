"""Split a workload over Spark tasks, deterministically.

By default each queue, with all of its producers and consumers, lives in exactly one
task, so end-to-end latency is measured on one clock. Producer i and consumer j go to
queue i mod Q and j mod Q, as PerfTest spreads them over a queue pattern.
"""
from __future__ import annotations

import zlib

from rbench.config.checks import task_count_problem
from rbench.config.model import Workload
from rbench.config.stream_filter import FilterSpread
from rbench.config.topology import client_queue
from rbench.config.types import (
    OPEN_METRICS,
    ClusterPlan,
    ClusterTarget,
    ConsumerSpec,
    ControlEndpoint,
    FaultControlPlan,
    FaultPlan,
    MetricsAccess,
    PublisherSpec,
    QueueDecl,
    RunPlan,
    StepWindow,
    TaskPlan,
    Topology,
)
from rbench.config.variants import load_variant
from rbench.errors import ConfigError


def cluster_target(workload: Workload, name: str) -> ClusterTarget:
    for c in workload.clusters:
        if c.name == name:
            return ClusterTarget(name=c.name, uris=tuple(c.uris), stream_uris=tuple(c.stream_uris), nodes=c.nodes,
                                 instance_type=c.instance_type, volume_type=c.volume_type, volume_gb=c.volume_gb,
                                 variant=None if c.variant is None else load_variant(c.variant))
    raise ConfigError(f"clusters: no cluster named {name!r}")


def body_templates(workload: Workload) -> tuple[bytes, ...]:
    """Body templates every producer uses in turn (read and built here, on the driver)."""
    from rbench.perftest.bodies import file_bodies, json_bodies

    p = workload.publisher
    if p.body_files:
        return file_bodies(p.body_files)
    if p.json_body:
        return json_bodies(workload.size, p.json_body_fields, p.json_bodies, seed=zlib.crc32(workload.name.encode()))
    return ()


def step_windows(workload: Workload) -> tuple[StepWindow, ...]:
    windows, offset = [], 0.0
    for i, step in enumerate(workload.steps()):
        windows.append(StepWindow(index=i, rate=step.rate, offset_s=offset, duration_s=step.duration,
                                  churn=workload.step_churn(step)))
        offset += step.duration
    return tuple(windows)


def default_task_count(workload: Workload, slots: int) -> int:
    if workload.tasks != "auto":
        return int(workload.tasks)
    return max(1, min(workload.most_tasks(), slots))


def plan(workload: Workload, cluster: str, n_tasks: int, run_id: str, out_dir: str,
         control: ControlEndpoint | None = None, metrics_access: MetricsAccess = OPEN_METRICS) -> list[TaskPlan]:
    """The TaskPlans of one cluster's stage, index i for Spark partition i.

    The workload was checked when it was loaded (rbench.config.checks); ``n_tasks`` may come from the
    command line, so the rules about the task count are asked again for it."""
    if n_tasks < 1:
        raise ConfigError(f"tasks: expected at least 1, got {n_tasks}")
    problem = task_count_problem(workload, n_tasks)
    if problem:
        raise ConfigError(problem)
    bodies = body_templates(workload)
    target = cluster_target(workload, cluster)
    queue_names = workload.queues.names(workload.name)
    q = workload.queues
    args = tuple(sorted(q.broker_arguments().items()))
    decls = [QueueDecl(name=n, durable=q.durable, auto_delete=q.auto_delete, exclusive=q.exclusive, arguments=args,
                       partitions=q.partitions(n)) for n in queue_names]
    spread = None if workload.publisher.filter is None else FilterSpread.of(
        workload.publisher.filter.values, workload.publisher.filter.weights, workload.publisher.filter.unfiltered)
    routing_keys = q.super_stream.routing_keys if q.super_stream is not None else 0
    queue_task = {n: i % n_tasks for i, n in enumerate(queue_names)}
    ex = workload.exchange
    is_stream = q.type == "stream"
    exchange = "" if is_stream else ex.name

    def routing_key(queue: str) -> str:
        return queue if exchange == "" or workload.routing_key is None else workload.routing_key

    pubs: list[list[PublisherSpec]] = [[] for _ in range(n_tasks)]
    for i in range(workload.producers):
        queue = client_queue(queue_names, i)
        task = workload.task_of(i, n_tasks)
        p = workload.publisher
        pubs[task].append(PublisherSpec(
            producer_id=i, queue=queue, exchange=exchange, routing_key=routing_key(queue), confirm=p.confirm,
            confirm_window=p.confirm_window, mandatory=p.mandatory, persistent=p.persistent,
            message_format=p.message_format, content_type=p.content_type,
            properties=tuple(sorted(p.properties.items())), random_routing_key=p.random_routing_key,
            routing_key_cache=p.routing_key_cache, tx_size=p.tx_size, filter=spread,
            partitions=q.partitions(queue), routing_keys=routing_keys))
    cons: list[list[ConsumerSpec]] = [[] for _ in range(n_tasks)]
    for j in range(workload.consumers):
        queue = client_queue(queue_names, j)
        task = workload.task_of(j, n_tasks)
        c = workload.consumer
        cons[task].append(ConsumerSpec(
            consumer_id=j, queue=queue, prefetch=c.prefetch, auto_ack=c.auto_ack, multi_ack_every=c.multi_ack_every,
            processing_delay_us=int(round(c.processing_delay * 1e6)), offset=c.offset, single_active=c.single_active,
            message_format=workload.publisher.message_format,
            extra={"arguments": dict(c.arguments)} if c.arguments else {}, rate=c.rate,
            global_prefetch=c.global_prefetch, nack=c.nack, requeue=c.requeue, tx_size=c.tx_size,
            filter=tuple(c.filter), match_unfiltered=c.match_unfiltered, filter_spread=spread,
            partitions=q.partitions(queue)))

    steps = step_windows(workload)
    routes = expected_queues(workload)
    plans = []
    for t in range(n_tasks):
        own = tuple(d for d in decls if queue_task[d.name] == t)
        # as PerfTest (MulticastParams.configureQueues): a predeclared queue skips the declare, not the
        # binding; without it every message to the exchange is confirmed and dropped as unroutable
        bindings = tuple((d.name, routing_key(d.name)) for d in own) if exchange and q.bind else ()
        topology = Topology(exchange=exchange if not is_stream else "", exchange_type=ex.type,
                            exchange_durable=ex.durable, queues=() if q.predeclared else own, bindings=bindings)
        plans.append(TaskPlan(
            run_id=run_id, cluster=target, task=t, n_tasks=n_tasks, driver=workload.resolved_driver(),
            topology=topology, publishers=tuple(pubs[t]), consumers=tuple(cons[t]), steps=steps, size=workload.size,
            out_dir=out_dir, message_count=workload.publisher.message_count,
            consumer_message_count=workload.consumer.message_count,
            random_start_delay_s=workload.publisher.random_start_delay, phase=workload.schedule.phase,
            confirm_timeout_s=workload.publisher.confirm_timeout if workload.publisher.confirm else None,
            warmup_s=workload.warmup, drain_timeout_s=workload.drain_timeout,
            reconnect_timeout_s=workload.reconnect_timeout, control=control,
            metrics_port=workload.metrics_port, metrics_access=metrics_access, seed=zlib.crc32(f"{run_id}/{cluster}/{t}".encode()),
            bodies=bodies, variable_size=tuple((s.size, s.duration) for s in workload.variable_size or ()),
            consumer_start_delay_s=workload.consumer.start_delay,
            consumer_start_interval_s=workload.consumer.start_interval, exit_when=workload.consumer.exit_when,
            routes=tuple((s.producer_id, tuple(routes[s.producer_id])) for s in pubs[t]) if routes else (),
            connections=workload.connection_layout()))
    return plans


def _topic_match(pattern: list[str], words: list[str]) -> bool:
    """AMQP topic matching: ``*`` is exactly one word, ``#`` zero or more."""
    if not pattern:
        return not words
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(_topic_match(rest, words[i:]) for i in range(len(words) + 1))
    return bool(words) and (head == "*" or head == words[0]) and _topic_match(rest, words[1:])


def expected_queues(workload: Workload) -> dict[int, list[str]] | None:
    """Which of the workload's queues each producer's messages are routed to (fan-out: several), or None
    when rbench cannot know (random routing keys, predeclared or unbound queues, exchange types whose
    routing depends on more than the key). The reduce expects each message once per queue listed here."""
    queue_names = workload.queues.names(workload.name)
    q, ex = workload.queues, workload.exchange
    direct_to_queue = q.type == "stream" or ex.name == ""

    def key(queue: str) -> str:
        return queue if direct_to_queue or workload.routing_key is None else workload.routing_key

    if q.super_stream is not None:
        return None               # one copy in whichever partition its key hashes to (recorded under the partition)
    out: dict[int, list[str]] = {}
    for i in range(workload.producers):
        own = client_queue(queue_names, i)
        if direct_to_queue:
            out[i] = [own]
            continue
        if workload.publisher.random_routing_key or q.predeclared or not q.bind:
            return None
        if ex.type == "fanout":
            out[i] = list(queue_names)
        elif ex.type == "direct":
            out[i] = [n for n in queue_names if key(n) == key(own)]
        elif ex.type == "topic":
            out[i] = [n for n in queue_names if _topic_match(key(n).split("."), key(own).split("."))]
        else:
            return None
    return out


# the local executor waits for a node to boot (cluster.sh BOOT_TIMEOUT, 180 s) before it gives up
LOCAL_FAULT_TIMEOUT_S = 300.0


def fault_plan(workload: Workload, cluster: str) -> tuple[tuple[FaultPlan, ...], FaultControlPlan | None]:
    """The faults that act on ``cluster`` (validation resolved their targets) and how to execute them."""
    spec = next(c for c in workload.clusters if c.name == cluster)
    faults = tuple(FaultPlan(index=i, action=f.action, node=f.node, at_s=f.at, restart_after_s=f.restart_after)
                   for i, f in enumerate(workload.faults) if cluster in {t.name for t in workload.fault_targets(f)})
    if not faults:
        return (), None
    fc = spec.fault_control
    if fc.command is None:
        return faults, FaultControlPlan(kind="local", timeout_s=LOCAL_FAULT_TIMEOUT_S)
    return faults, FaultControlPlan(kind="command", commands=tuple(fc.command.templates().items()),
                                    nodes=tuple((n, tuple(sorted(v.items()))) for n, v in fc.node_vars().items()),
                                    timeout_s=fc.timeout)


def plan_run(workload: Workload, run_id: str, out_dir: str, tasks: dict[str, int],
             control: ControlEndpoint | None = None, metrics_access: MetricsAccess = OPEN_METRICS) -> RunPlan:
    """The whole run, planned once: what run.json records, the status line shows and each Spark stage runs.

    ``tasks`` gives the number of Spark tasks of each cluster's stage (see ``default_task_count``).
    """
    clusters = []
    for c in workload.clusters:
        faults, fault_control = fault_plan(workload, c.name)
        clusters.append(ClusterPlan(target=cluster_target(workload, c.name),
                                    tasks=tuple(plan(workload, c.name, tasks[c.name], run_id, out_dir, control, metrics_access)),
                                    faults=faults, fault_control=fault_control))
    return RunPlan(run_id=run_id, workload_name=workload.name, driver=workload.resolved_driver(),
                   steps=step_windows(workload), producers=workload.producers, consumers=workload.consumers,
                   warmup_s=workload.warmup, message_count=workload.publisher.message_count,
                   colocate=workload.colocate, clusters=tuple(clusters))


def describe(plans: list[TaskPlan]) -> str:
    """A table of the split, as `rbench plan` prints it."""
    lines = [f"{'task':>4}  {'queues':<40} {'producers':>9} {'consumers':>9}"]
    for p in plans:
        queues = sorted({s.queue for s in p.publishers} | {s.queue for s in p.consumers} | {d.name for d in p.topology.queues})
        shown = ", ".join(queues[:4]) + (f" … (+{len(queues) - 4})" if len(queues) > 4 else "")
        lines.append(f"{p.task:>4}  {shown:<40} {len(p.publishers):>9} {len(p.consumers):>9}")
    return "\n".join(lines)
