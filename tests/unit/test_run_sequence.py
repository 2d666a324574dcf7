"""The one run sequence (rbench.coordinator.sequence): every command that runs a workload goes through it.

A fixed metrics_port that is taken is the sequence's first check, before any broker or JVM: each
command refusing it with the same line shows the command calls the sequence rather than a copy.
"""
from __future__ import annotations

import contextlib
import io
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from rbench.cli import main
from rbench.coordinator.sequence import RunOutcome


@pytest.fixture()
def taken_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.mark.parametrize("command", [["run"], ["amqp10"], ["nightly", "--history", "HISTORY"]])
def test_every_command_that_runs_a_workload_checks_its_fixed_ports_first(command: list[str], taken_port: int,
                                                                         tmp_path: Path) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps({"name": "t", "clusters": [{"name": "a", "uris": ["amqp://127.0.0.1:1/"]}],
                                    "duration": 5, "tasks": 1, "metrics_port": taken_port}))
    argv = [command[0], str(workload), *[str(tmp_path / "h") if a == "HISTORY" else a for a in command[1:]],
            "--master", "local[1]"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    assert code == 2, err.getvalue()
    assert err.getvalue().startswith(f"rbench {command[0]}: metrics_port: port {taken_port} is already in use"), err.getvalue()


def test_exit_codes_of_an_outcome() -> None:
    here = Path("r")
    assert RunOutcome(here, "complete", measured=True).exit_code == 0
    assert RunOutcome(here, "interrupted", measured=True).exit_code == 3            # a cut run is still measured
    assert RunOutcome(here, "interrupted", measured=False).exit_code == 130
    assert RunOutcome(here, "complete", measured=False).exit_code == 3
    assert RunOutcome(here, "interrupted", measured=True, searched=True).exit_code == 130
    assert RunOutcome(here, "complete", measured=True, searched=True).exit_code == 0
    assert RunOutcome(here, "complete", measured=True).problem is None
    assert "nothing was measured" in str(RunOutcome(here, "interrupted", measured=False).problem)
    assert str(RunOutcome(here, "interrupted", True, searched=True).problem).startswith("rate search interrupted")
