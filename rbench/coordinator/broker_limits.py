"""The broker's limits and deprecations, checked against the workload after the probe and before any load.

RabbitMQ 4.0 changed what a workload written for 3.x means, and accepts most of it without a word: a
20 MB body validates and then every publish times out (4.0's default max_message_size is 16 MiB, 3.x's
128 MiB); ``x-max-in-memory-length`` on a quorum queue is declared and ignored; a transient non-exclusive
queue is declared with only a line in the broker's log (deprecated, refused from 4.3); an ``ha-mode`` queue
argument is declared and nothing is mirrored (classic queue mirroring is gone). Each rule here needs the
broker's version, so it runs after the probe (rbench.coordinator.sequence), and says in one line which
workload field it is about, which broker said so and how it knows (read from the broker, or the
version's default). What the broker states itself (its deprecated features' phases, /api/deprecated-features,
RabbitMQ ≥ 3.13) wins over what the version implies.

The rules are one table (RULES): a rule takes the workload and one cluster's BrokerFacts and returns its
findings; errors stop the run (ConfigError), warnings are printed once.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rbench.errors import ConfigError
from rbench.samples.broker_facts import REFUSING_PHASES, BrokerFacts

if TYPE_CHECKING:
    from rbench.config.model import Workload

MIB = 1024 * 1024
# RabbitMQ's default max_message_size: 128 MiB from 3.8 to 3.13, 16 MiB from 4.0 (rabbitmq.conf max_message_size)
DEFAULT_MAX_MESSAGE_SIZE = ((4,), 16 * MIB, "4.x"), ((3, 8), 128 * MIB, "3.8 to 3.13")
AMQP_DRIVERS = ("amqp091", "aiopika", "amqp10")          # the stream protocol has its own frame limit
IN_MEMORY_ARGUMENTS = ("x-max-in-memory-length", "x-max-in-memory-bytes")
ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class Finding:
    """One rule's verdict on one cluster: ``field`` is the workload field to change."""

    level: str           # ERROR or WARNING
    field: str
    message: str

    def line(self, cluster: str) -> str:
        return f"cluster {cluster}: {self.field}: {self.message}"


def _broker(facts: BrokerFacts) -> str:
    return f"{facts.product or 'RabbitMQ'} {facts.version or '(version unknown)'}"


def _is_4(facts: BrokerFacts) -> bool:
    return facts.version_tuple() >= (4,)


def max_message_size(facts: BrokerFacts) -> tuple[int, str] | None:
    """The broker's largest message body in bytes and how that is known; None for a version with no known default."""
    if facts.max_message_size is not None:
        return facts.max_message_size, f"read from the broker, {facts.source}"
    version = facts.version_tuple()
    for since, size, series in DEFAULT_MAX_MESSAGE_SIZE:
        if version and version >= since:
            return size, (f"RabbitMQ {series}'s default, {size // MIB} MiB: the broker does not "
                          f"expose its setting, so a rabbitmq.conf that changed it is not seen")
    return None


def _bodies(workload: Workload) -> list[tuple[str, int]]:
    """(field, body bytes) for every body size the workload sends."""
    sizes = [("size (PerfTest -s)", workload.size)]
    sizes += [(f"variable_size[{i}].size (PerfTest -vs)", s.size) for i, s in enumerate(workload.variable_size or [])]
    for i, name in enumerate(workload.publisher.body_files):
        try:
            sizes.append((f"publisher.body_files[{i}] ({name}, PerfTest -B)", Path(name).stat().st_size))
        except OSError:
            pass                    # unreadable files are the body loader's one-line error, not this rule's
    return sizes


def message_size_rule(workload: Workload, facts: BrokerFacts) -> list[Finding]:
    """A body above the broker's max_message_size is refused by the broker (the channel closes, or on 4.0 every
    publish goes unconfirmed until the confirm timeout): an error before the run."""
    if workload.resolved_driver() not in AMQP_DRIVERS:
        return []
    limit = max_message_size(facts)
    if limit is None:
        return []
    most, how = limit
    return [Finding(ERROR, where, f"a {size:,}-byte body is above {_broker(facts)}'s max_message_size, {most:,} bytes "
                                  f"({how}); send at most {most:,} bytes or raise the broker's max_message_size")
            for where, size in _bodies(workload) if size > most]


def in_memory_rule(workload: Workload, facts: BrokerFacts) -> list[Finding]:
    """4.0's quorum queues keep no messages in memory: x-max-in-memory-length/-bytes are accepted and ignored."""
    if workload.queues.type != "quorum" or not _is_4(facts):
        return []
    return [Finding(WARNING, f"queues.arguments.{key} (PerfTest -qa)",
                    f"ignored by {_broker(facts)}: quorum queues keep no messages in memory since RabbitMQ 4.0, so this "
                    f"argument is a no-op there (the broker accepts it silently); drop it")
            for key in IN_MEMORY_ARGUMENTS if key in workload.queues.arguments]


def _named(queues: list[str]) -> str:
    shown = ", ".join(queues[:3])
    return shown + (f" and {len(queues) - 3} more" if len(queues) > 3 else "")


def transient_queue_rule(workload: Workload, facts: BrokerFacts) -> list[Finding]:
    """Transient (non-durable) non-exclusive classic queues: deprecated in 4.0 (deprecated feature
    transient_nonexcl_queues), removed in 4.3. Where the broker refuses them (4.3+, or the feature denied) the
    run declares its queues durable instead (durable_instead) and says so once: a transient queue only differs by
    not surviving a restart, which a run that deletes its queues afterwards never sees."""
    q = workload.queues
    if q.type != "classic" or q.durable or q.exclusive or q.predeclared:
        return []
    phase = facts.deprecation_phase("transient_nonexcl_queues")
    if phase is None and not _is_4(facts):
        return []
    said = (f"deprecated feature transient_nonexcl_queues: {phase.replace('_', ' ')}" if phase is not None
            else "deprecated since RabbitMQ 4.0")
    what = (f"queue(s) {_named(q.names(workload.name))} would be transient and not exclusive, which {_broker(facts)} "
            f"{'refuses' if facts.transient_queues_removed() else 'deprecates'} ({said}; refused from RabbitMQ 4.3)")
    fix = "set queues.durable: true (PerfTest -f persistent) or queues.exclusive: true"
    if facts.transient_queues_removed():
        return [Finding(WARNING, "queues.durable", f"{what}; declared durable instead, on every cluster of this run so "
                                                   f"they stay comparable; {fix} to say so")]
    return [Finding(WARNING, "queues.durable", f"{what}; {fix}")]


def durable_instead(workload: Workload, facts: dict[str, BrokerFacts]) -> Workload:
    """The workload to run: its transient non-exclusive classic queues made durable when any cluster's broker
    refuses them (transient_queue_rule said so)."""
    q = workload.queues
    if q.type != "classic" or q.durable or q.exclusive or q.predeclared \
            or not any(f.transient_queues_removed() for f in facts.values()):
        return workload
    return workload.model_copy(update={"queues": q.model_copy(update={"durable": True})})


def mirroring_rule(workload: Workload, facts: BrokerFacts) -> list[Finding]:
    """Classic queue mirroring (ha-mode & co.) was removed in 4.0; as queue arguments these keys were never read
    (mirroring is a policy), so on 3.x they are a warning, on 4.0 an error: the run would measure unreplicated queues."""
    keys = [k for k in workload.queues.arguments if k.startswith(("ha-", "x-ha-"))]
    if not keys:
        return []
    phase = facts.deprecation_phase("classic_queue_mirroring")
    field = f"queues.arguments.{keys[0]} (PerfTest -qa)"
    if _is_4(facts) or phase in REFUSING_PHASES:
        said = f"; deprecated feature classic_queue_mirroring: {phase}" if phase else ""
        return [Finding(ERROR, field, f"classic queue mirroring was removed in RabbitMQ 4.0 ({_broker(facts)}{said}): "
                                      f"the queues would not be replicated; use queues.type: quorum (PerfTest -qq)")]
    return [Finding(WARNING, field, f"{_broker(facts)} ignores it as a queue argument (mirroring is set by a policy, "
                                    f"and was removed in RabbitMQ 4.0); use queues.type: quorum (PerfTest -qq)")]


STREAM_SAC_SINCE = (3, 11)


def stream_single_active_rule(workload: Workload, facts: BrokerFacts) -> list[Finding]:
    """Single active consumer on streams came with RabbitMQ 3.11; an older broker accepts the subscription and
    delivers to every member, so each message would be consumed once per consumer and counted duplicated."""
    version = facts.version_tuple()
    if not workload.consumer.single_active or workload.resolved_driver() != "stream" or not version \
            or version >= STREAM_SAC_SINCE:
        return []
    return [Finding(ERROR, "consumer.single_active", f"single active consumer on streams needs RabbitMQ 3.11 or later; "
                                                     f"{_broker(facts)} would deliver every message to every consumer "
                                                     f"of the group")]


STREAM_FILTER_SINCE = (3, 13)


def stream_filter_rule(workload: Workload, facts: BrokerFacts) -> list[Finding]:
    """Stream filtering (Publish v2, filter.N subscription properties) came with RabbitMQ 3.13; an older broker
    refuses the frames, so the run would fail after its start instead of before it."""
    version = facts.version_tuple()
    if workload.resolved_driver() != "stream" or not version or version >= STREAM_FILTER_SINCE:
        return []
    used = [f for f, on in (("publisher.filter", workload.publisher.filter is not None),
                            ("consumer.filter", bool(workload.consumer.filter))) if on]
    return [Finding(ERROR, field, f"stream filtering needs RabbitMQ 3.13 or later; {_broker(facts)} does not have it")
            for field in used]


Rule = Callable[["Workload", BrokerFacts], list[Finding]]
RULES: tuple[Rule, ...] = (message_size_rule, in_memory_rule, transient_queue_rule, mirroring_rule,
                           stream_single_active_rule, stream_filter_rule)


def findings(workload: Workload, facts: dict[str, BrokerFacts]) -> list[tuple[str, Finding]]:
    """(cluster, finding) for every rule and every cluster whose broker was read, in the clusters' order."""
    return [(c.name, f) for c in workload.clusters if c.name in facts for rule in RULES for f in rule(workload, facts[c.name])]


def check_broker_limits(workload: Workload, facts: dict[str, BrokerFacts], out: TextIO | None = None) -> Workload:
    """Print each warning once (``rbench: warning: cluster C: FIELD: …``), then raise the first error as a ConfigError;
    return the workload to run (durable_instead)."""
    found = findings(workload, facts)
    for cluster, f in found:
        if f.level == WARNING:
            print(f"rbench: warning: {f.line(cluster)}", file=out or sys.stderr, flush=True)
    first = next(((c, f) for c, f in found if f.level == ERROR), None)
    if first is not None:
        raise ConfigError(first[1].line(first[0]))
    return durable_instead(workload, facts)
