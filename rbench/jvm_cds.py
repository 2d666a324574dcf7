"""Class-data sharing for the driver JVM rbench starts: Spark's classes mapped from one archive file.

Most of the driver JVM's start-up (`spark-submit`, then the SparkContext) is loading and verifying
some ten thousand classes from Spark's 280 jars, one by one. The JVM can write the classes a run
loaded into an archive as it exits (``-XX:ArchiveClassesAtExit``, JDK 13+) and map that archive at
its next start (``-XX:SharedArchiveFile``): on this 2-core machine that halved the time to a ready
SparkContext (docs/timing.md). The first run on a machine writes the archive (its exit waits a few
seconds for the JVM to write it); every later run uses it. The JVM checks the archive against its own
build and the classpath and runs without it when they differ (-Xshare:auto, the default), so a stale
archive costs speed, never a failure; the file name carries the JVM's and Spark's identity, so an
upgrade writes a new one. RBENCH_JVM_CDS=off leaves the JVM's options alone.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path

OFF_ENV = "RBENCH_JVM_CDS"
WRITE_OPTION = "-XX:ArchiveClassesAtExit"


def cache_dir() -> Path:
    """Where the archive lives: $XDG_CACHE_HOME/rbench or ~/.cache/rbench."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rbench"


def _identity(spark_home: str) -> str:
    """Which JVM and which Spark jars the archive is for: the java binary and the jars folder, with their times."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else (shutil.which("java") or "java")
    parts = []
    for path in (os.path.realpath(java), os.path.join(spark_home, "jars")):
        with contextlib.suppress(OSError):
            st = os.stat(path)
            parts.append(f"{path}:{st.st_mtime_ns}:{st.st_size}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path(spark_home: str) -> Path:
    return cache_dir() / f"spark-{_identity(spark_home)}.jsa"


def java_options(spark_home: str, write: bool) -> str:
    """The driver JVM's class-data sharing options ('' when switched off or the cache cannot be written).

    With an archive: map it. Without, and ``write`` (a run's JVM, which loads what a run needs; not the
    reduce's or a test's): write one as this JVM exits, under a name of this process's own, so two
    first runs never share a file; a later run moves it in place once that JVM has exited (``_promote``)."""
    if os.environ.get(OFF_ENV, "").lower() in ("off", "0", "false", "no"):
        return ""
    archive = archive_path(spark_home)
    if _promote(archive) or archive.is_file():
        return f"-XX:SharedArchiveFile={archive}"
    if not write:
        return ""
    try:
        archive.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return ""
    if not os.access(archive.parent, os.W_OK):
        return ""
    return f"{WRITE_OPTION}={_partial(archive)}"


def _partial(archive: Path, pid: int | None = None) -> Path:
    return archive.with_name(f"{archive.name}.{os.getpid() if pid is None else pid}.part")


def _alive(pid: str, part: Path) -> bool:
    """Whether process ``pid`` still runs and is the JVM writing ``part`` (a pid can be reused)."""
    try:
        return str(part).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _promote(archive: Path) -> bool:
    """Move a finished partial archive in place (its JVM has exited) unless one is there; remove the abandoned
    ones and the finished ones not needed (two first runs overlapped: each wrote one). True if moved.

    A partial archive has a ``.jvm`` file beside it, written once its JVM's SparkContext was up, with
    the JVM's pid; without one, the run ended before that and its archive is not worth keeping."""
    moved = False
    for part in sorted(archive.parent.glob(f"{archive.name}.*.part")):
        owner = part.with_name(part.name + ".jvm")
        with contextlib.suppress(OSError, ValueError):
            jvm = owner.read_text().strip() if owner.is_file() else ""
            if jvm and _alive(jvm, part):
                continue                          # still running, or writing the archive as it exits
            python = part.name[len(archive.name) + 1:-len(".part")]
            if not jvm and Path(f"/proc/{python}").exists():
                continue                          # its run is still starting
            if jvm and not moved and not archive.is_file() and part.stat().st_size > 0:
                os.replace(part, archive)
                moved = True
            else:
                part.unlink()
            owner.unlink(missing_ok=True)
    return moved


def keep_at_exit(spark_home: str, jvm_pid: int) -> None:
    """The JVM ``jvm_pid`` writes its archive as it exits: note its pid beside the partial file, so the
    next run knows when it is complete (``_promote``). Nothing waits for it: this process exits at once."""
    archive = archive_path(spark_home)
    with contextlib.suppress(OSError):
        _partial(archive).with_name(_partial(archive).name + ".jvm").write_text(f"{jvm_pid}\n")
