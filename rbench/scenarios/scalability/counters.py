"""The broker's own account of a routing probe, and its memory alarm, from the Prometheus plugin.

Why the detailed per-channel family: the management API's exchange counters are aggregated every
collect_statistics_interval (5 s by default), so reading them means polling until they settle.
The plugin's /metrics/detailed?family=channel_queue_exchange_metrics reads the broker's per-channel,
per-queue publish counters as they are, so right after the last confirm the counters of the
probe's channels, for the sweep's exchange, sum to exactly the messages routed times the queues
each reached. A probe's channels are the ones absent from the snapshot taken before it.
"""
from __future__ import annotations

import re
import urllib.error
import urllib.request
from urllib.parse import urlsplit

DETAILED = "/metrics/detailed?family=channel_queue_exchange_metrics"
_LINE = re.compile(r'^rabbitmq_detailed_queue_messages_published_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
Snapshot = dict[tuple[str, str], int]     # (channel, queue) -> messages published to that queue via our exchange


DEFAULT_PORT = 15692


def default_prometheus(uri: str) -> str:
    """http://<the AMQP URI's host>:15692, the plugin's default listener (an IPv6 host in brackets). A guess:
    a second broker on the same host has its own port (4.0 on 15780 here), so the command checks it first
    (rbench.scenarios.scalability.broker_check)."""
    host = urlsplit(uri).hostname or "127.0.0.1"
    return f"http://[{host}]:{DEFAULT_PORT}" if ":" in host else f"http://{host}:{DEFAULT_PORT}"


def _get(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:   # an http(s) URL the user gave
        body: bytes = response.read()
    return body.decode()


def routed_snapshot(prometheus: str, exchange: str) -> Snapshot | None:
    """Per (channel, queue) publish counters for `exchange`; None when the plugin cannot be read."""
    try:
        text = _get(prometheus.rstrip("/") + DETAILED)
    except (OSError, urllib.error.URLError, ValueError):
        return None
    return parse_routed(text, exchange)


def parse_routed(text: str, exchange: str) -> Snapshot:
    """The (channel, queue) -> count rows of one exchange in the plugin's text exposition."""
    out: Snapshot = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        labels = dict(_LABEL.findall(match.group("labels")))
        if labels.get("exchange") != exchange:
            continue
        out[(labels.get("channel", ""), labels.get("queue", ""))] = int(float(match.group("value")))
    return out


def routed_since(before: Snapshot | None, after: Snapshot | None) -> int | None:
    """Messages × queues routed by channels that appeared between the two snapshots."""
    if before is None or after is None:
        return None
    old_channels = {channel for channel, _ in before}
    return sum(v for (channel, _), v in after.items() if channel not in old_channels)


def memory_alarm(prometheus: str) -> bool | None:
    """True while the broker's memory alarm is in effect; None when the plugin cannot be read."""
    try:
        text = _get(prometheus.rstrip("/") + "/metrics")
    except (OSError, urllib.error.URLError, ValueError):
        return None
    for line in text.splitlines():
        if line.startswith("rabbitmq_alarms_memory_used_watermark"):
            return float(line.split()[-1]) > 0
    return None
