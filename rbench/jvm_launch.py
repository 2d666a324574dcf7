"""The driver JVM launched before pyspark is imported, so the two overlap.

pyspark starts the JVM from ``launch_gateway``, and importing pyspark at all imports pyspark.sql
(half a second on an idle 2-core machine, more under load): the JVM could only start after it. Here
the JVM is launched the way ``launch_gateway`` launches it (``spark-submit`` with the conf as
``--conf`` pairs and PYSPARK_SUBMIT_ARGS, stdin a pipe so it ends with this process, SIGINT ignored,
the gateway's port and secret written to the file named by ``_PYSPARK_DRIVER_CONN_INFO_PATH``), with
no pyspark module imported; the coordinator imports pyspark while it starts. pyspark's own code then
connects to it (``address`` gives the port and secret; rbench.spark hands them to ``launch_gateway``
as for a JVM that spark-submit started), so the py4j connection and the classes it imports stay
pyspark's.
"""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from importlib.util import find_spec

from rbench.errors import RbenchError


def spark_home() -> str:
    """SPARK_HOME, else the pip-installed pyspark's folder (it holds bin/ and jars/), found without importing it."""
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    spec = find_spec("pyspark")
    if spec is not None and spec.origin is not None:
        home = os.path.dirname(os.path.realpath(spec.origin))
        if os.path.isfile(os.path.join(home, "bin", "spark-submit")) and os.path.isdir(os.path.join(home, "jars")):
            return home
    from pyspark.find_spark_home import _find_spark_home  # its other places (a source checkout, a distribution)

    return str(_find_spark_home())


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # the terminal's Ctrl-C is the coordinator's to handle


class JvmLaunch:
    """One driver JVM being started: its process, and the file where it will write how to reach it."""

    def __init__(self, options: dict[str, str], log_fd: int | None, log_name: str) -> None:
        """``log_fd``: the JVM's stdout and stderr (None: this process's), ``log_name`` where a reader finds them."""
        self._log_name = log_name
        self.listening_at: float | None = None      # wall-clock s the JVM's gateway listened, once known
        command = [os.path.join(spark_home(), "bin", "spark-submit")]
        for key, value in options.items():
            command += ["--conf", f"{key}={value}"]
        command += shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell"))
        self._folder = tempfile.mkdtemp(prefix="rbench-jvm-")
        self._info = os.path.join(self._folder, "gateway")
        env = {**os.environ, "SPARK_CONNECT_MODE": "0", "_PYSPARK_DRIVER_CONN_INFO_PATH": self._info}
        output = {"stdout": log_fd, "stderr": log_fd} if log_fd is not None else {}
        try:
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, env=env, preexec_fn=_ignore_sigint,
                                         **output)   # type: ignore[call-overload]
        except OSError:
            shutil.rmtree(self._folder, ignore_errors=True)
            raise

    def address(self) -> tuple[int, str]:
        """The gateway's port and secret, once the JVM has written them (RbenchError if it exited first)."""
        try:
            while self.proc.poll() is None and not os.path.isfile(self._info):
                time.sleep(0.05)
            if not os.path.isfile(self._info):
                raise RbenchError(f"the Spark JVM exited before it started (exit code {self.proc.returncode}); "
                                  f"its output: {self._log_name}")
            with open(self._info, "rb") as f:
                port, size = struct.unpack("!ii", f.read(8))
                secret = f.read(size).decode()
                self.listening_at = os.fstat(f.fileno()).st_mtime     # when the JVM wrote it: its gateway was up
            return port, secret
        finally:
            shutil.rmtree(self._folder, ignore_errors=True)

    def stop(self) -> None:
        """Not needed (the start failed before it connected): close its stdin, which ends it."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()

