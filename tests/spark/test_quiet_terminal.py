"""The terminal shows rbench's lines only: the JVM's banner, the launcher's lines and Spark's warnings go
to the JVM's log file (rbench.spark.jvm_log_path), for a real CLI command in its own process (its own
JVM: the shared test session would hide what a fresh JVM prints while it starts)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runhelpers import delete_queues

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]

# what a JVM, Spark's launcher, log4j, py4j or the class-data archive print when left on the terminal
NOISE = ("Setting default log level", "To adjust logging level", "NativeCodeLoader", "Using Spark's default log4j",
         "WARN Utils", "resolves to a loopback", "Using incubator modules", "WARNING:", "SLF4J", "log4j", "py4j.", "Py4J",
         "[warning]", "[Stage ", "Traceback", "WARN ", "INFO ")


def noise(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(n in line for n in NOISE)]


def test_noise_finds_the_jvm_lines() -> None:
    banner = ('WARNING: Using incubator modules: jdk.incubator.vector\nSetting default log level to "WARN".\n'
              "26/11/27 19:12:05 WARN NativeCodeLoader: Unable to load native-hadoop library\n")
    assert len(noise(banner)) == 3
    assert noise("rbench: run 20261127T190854Z-perftest-5890 → /tmp/x\n") == []


def test_perftest_prints_no_jvm_or_spark_lines_on_stderr(amqp_url: str, unique_name: str, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "rbench.cli", "perftest", "-h", amqp_url, "-u", unique_name, "-x", "1", "-y", "1",
           "-r", "100", "-z", "2", "--out", str(tmp_path), "--master", "local[2]", "--quiet", "--timings"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("RBENCH_SPARK_LOG", None)
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    finally:
        delete_queues(amqp_url, [unique_name])
    assert done.returncode == 0, done.stderr[-2000:]
    assert noise(done.stderr) == [], done.stderr[-2000:]
    assert noise(done.stdout) == [], done.stdout[-2000:]
    assert all(line.startswith("rbench") for line in done.stderr.splitlines()), done.stderr[-2000:]
    # the run got as far as its summary, and --timings shows the start-up's stages
    assert "where the time went" in done.stdout and "JVM started" in done.stdout
    assert "worker process started" in done.stdout and "load started (t0" in done.stdout
    # the daemon Spark launched gave its pipes to the one pre-started beside the JVM (rbench.runtime.zygote)
    assert "Python daemon ready (pre-started" in done.stdout, done.stdout[-2000:]
    assert "handed its pipes to the pre-started one" in done.stdout, done.stdout[-2000:]
