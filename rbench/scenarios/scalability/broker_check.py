"""Before a sweep: the Prometheus endpoint it reads must be the broker the AMQP connection reached.

The sweep checks every routing probe against the broker's own routed counter and stops at the memory
alarm, both read from the Prometheus plugin. Without --prometheus the endpoint is a guess (the AMQP host
at 15692), which on a host with two brokers (3.10 on 5672/15692, 4.0 on 5680/15780) is the other broker:
the counter then never matched and the alarm watched the wrong node, silently. The same identity
comparison as the run sequence's (rbench.coordinator.broker_identity) turns that into one line.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from rbench.config.uri import mask_uri
from rbench.coordinator.broker_identity import BrokerIdentity, check_same_broker, from_prometheus
from rbench.errors import ConfigError
from rbench.scenarios.scalability import counters
from rbench.scenarios.scalability.plan import SweepSpec

Identify = Callable[[str], "BrokerIdentity | None"]


def checked_spec(spec: SweepSpec, load: BrokerIdentity | None, identify: Identify = from_prometheus) -> SweepSpec:
    """``spec`` with its Prometheus base URL settled (the one given, else the guess), once it is known not to
    answer for another broker than ``load`` (who the AMQP probe reached). ConfigError, one line naming both
    brokers, when it does. An endpoint that does not answer, or does not say who it is, is left to the
    sweep, which notes that the routed counter could not be read."""
    url = spec.prometheus or counters.default_prometheus(spec.uri)
    checked = dataclasses.replace(spec, prometheus=url)
    if load is None:
        return checked
    try:
        seen = identify(url.rstrip("/") + "/metrics")
    except (OSError, ValueError):
        return checked
    if seen is None:
        return checked
    try:
        check_same_broker(load, spec.uri, seen, url, "--prometheus")
    except ConfigError:
        how = "given" if spec.prometheus else f"not given: guessed the AMQP host's port {counters.DEFAULT_PORT}"
        raise ConfigError(f"--prometheus ({how}): {mask_uri(url)} answers for {seen.describe()}, but the sweep goes "
                          f"to {mask_uri(spec.uri)}, {load.describe()}; give --prometheus http://HOST:PORT of that "
                          f"broker's Prometheus plugin") from None
    return checked
