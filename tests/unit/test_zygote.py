"""The pre-started Python daemon (rbench.runtime.zygote) takes the pipes of the daemon Spark launches, and
declines when it would not behave as that daemon. Spark's side is played here: start the daemon module with
pipes on stdin and stdout, read the port pyspark's daemon writes, close stdin to stop it."""
from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rbench.runtime import zygote

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


class Marks:
    def __init__(self) -> None:
        self.seen: dict[str, float] = {}
        self.event = threading.Event()

    def __call__(self, what: str, at: float) -> None:
        self.seen[what] = at
        self.event.set()

    def wait_for(self, word: str, timeout: float = 60.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((at for what, at in self.seen.items() if word in what), None)
            if found is not None:
                return found
            self.event.wait(0.1)
            self.event.clear()
        raise AssertionError(f"no mark with {word!r}: {self.seen}")


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
    env.update(extra)
    return env


def _spark_launches_the_daemon(path: str, **extra: str) -> subprocess.Popen[bytes]:
    """What Spark's PythonWorkerFactory does: the daemon module with pipes on stdin and stdout."""
    return subprocess.Popen([sys.executable, "-m", "rbench.runtime.daemon", "pyspark.worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env(RBENCH_ZYGOTE=path, **extra),
                            cwd=ROOT)


def _port(daemon: subprocess.Popen[bytes]) -> int:
    assert daemon.stdout is not None
    port: int = struct.unpack("!i", daemon.stdout.read(4))[0]
    return port


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[zygote.Zygote, Marks]]:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    marks = Marks()
    zyg = zygote.Zygote.start(None, marks)
    assert zyg is not None
    zyg.watch()
    marks.wait_for("ready")
    yield zyg, marks
    zyg.close()                                       # an unused one removes its socket and exits
    try:
        zyg.proc.wait(30)
    except subprocess.TimeoutExpired:
        zyg.proc.kill()
        zyg.proc.wait(10)
    time.sleep(0.2)                                   # its reader thread closes the pipe at EOF


def test_the_launched_daemon_hands_its_pipes_to_the_warm_one(started: tuple[zygote.Zygote, Marks]) -> None:
    zyg, marks = started
    daemon = _spark_launches_the_daemon(zyg.path)
    port = _port(daemon)                              # written by the zygote, on the launched daemon's stdout
    marks.wait_for("handed")
    assert marks.wait_for("launched") <= marks.wait_for("handed")
    assert not os.path.exists(zyg.path)               # one use: a second daemon starts on its own
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        pass                                          # the zygote now listens as pyspark's daemon
    assert daemon.poll() is None and zyg.proc.poll() is None
    assert daemon.stdin is not None
    daemon.stdin.close()                              # Spark stops its daemon by closing its stdin
    zyg.proc.wait(30)                                 # the zygote was the daemon: it ends (pyspark's exits 1 here) ...
    assert daemon.wait(30) == 0                       # ... and the stand-in Spark holds ends with it
    assert daemon.stdout is not None
    daemon.stdout.close()


def test_a_daemon_whose_hash_seed_differs_starts_on_its_own(started: tuple[zygote.Zygote, Marks]) -> None:
    zyg, marks = started
    seed = "1" if os.environ.get("PYTHONHASHSEED", "0") != "1" else "2"
    daemon = _spark_launches_the_daemon(zyg.path, PYTHONHASHSEED=seed)
    _port(daemon)                                     # its own manager answered
    assert "handed" not in " ".join(marks.seen)
    assert zyg.proc.poll() is None and os.path.exists(zyg.path)    # still waiting for a daemon that suits it
    assert daemon.stdin is not None
    daemon.stdin.close()
    daemon.wait(30)
    assert daemon.stdout is not None
    daemon.stdout.close()


def test_an_unused_zygote_ends_with_its_coordinator(started: tuple[zygote.Zygote, Marks]) -> None:
    zyg, _ = started
    zyg.close()
    assert zyg.proc.wait(30) == 0
    assert not os.path.exists(zyg.path) and not os.path.exists(os.path.dirname(zyg.path))


def test_without_a_zygote_the_daemon_keeps_its_pipes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(zygote.ENV, raising=False)
    assert not zygote.hand_over()
    monkeypatch.setenv(zygote.ENV, str(tmp_path / "nobody.sock"))
    assert not zygote.hand_over()
