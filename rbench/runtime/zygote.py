"""A Python worker daemon started with the command, warm by the time Spark asks for its daemon (local masters).

Spark starts its Python daemon (``spark.python.daemon.module``, rbench.runtime.daemon) when the first
stage's first task needs a worker: after the JVM, the SparkContext and the stage's submission. That
daemon then imports pyspark and the runtime (uvloop, pyarrow, numpy, the codecs, the drivers) and takes
pyarrow's lazy set-up, a second or more on the path to the first message. The zygote does the same
work at the command's start, beside the JVM's, and waits. When Spark launches the daemon, the launched
process (``hand_over``) gives the zygote its stdin, stdout and stderr (the pipes to the JVM, passed over
a Unix socket), its arguments, environment, working directory and module path, and the zygote becomes
the daemon on them (pyspark's ``manager``). The launched process stays as a stand-in for Spark's
process handle: it ends when the zygote ends, and passes a SIGTERM on.

It is used once, by the first daemon of the JVM rbench started (which waits for it if it is still
importing: it is ahead of a fresh start all the same); any other (a second daemon, a JVM that
spark-submit started, a daemon whose interpreter or import-time settings differ from the zygote's) gets
the ordinary start: the handshake declines, never fails. On a cluster
the executors start their own daemons and none of this applies.
"""
from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

ENV = "RBENCH_ZYGOTE"            # the socket path, in the JVM's environment and so in its daemon's
# settings read when pyspark or the runtime is imported (or by the interpreter at its start): a daemon whose
# values differ cannot use a zygote that imported them already
IMPORT_TIME_ENV = ("PYTHONHASHSEED", "PYSPARK_ENABLE_NAMEDTUPLE_PATCH", "SPARK_TESTING")
_HEADER = struct.Struct("!I")
_REPLY_TIMEOUT_S = 120.0          # a zygote still importing on a loaded machine is still ahead of a fresh start


# ---- the coordinator's side -------------------------------------------------------------------------

class Zygote:
    """The pre-started daemon process, seen from the coordinator: where its socket is and when it got there."""

    def __init__(self, proc: subprocess.Popen[bytes], path: str, mark: Callable[[str, float], None]) -> None:
        import threading

        self.proc, self.path = proc, path
        self._mark = mark
        self._reader = threading.Thread(target=self._read, name="rbench-zygote", daemon=True)

    def watch(self) -> None:
        """Start noting its instants (a thread: started after the JVM's launch, whose preexec_fn wants none)."""
        self._reader.start()

    @classmethod
    def start(cls, log_fd: int | None, mark: Callable[[str, float], None]) -> Zygote | None:
        """Start one; None when it cannot be (it is an optimisation: the daemon then starts as Spark's own).
        ``mark(what, wall_s)`` is told when it is ready and when Spark's daemon handed over to it."""
        import subprocess
        import tempfile

        try:
            folder = tempfile.mkdtemp(prefix="rbench-zygote-")           # 0700: only this user can connect
            path = os.path.join(folder, "daemon.sock")
            # what SparkContext gives its workers (pyspark.core.context), so string hashes agree across them
            env = {**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")}
            env.pop(ENV, None)
            proc = subprocess.Popen([sys.executable, "-m", "rbench.runtime.daemon", "--zygote", path],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=log_fd,        # None: the terminal's (RBENCH_SPARK_LOG=verbose)

                                    env=env, process_group=0)   # its own group: the terminal's Ctrl-C is the coordinator's
        except OSError:
            return None
        return cls(proc, path, mark)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        labels = {"ready": "Python daemon ready (pre-started beside the JVM: runtime imported)",
                  "launched": "Spark launched its Python daemon (the process started)",
                  "handed": "Spark's daemon handed its pipes to the pre-started one"}
        with self.proc.stdout:             # until it exits, or hands over (its stdout is then Spark's pipe)
            for line in self.proc.stdout:
                what, _, at = line.decode(errors="replace").strip().partition(" ")
                with contextlib.suppress(ValueError):
                    if what in labels:
                        self._mark(labels[what], float(at))

    def close(self) -> None:
        """Not needed after all (the run ended before Spark): an unused zygote exits when its stdin closes;
        one that became Spark's daemon is the JVM's from then on and is not touched."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()


# ---- the zygote's side -----------------------------------------------------------------------------

def serve(path: str, warm: Callable[[], None], become: Callable[[], None]) -> None:
    """Listen on ``path``, ``warm`` up, and wait for Spark's daemon; then ``become`` it (pyspark's manager, on
    the pipes taken over). Returns without becoming it when the coordinator goes away first (stdin closes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    try:
        warm()
        _say("ready")
        while True:
            ready, _, _ = select.select([0, listener.fileno()], [], [])
            if 0 in ready and not os.read(0, 4096):
                return                                       # the coordinator ended: nobody will ask
            if listener.fileno() in ready:
                conn, _ = listener.accept()
                with conn:
                    if _take_over(conn):
                        break
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
            os.rmdir(os.path.dirname(path))
    become()


def _say(what: str, at: float | None = None) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.write(f"{what} {time.time() if at is None else at:.6f}\n")
        sys.stdout.flush()


def _take_over(conn: socket.socket) -> bool:
    """Read a launched daemon's request; take its pipes and settings if they suit this process."""
    conn.settimeout(10.0)
    fds: list[int] = []
    try:
        header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
        if len(header) != _HEADER.size or len(fds) != 3:
            return False
        want = _HEADER.unpack(header)[0]
        body = b""
        while len(body) < want:
            chunk = conn.recv(want - len(body))
            if not chunk:
                return False
            body += chunk
        request = json.loads(body)
        env: dict[str, str] = request["env"]
        if request["executable"] != sys.executable or any(env.get(k) != os.environ.get(k) for k in IMPORT_TIME_ENV):
            conn.sendall(b"no")
            return False
        os.chdir(request["cwd"])                     # the one step that can fail: before any that cannot be undone
        if isinstance(request.get("started"), float):
            _say("launched", request["started"])
        _say("handed")
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = list(request["argv"])
        sys.path[:] = list(request["path"])
        conn.sendall(f"ok {os.getpid()}".encode())
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


# ---- the daemon Spark launched -----------------------------------------------------------------------

def hand_over() -> bool:
    """Give this process's pipes to the zygote named in the environment and wait for it to end; True if it took
    them. False (nothing taken: start the daemon here) without a zygote, or when it declines or does not answer."""
    path = os.environ.get(ENV)
    if not path:
        return False
    pid = _request(path)
    if pid is None:
        return False
    signal.signal(signal.SIGTERM, lambda *_: _forward(pid))
    _wait_for(pid)
    return True


def _request(path: str) -> int | None:
    from rbench.proctime import process_started

    request = {"started": process_started(), "executable": sys.executable, "env": dict(os.environ), "argv": sys.argv, "path": sys.path,
               "cwd": os.getcwd()}
    body = json.dumps(request).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(_REPLY_TIMEOUT_S)
            sock.connect(path)
            socket.send_fds(sock, [_HEADER.pack(len(body))], [0, 1, 2])
            sock.sendall(body)
            reply = sock.recv(64).decode(errors="replace").split()
    except OSError:
        return None
    if len(reply) != 2 or reply[0] != "ok" or not reply[1].isdigit():
        return None
    return int(reply[1])


def _forward(pid: int) -> None:
    """Spark stops its daemon with SIGTERM (and by closing its stdin): the zygote is that daemon now."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    os._exit(0)


def _wait_for(pid: int) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        while _alive(pid):
            time.sleep(0.5)
        return
    with contextlib.suppress(InterruptedError):
        select.select([pidfd], [], [])
    os.close(pidfd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True

