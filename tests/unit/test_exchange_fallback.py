"""Which refusal lets a driver use an existing exchange as it is, and the warning said once (no broker)."""
from __future__ import annotations

import logging
import uuid

import pytest

from rbench.drivers.exchanges import durability_differs, say_used_as_it_is
from rbench.drivers.replies import NotFound, PreconditionFailed, error_for

# the broker's words (RabbitMQ 3.10 and 4.0 say the same)
DURABLE_406 = ("PRECONDITION_FAILED - inequivalent arg 'durable' for exchange 'direct' in vhost '/': "
               "received 'false' but current is 'true'")
TYPE_406 = ("PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'direct' in vhost '/': "
            "received 'topic' but current is 'direct'")


def test_only_a_durability_mismatch_is_used_as_it_is() -> None:
    assert durability_differs(error_for(406, DURABLE_406, "channel", "declare exchange 'direct'"))
    assert not durability_differs(error_for(406, TYPE_406, "channel", "declare exchange 'direct'"))    # routes otherwise
    assert not durability_differs(NotFound("declare exchange 'direct'", 404, DURABLE_406))
    assert not durability_differs(PreconditionFailed("declare exchange 'direct'", 406, "PRECONDITION_FAILED"))


def test_the_warning_is_said_once_per_exchange_and_durability(caplog: pytest.LogCaptureFixture) -> None:
    exchange = f"x-{uuid.uuid4().hex}"
    caplog.set_level(logging.WARNING, logger="rbench.drivers.exchanges")
    for _ in range(3):
        say_used_as_it_is(exchange, True)
    say_used_as_it_is(exchange, False)
    said = [r.getMessage() for r in caplog.records if exchange in r.getMessage()]
    assert len(said) == 2
    assert "exists non-durable" in said[0] and "asked for durable" in said[0] and "\n" not in said[0]
    assert "exists durable" in said[1] and "asked for non-durable" in said[1]
