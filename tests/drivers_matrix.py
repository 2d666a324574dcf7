"""The driver feature matrix: what each registered driver supports, and why it skips the rest.

One table, read by three things: the contract suite (tests/broker/test_driver_contract.py
skips a cell that is not supported, with the reason written here), docs/drivers.md (its
matrix section is rendered from this table; tests/unit/test_driver_matrix.py fails when
the two differ), and that same unit test, which fails when a driver registered in
``rbench.drivers.base.DRIVERS`` has no row. A new driver slots in by adding one row.

Regenerate the docs section after editing:  ``python -m tests.drivers_matrix --write``
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rbench.config.types import ClusterTarget
from tests.brokers import BROKERS, RABBITMQ_3

# feature → what the contract suite checks for it (the docs' legend)
FEATURES: dict[str, str] = {
    "declare": "`declare()` creates the queue or stream, and the driver's own delete method removes it",
    "confirms": "publisher confirms: exactly one `on_confirm(seq, acked=True)` per message; "
                "`drain()` returns 0 once all are in, the number outstanding until then",
    "ordered_confirms": "confirms reach the sink in publishing (seq) order",
    "confirm_window": "`ready()` blocks while `confirm_window` messages are unconfirmed, and returns once one is",
    "returns": "a mandatory publish to a key nothing is bound to comes back through `on_return` (and is acked)",
    "prefetch": "`prefetch` bounds the deliveries a consumer holds unacked (broker-side count)",
    "multi_ack": "`multi_ack_every=N` acks N deliveries at a time with multiple=true; none is left unacked",
    "pause": "a consumer's `pausable` is True: `pause()` stops its deliveries (the rest waits in the queue) and "
             "`resume()` starts them again (consumer.pause, docs/broker.md); without it `pausable` is False and "
             "both raise ConfigError",
    "streams": "publishes to a stream queue and consumes it from offset `first`",
    "tls": "connects over TLS (a TLS-terminating proxy in front of the broker) and round-trips messages",
    "reconnect": "a connection cut (TCP proxy) is one `ConnectionLost`: `open()`'s `on_lost` is called once (never "
                 "by `aclose()`), `ready()`/`publish()` raise it, `uri` names the URI opened; a fresh driver gets the "
                 "deliveries left unacked back with the broker's redelivered flag, or, on a stream, a consumer's "
                 "`resume_spec` starts after what it handled (the runtime rides through it)",
}

# what every driver must do; not a column because there is no skipping it
REQUIRED: tuple[str, ...] = (
    "open against the broker and `aclose()`; afterwards the driver refuses work with a BrokerError",
    "wrong password → ConnectError within 10 s, password masked (`***`)",
    "closed port → ConnectError within 10 s naming the refusal, password masked",
    "publish, then consume: every message delivered once, stamp intact, in publishing order",
    "a consumer's `aclose()` stops its deliveries, and the driver's `messages_ready(queue)` counts what is left "
    "(the stream driver raises ConfigError: a stream never empties)",
    "a consumer's `pausable` is what the matrix's `pause` column says",
    "a consumer's `resume_spec(spec)` is `spec` itself where the broker redelivers what was unacked "
    "(every driver but `stream`; checked with `reconnect`)",
    "connection cut mid-publish (TCP proxy): `ready()`/`publish()` raise a BrokerError within 10 s, "
    "`drain()` and `aclose()` return, and confirmed + refused + still outstanding = published (no silent loss)",
    "20 ms of added network latency each way shows in every confirm's latency (drivers with confirms)",
)


@dataclass(frozen=True)
class DriverRow:
    """One driver's row: how the contract suite reaches it and which features it supports.

    ``supports`` names every feature of FEATURES: True, or the reason it is not supported
    (that text is the pytest skip reason and goes into docs/drivers.md). It holds on every broker of
    tests/brokers.py unless ``on_broker`` says otherwise for one of them (broker name → feature → answer):
    the contract suite runs each driver on RabbitMQ 3.10 and 4.0, and a feature one broker lacks is a skip
    on that broker only.
    """

    name: str
    endpoint: Literal["amqp", "stream"]            # the broker listener it talks to: 5672 or 5552
    queue_type: Literal["classic", "stream"]       # what the contract suite declares for it
    target: Callable[[str], ClusterTarget]         # endpoint URI → the ClusterTarget the driver opens
    delete: str                                    # its method deleting queues/streams by name ("" if none)
    tls_query: str = ""                            # amqps:// query naming the CA file ({ca})
    supports: dict[str, bool | str] = field(default_factory=dict)
    on_broker: dict[str, dict[str, bool | str]] = field(default_factory=dict)

    def reason(self, feature: str, broker: str = RABBITMQ_3.name) -> str | None:
        """None when ``feature`` is supported on ``broker``, else why not."""
        if feature not in FEATURES:
            raise KeyError(f"unknown feature {feature!r}; expected one of {', '.join(FEATURES)}")
        if broker not in {b.name for b in BROKERS}:
            raise KeyError(f"unknown broker {broker!r}; expected one of {', '.join(b.name for b in BROKERS)}")
        value = self.on_broker.get(broker, {}).get(feature, self.supports.get(feature, "not in the matrix"))
        return None if value is True else str(value)


def _amqp_target(uri: str) -> ClusterTarget:
    return ClusterTarget("contract", (uri,))


def _stream_target(uri: str) -> ClusterTarget:
    return ClusterTarget("contract", (), stream_uris=(uri,))


MATRIX: dict[str, DriverRow] = {row.name: row for row in (
    DriverRow(
        "amqp091", "amqp", "classic", _amqp_target, "delete_queues", tls_query="cacertfile={ca}",
        supports={"declare": True, "confirms": True, "ordered_confirms": True, "confirm_window": True,
                  "returns": True, "prefetch": True, "multi_ack": True, "pause": True, "streams": True,
                  "tls": True, "reconnect": True}),
    DriverRow(
        "aiopika", "amqp", "classic", _amqp_target, "delete_queues", tls_query="cafile={ca}",
        supports={"declare": True, "confirms": True,
                  "ordered_confirms": "one asyncio task per publish: a confirm reaches the sink when its task "
                                      "is next scheduled, so seqs can come out of order (each still exactly once)",
                  "confirm_window": True, "returns": True, "prefetch": True, "multi_ack": True,
                  "pause": "not implemented: the reference driver is the yardstick for what publishing and "
                           "consuming cost; the plan refuses consumer.pause for it",
                  "streams": "the reference driver passes no consumer arguments, so it cannot ask for "
                             "x-stream-offset=first (RabbitMQ starts a stream consumer at `next`)",
                  "tls": True, "reconnect": True}),
    DriverRow(
        "amqp10", "amqp", "classic", _amqp_target, "delete_queues", tls_query="cacertfile={ca}",
        supports={"declare": True, "confirms": True, "ordered_confirms": True, "confirm_window": True,
                  "returns": "AMQP 1.0 has no mandatory flag: RabbitMQ 3.x accepts (and drops) a message "
                             "nothing is bound to; a released or modified outcome is reported through on_return",
                  "prefetch": True,
                  "multi_ack": "dispositions are batched (one ranged disposition per N or per read), but the "
                               "suite's byte budget counts 21-byte 0.9.1 acks, and each 1.0 credit top-up is a "
                               "51-byte flow frame (tests/broker/test_amqp10_driver.py checks the batching)",
                  "pause": "not implemented: pausing a link is withdrawing its credit, and the C Receiver "
                           "(ext/drivers/amqp10_link.pyx) tops its credit up by itself as deliveries arrive; the "
                           "plan refuses consumer.pause for it",
                  "streams": "RabbitMQ 3.x's AMQP 1.0 plugin cannot read a stream from an offset (4.x only)",
                  "tls": True, "reconnect": True},
        on_broker={"rabbitmq-4.0": {
            "returns": "4.0 releases a message nothing is bound to (the released outcome, counted as returned "
                       "through on_return), but AMQP 1.0 sends no body back: the driver rebuilds the stamp's "
                       "producer and seq only, so the suite's 'stamp intact' does not hold",
            "streams": True}}),
    DriverRow(
        "stream", "stream", "stream", _stream_target, "delete_streams",
        supports={"declare": True, "confirms": True, "ordered_confirms": True, "confirm_window": True,
                  "returns": "the stream protocol has no exchanges or routing keys: a publisher writes to one "
                             "stream by name, and a missing stream is refused when the publisher is declared (404)",
                  "prefetch": "stream credit counts chunks, not messages, and stream consumers do not ack",
                  "multi_ack": "stream consumers do not ack; the driver gives credit back per chunk",
                  "pause": "a stream keeps every message whatever its consumers do: its depth never drains, so "
                           "consumer.pause (which resumes and ends on the queues' depth) has nothing to watch; the "
                           "plan refuses it for this driver",
                  "streams": True,
                  "tls": "rabbitmq-stream+tls:// is refused by stream_wire.parse_stream_uri (not implemented)",
                  "reconnect": True}),
)}


# ---------------------------------------------------------------- docs/drivers.md

DOC = Path(__file__).resolve().parent.parent / "docs" / "drivers.md"
BEGIN = ("<!-- BEGIN driver matrix: generated by `python -m tests.drivers_matrix --write`; "
         "edit tests/drivers_matrix.py -->")
END = "<!-- END driver matrix -->"


def _cell(row: DriverRow, feature: str) -> str:
    """yes on every broker, skip on none, else the brokers it holds on ("4.0 only")."""
    on = [b for b in BROKERS if row.reason(feature, b.name) is None]
    if len(on) == len(BROKERS):
        return "yes"
    return "skip" if not on else " and ".join(b.version_prefix for b in on) + " only"


def render() -> str:
    """The docs section (between BEGIN and END) for the current MATRIX."""
    names = list(MATRIX)
    lines = [BEGIN, "", "The contract suite runs every driver on both loops and on both brokers: "
             + " and ".join(f"RabbitMQ {b.version_prefix} ({b.start_with})" for b in BROKERS) + ".", "",
             "| feature | " + " | ".join(f"`{n}`" for n in names) + " |", "|---|" + "---|" * len(names)]
    for feature in FEATURES:
        lines.append(f"| {feature} | " + " | ".join(_cell(MATRIX[n], feature) for n in names) + " |")
    lines += ["", "What each feature means (the contract test that checks it):", ""]
    lines += [f"- **{feature}**: {text}" for feature, text in FEATURES.items()]
    lines += ["", "Required of every driver (never skipped):", ""]
    lines += [f"- {text}" for text in REQUIRED]
    lines += ["", "Skips and why:", ""]
    for n in names:
        row = MATRIX[n]
        listed = False
        for feature in FEATURES:
            whys = {b.version_prefix: row.reason(feature, b.name) for b in BROKERS}
            distinct = {w for w in whys.values() if w is not None}
            if not distinct:
                continue
            listed = True
            if len(distinct) == 1 and None not in whys.values():
                lines.append(f"- `{n}` / {feature}: {distinct.pop()}")
            else:
                lines += [f"- `{n}` / {feature} on RabbitMQ {v}: {w}" for v, w in whys.items() if w is not None]
        if not listed:
            lines.append(f"- `{n}`: none")
    lines += ["", "How the contract suite reaches each driver:", "",
              "| driver | broker port (" + " / ".join(b.version_prefix for b in BROKERS) + ") | declares | deletes with "
              "| TLS URI query |", "|---|---|---|---|---|"]
    for n in names:
        row = MATRIX[n]
        ports = " / ".join(str(b.amqp_port if row.endpoint == "amqp" else b.stream_port) for b in BROKERS)
        port = f"{ports} ({'AMQP' if row.endpoint == 'amqp' else 'streams'})"
        tls = f"`{row.tls_query}`" if row.tls_query else "—"
        declares = f"{row.queue_type} queue" + ("" if row.reason("declare") is None else " (declared over AMQP 0.9.1)")
        deletes = f"`{row.delete}`" if row.delete else "—"
        lines.append(f"| `{n}` | {port} | {declares} | {deletes} | {tls} |")
    lines += ["", END]
    return "\n".join(lines)


def documented() -> str:
    """The matrix section as docs/drivers.md has it now ('' when it has none)."""
    text = DOC.read_text() if DOC.exists() else ""
    start, end = text.find(BEGIN), text.find(END)
    return text[start:end + len(END)] if start >= 0 and end > start else ""


def write() -> None:
    """Replace the matrix section of docs/drivers.md with ``render()``."""
    text = DOC.read_text()
    current = documented()
    if not current:
        raise SystemExit(f"{DOC}: no '{BEGIN[:30]}…' / '{END}' markers to write between")
    DOC.write_text(text.replace(current, render()))


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
        print(f"wrote the driver matrix into {DOC}")
    else:
        print(render())
