"""Outcome codes are spelled once on the Python side (rbench.samples.schema); the compiled recorder core
must hold them as C constants, so this checks its enum against that one source."""
from __future__ import annotations

from rbench.runtime._recorder import OUTCOME_CODES
from rbench.samples import schema


def test_recorder_core_enum_is_the_schema_indices() -> None:
    python_side = (schema.ACK, schema.NACK, schema.RETURNED, schema.TIMEOUT, schema.UNCONFIRMED,
                   schema.CONNECTION_LOST, schema.PENDING)
    assert OUTCOME_CODES == python_side


def test_pending_is_never_a_written_outcome() -> None:
    assert schema.PENDING == len(schema.OUTCOMES)
    assert schema.CORE_OUTCOMES[: len(schema.OUTCOMES)] == schema.OUTCOMES


def test_loss_and_delivery_sets_are_outcomes() -> None:
    assert set(schema.MAY_BE_LOST) < set(schema.MAY_BE_DELIVERED) <= set(schema.OUTCOMES)
