"""Fixtures of the Spark tier beyond the shared local session (tests/conftest.py)."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.standalone import standalone_cluster


@pytest.fixture(scope="session")
def standalone() -> Iterator[str]:
    """A standalone cluster (master + one 2-core worker, port 7178) shared by the tests that need real executors:
    spark-submit, executors in another JVM, a Python worker that can be killed without killing the driver.
    Two task slots, as many as the tests' 2-task stages: a restarted stage waits until both are free."""
    with standalone_cluster("7178", "2") as master:
        yield master
