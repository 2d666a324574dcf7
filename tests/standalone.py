"""A Spark standalone cluster on this machine for the tests (scripts/spark-standalone.sh), spark-submit's environment,
and waiting on a run in a subprocess."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "spark-standalone.sh"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


def spark_submit_env() -> dict[str, str]:
    """The environment for spark-submit of jobs/*.py with this venv's Python on the driver and the executors."""
    venv_bin = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}", "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


@contextmanager
def standalone_cluster(port: str, cores: str, **env: str) -> Iterator[str]:
    """spark://127.0.0.1:PORT (a master and one worker with CORES task slots) for the block; stopped after it,
    also after a failed start (the JVMs may come up late) or a failed test."""
    full_env = {**os.environ, "PYTHON": sys.executable, **env}
    try:
        started = subprocess.run(["bash", str(SCRIPT), "start", port, cores], capture_output=True, text=True,
                                 env=full_env, timeout=240)
        assert started.returncode == 0, started.stderr
        yield started.stdout.strip()
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", port], capture_output=True, env=full_env, timeout=60)


def wait_for(what: str, find: Callable[[], T | None], proc: subprocess.Popen[str], timeout_s: float) -> T:
    """What ``find`` returns once it is truthy; the test fails when ``proc`` (a run in a subprocess) ends first
    (with the end of its output) or nothing is found within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = find()
        if found:
            return found
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the run ended (exit {proc.returncode}) before {what}: {(out or '')[-1500:]}\n"
                        f"{(err or '')[-3000:]}")
        time.sleep(0.1)
    pytest.fail(f"no {what} within {timeout_s:.0f} s")
