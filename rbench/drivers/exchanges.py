"""An exchange that already exists with the other durability: used as it is, and said once.

PerfTest (>= 2.20) declares its exchange durable, as rbench does by default; older rbench runs, older
PerfTest and workloads with ``exchange.durable: false`` declare it non-durable. The broker refuses a
declare that differs from the existing exchange in any argument (406 PRECONDITION_FAILED - inequivalent
arg 'durable'), and that used to end the run. An exchange's durability only says whether the exchange
itself survives a broker restart; it routes the same either way, so every driver that declares exchanges
declares such an exchange passively instead and warns.

The warning is said once per exchange and durability in a process: a task's process outlives its
drivers (a reconnect and each rate-search probe open a fresh driver and declare again), so a flag on the
driver would repeat it.
"""
from __future__ import annotations

import logging

from rbench.drivers.replies import PreconditionFailed

log = logging.getLogger(__name__)

DURABILITY_MISMATCH = "inequivalent arg 'durable'"      # in the 406's reply text, on 3.x and 4.x
_said: set[tuple[str, bool]] = set()


def forget_warnings() -> None:
    """A new task in this process (a reused Python worker): its run says the warning again."""
    _said.clear()


def durability_differs(exc: BaseException) -> bool:
    """Whether a refused exchange.declare failed only because the exchange exists with the other durability."""
    return isinstance(exc, PreconditionFailed) and DURABILITY_MISMATCH in exc.reply_text


def say_used_as_it_is(exchange: str, wanted_durable: bool) -> None:
    """Warn, once per exchange and durability, that an existing exchange is used with its own durability."""
    key = (exchange, wanted_durable)
    if key in _said:
        return
    _said.add(key)
    existing = "non-durable" if wanted_durable else "durable"
    wanted = "durable" if wanted_durable else "non-durable"
    log.warning("exchange %r already exists %s (another client declared it so); rbench asked for %s: using it as "
                "it is (passive declare), it routes the same; delete it to have it declared %s",
                exchange, existing, wanted, wanted)
