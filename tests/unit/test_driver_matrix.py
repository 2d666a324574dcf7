"""The driver feature matrix (tests/drivers_matrix.py) is complete, and docs/drivers.md shows it as it is."""
from __future__ import annotations

import importlib

import pytest

from rbench.drivers.base import DRIVERS
from tests import drivers_matrix
from tests.drivers_matrix import FEATURES, MATRIX


def test_every_registered_driver_has_a_row_and_every_row_a_driver() -> None:
    missing = sorted(set(DRIVERS) - set(MATRIX))
    assert not missing, f"add a row to tests/drivers_matrix.py MATRIX for {missing}"
    assert not set(MATRIX) - set(DRIVERS), "a row names a driver that is not registered"


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_each_row_answers_every_feature_with_yes_or_a_reason(name: str) -> None:
    row = MATRIX[name]
    assert set(row.supports) == set(FEATURES), f"{name}: features {sorted(set(FEATURES) ^ set(row.supports))}"
    for feature, value in row.supports.items():
        assert value is True or (isinstance(value, str) and len(value) > 20), f"{name}/{feature}: {value!r}"
    if row.reason("declare") is None:                 # what it declares, it must be able to delete
        module, _, cls = DRIVERS[name].partition(":")
        assert callable(getattr(getattr(importlib.import_module(module), cls), row.delete, None)), \
            f"{name}: no delete method {row.delete!r}"
    if row.reason("tls") is None:
        assert "{ca}" in row.tls_query


def test_an_unknown_feature_is_an_error_not_a_silent_skip() -> None:
    with pytest.raises(KeyError, match="unknown feature"):
        MATRIX["amqp091"].reason("telepathy")


def test_docs_show_the_matrix_as_it_is() -> None:
    assert drivers_matrix.documented() == drivers_matrix.render(), \
        "docs/drivers.md is out of date: run `python -m tests.drivers_matrix --write`"
