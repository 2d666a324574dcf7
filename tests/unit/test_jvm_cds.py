"""The driver JVM's class-data archive (rbench.jvm_cds): which options a JVM gets, and when a partial archive
a first run's JVM wrote is moved in place; and the process start --timings counts from (rbench.proctime)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rbench import jvm_cds
from rbench.proctime import process_started


@pytest.fixture
def spark_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(jvm_cds.OFF_ENV, raising=False)
    return str(home)


def test_a_first_run_writes_the_archive_under_its_own_name_and_the_reduce_does_not(spark_home: str) -> None:
    assert jvm_cds.java_options(spark_home, write=False) == ""
    option = jvm_cds.java_options(spark_home, write=True)
    archive = jvm_cds.archive_path(spark_home)
    assert option == f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}.part"
    assert archive.parent == jvm_cds.cache_dir() and archive.parent.is_dir()


def test_an_archive_is_mapped_and_switching_off_leaves_the_options_alone(spark_home: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    archive = jvm_cds.archive_path(spark_home)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"x")
    assert jvm_cds.java_options(spark_home, write=False) == f"-XX:SharedArchiveFile={archive}"
    monkeypatch.setenv(jvm_cds.OFF_ENV, "off")
    assert jvm_cds.java_options(spark_home, write=True) == ""


def test_another_spark_is_another_archive(spark_home: str, tmp_path: Path) -> None:
    other = tmp_path / "spark2"
    (other / "jars").mkdir(parents=True)
    assert jvm_cds.archive_path(spark_home) != jvm_cds.archive_path(str(other))


def _partial(spark_home: str, pid: int, jvm: int | None) -> Path:
    archive = jvm_cds.archive_path(spark_home)
    archive.parent.mkdir(parents=True, exist_ok=True)
    part = archive.with_name(f"{archive.name}.{pid}.part")
    part.write_bytes(b"archive")
    if jvm is not None:
        part.with_name(part.name + ".jvm").write_text(f"{jvm}\n")
    return part


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_partial_archive_whose_jvm_has_exited_is_moved_in_place(spark_home: str) -> None:
    part = _partial(spark_home, _dead_pid(), jvm=_dead_pid())
    archive = jvm_cds.archive_path(spark_home)
    assert jvm_cds.java_options(spark_home, write=False) == f"-XX:SharedArchiveFile={archive}"
    assert archive.read_bytes() == b"archive"
    assert list(archive.parent.iterdir()) == [archive] and not part.exists()


def test_a_second_finished_archive_beside_one_in_place_is_removed(spark_home: str) -> None:
    """Two first runs overlapped (the second started while the first's JVM still wrote): both wrote an archive."""
    archive = jvm_cds.archive_path(spark_home)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"first")
    part = _partial(spark_home, _dead_pid(), jvm=_dead_pid())
    assert jvm_cds.java_options(spark_home, write=True) == f"-XX:SharedArchiveFile={archive}"
    assert archive.read_bytes() == b"first" and list(archive.parent.iterdir()) == [archive] and not part.exists()


def test_a_partial_archive_still_being_written_is_left_alone(spark_home: str) -> None:
    part = jvm_cds.archive_path(spark_home).with_name(f"{jvm_cds.archive_path(spark_home).name}.1.part")
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", str(part)])
    deadline = time.monotonic() + 10
    while str(part).encode() not in Path(f"/proc/{writer.pid}/cmdline").read_bytes():   # exec'd: a loaded machine
        assert time.monotonic() < deadline                                                  # forks late
        time.sleep(0.01)
    try:
        _partial(spark_home, 1, jvm=writer.pid)
        assert jvm_cds.java_options(spark_home, write=False) == ""
        assert part.exists() and not jvm_cds.archive_path(spark_home).exists()
    finally:
        writer.kill()
        writer.wait()
    assert jvm_cds.java_options(spark_home, write=False).startswith("-XX:SharedArchiveFile=")


def test_a_partial_archive_of_a_run_that_ended_before_its_context_is_removed(spark_home: str) -> None:
    part = _partial(spark_home, _dead_pid(), jvm=None)
    assert jvm_cds.java_options(spark_home, write=False) == ""
    assert not part.exists() and not jvm_cds.archive_path(spark_home).exists()


def test_the_process_start_is_before_now_and_after_the_parent_launched_it() -> None:
    launched = time.time()
    out = subprocess.run([sys.executable, "-c", "from rbench.proctime import process_started; print(process_started())"],
                         capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    started = float(out.stdout)
    assert launched - 0.05 <= started <= time.time()         # a tick (10 ms) of the kernel's clock either side
    mine = process_started()
    assert mine is not None and mine <= launched


def test_a_runs_driver_jvm_compiles_with_c1_unless_told_and_a_reduces_keeps_every_tier(
        spark_home: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from rbench import spark

    def java(for_run: bool) -> list[str]:
        return spark.session_options("local[2]", "t", None, for_run=for_run)["spark.driver.extraJavaOptions"].split()

    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv(spark.FULL_JIT_ENV, raising=False)
    monkeypatch.setenv("SPARK_HOME", spark_home)
    assert spark.QUICK_JIT in java(for_run=True)
    assert spark.QUICK_JIT not in java(for_run=False)        # a reduce's passes run for minutes: C2 pays there
    monkeypatch.setenv(spark.FULL_JIT_ENV, "1")
    assert spark.QUICK_JIT not in java(for_run=True)
