"""The message pass in Spark (rbench.reduce.stats' docstring, step 4): published candidates for loss, every
delivery and the messages in flight at a cut, narrowed to integers, hash-partitioned by (run, cluster,
producer) and checked per partition by rbench.reduce.message_checks (mapInArrow)."""
from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from rbench.config.stream_filter import PRODUCER_STEP, SEQ_STEP, SLOTS, unwanted_of_workload
from rbench.config.topology import Queues, client_queue
from rbench.reduce.message_checks import CANDIDATE, CUT, DELIVERY, MSG_COUNTS, Readers, check_messages, sum_counts
from rbench.reduce.plan import Plan
from rbench.samples.schema import CONNECTION_LOST, MAY_BE_LOST, OUTCOMES

MSG_SCHEMA = T.StructType([T.StructField("kind", T.ByteType()), T.StructField("gid", T.LongType()),
                           *[T.StructField(c, T.LongType()) for c in MSG_COUNTS]])


def routes_of(samples: Any) -> dict[str, dict[int, list[str]]]:
    """run_id → producer → the queues each of its messages is routed to (run.json ``routes``; fan-out lists
    several). A run without routes (older runs, or routing rbench cannot know) expects one copy in any queue."""
    out: dict[str, dict[int, list[str]]] = {}
    for run in samples.runs:
        if run.record.routes:
            out[run.run_id] = {p: list(qs) for p, qs in run.record.routes.items()}
    return out


def stream_readers(workload: Mapping[str, Any], driver: str | None) -> dict[str, tuple[int, ...]]:
    """Queue → the consumers that each read every message of it, from run.json's ``workload``: the consumers of a
    stream outside a single-active group (consumer i reads queue i mod Q, a super stream's every partition).
    Empty when the queues' consumers share the messages (classic and quorum queues, a stream's single-active
    group: honoured by the stream driver only) or when the recorded queue section is not one rbench reads."""
    section = workload.get("queues") or {}
    consumer = workload.get("consumer") or {}
    if section.get("type") != "stream" or (consumer.get("single_active") and driver == "stream"):
        return {}
    try:
        names = Queues.model_validate(section).names(str(workload.get("name") or ""))
    except ValueError:
        return {}
    out: dict[str, list[int]] = {}
    for j in range(int(workload.get("consumers") or 0)):
        out.setdefault(client_queue(names, j), []).append(j)
    return {q: tuple(cs) for q, cs in out.items()}


def readers_of(samples: Any, plan: Plan) -> Readers:
    """rc → stream_readers of its run, for the clusters whose consumers each read every message."""
    per_run = {run.run_id: stream_readers(run.record.workload, run.record.driver) for run in samples.runs}
    return {rc: per_run[run_id] for (run_id, _), rc in plan.rc.items() if per_run.get(run_id)}


def unwanted_of(samples: Any) -> dict[str, tuple[tuple[int, int], ...]]:
    """run_id → the stream-filter slots its consumers drop (rbench.config.stream_filter), read from run.json's
    workload: those messages are expected by no consumer, so they are never loss candidates."""
    out: dict[str, tuple[tuple[int, int], ...]] = {}
    for run in samples.runs:
        ranges = unwanted_of_workload(run.record.workload)
        if ranges:
            out[run.run_id] = ranges
    return out


def wanted_column(ranges: tuple[tuple[int, int], ...] | None) -> Column:
    """True for a published row some consumer's filter keeps (every row without a filter)."""
    if not ranges:
        return F.lit(True)
    s = F.pmod(F.col("seq").cast("long") * SEQ_STEP + F.col("producer").cast("long") * PRODUCER_STEP, F.lit(SLOTS))
    dropped = F.lit(False)
    for lo, hi in ranges:
        dropped = dropped | ((s >= lo) & (s < hi))
    return ~dropped


def _expected_queue(routes: dict[int, list[str]] | None) -> Column:
    """One row per copy the broker should deliver: the published row exploded over its producer's queues
    (a null queue, matched against any queue, when the routes are unknown)."""
    if not routes:
        return F.lit(None).cast("string").alias("queue")
    pairs = [x for p, qs in sorted(routes.items()) for x in (F.lit(p), F.array(*[F.lit(q) for q in qs]))]
    return F.explode_outer(F.create_map(*pairs)[F.col("producer")]).alias("queue")


def message_pass(samples: Any, plan: Plan) -> dict[tuple[int, int], dict[str, int]]:
    """(STEP_GROUP, gid) / (RUN_GROUP, rc) / (FAULT_GROUP, rc × 64 + fault bit) → the counts of MSG_COUNTS.

    Steps count their measured messages. A cluster with faults also gets, over every message of its run
    (warm-ups included) and over each fault window (messages by ``t_sent``), the same figures plus the
    ``connection_lost`` messages and how many of them a consumer received. Every cluster gets (WHOLE_GROUP, rc):
    its fresh deliveries, distinct and duplicated copies and flagged redeliveries over the whole run. Without any
    fault the rows shuffled are exactly those of the step figures (plus the redelivered flag)."""
    routes = routes_of(samples)
    unwanted = unwanted_of(samples)
    with_faults = bool(plan.faults)

    def fault_cols(rc: int | None, red: Column) -> list[Column]:
        """The redelivered flag (every cluster's whole-run count) and, with faults, the fault mask."""
        fm = [(plan.fault_mask(rc) if rc is not None else F.lit(0).cast("long")).alias("fm")] if with_faults else []
        return [*fm, red.cast("boolean").alias("red")]

    frames = []
    for run_id, cluster, df in samples.con_branches:
        rc = plan.rc_of(run_id, cluster)
        if rc is not None:
            df = df.where(plan.fresh(rc))        # stale rows would be reorders and hide losses
        frames.append(df.select(F.lit(DELIVERY).cast("byte").alias("src"), F.lit(-1 if rc is None else rc).alias("rc"),
                                "producer", "queue", "seq", F.col("t_received").alias("t"), "consumer",
                                (plan.gid_tagged(rc) if rc is not None else F.lit(None).cast("long")).alias("gt"),
                                (plan.gid_measured(rc) if rc is not None else F.lit(None).cast("long")).alias("gm"),
                                *fault_cols(rc, F.col("redelivered"))))
    for run_id, cluster, df in samples.pub_branches:
        rc = plan.rc_of(run_id, cluster)
        if rc is None:
            continue
        gm = plan.gid_measured(rc)
        # a faulted cluster's run figures need every message whose step has a window, not only measured ones
        keep = plan.gid_tagged(rc).isNotNull() if rc in plan.faults else gm.isNotNull()
        nulls = [F.lit(None).cast("long").alias("t"), F.lit(None).cast("int").alias("consumer"),
                 F.lit(None).cast("long").alias("gt"), gm.alias("gm")]
        pub = df.where(F.col("outcome").isin(*MAY_BE_LOST) & keep & wanted_column(unwanted.get(run_id))).select(
            F.lit(CANDIDATE).cast("byte").alias("src"), F.lit(rc).alias("rc"), "producer", _expected_queue(routes.get(run_id)),
            "seq", *nulls, *fault_cols(rc, F.lit(None)))
        frames.append(pub)
        if rc in plan.faults:                    # in flight at a cut: matched against a delivery on any queue
            frames.append(df.where((F.col("outcome") == OUTCOMES[CONNECTION_LOST]) & keep).select(
                F.lit(CUT).cast("byte").alias("src"), F.lit(rc).alias("rc"), "producer",
                F.lit(None).cast("string").alias("queue"), "seq", *nulls, *fault_cols(rc, F.lit(None))))
    if not frames:
        return {}
    df = frames[0]
    for f in frames[1:]:
        df = df.unionByName(f)
    check = partial(check_messages, frozenset(plan.faults), readers=readers_of(samples, plan))
    n = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    return sum_counts(df.repartition(n, "rc", "producer").mapInArrow(check, MSG_SCHEMA).toArrow().to_pylist())
