"""A real Prometheus server (Debian's `prometheus` package) as a child process, for tests.

Started on a free loopback port with a temporary config and storage, stopped with the test:
never the system service. `make test` installs the package (scripts/ensure-prometheus.sh).
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


class Prometheus:
    """prometheus --config.file=<tmp> --storage.tsdb.path=<tmp> on 127.0.0.1:<free port>."""

    def __init__(self, workdir: Path, scrape: dict[str, list[str]], interval: str = "1s") -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus is not installed: run `make prometheus` (scripts/ensure-prometheus.sh)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        jobs = "".join(f"  - job_name: {name}\n    honor_labels: true\n    static_configs:\n      - targets: {json.dumps(targets)}\n"
                       for name, targets in scrape.items())
        config = workdir / "prometheus.yml"
        config.write_text(f"global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\nscrape_configs:\n{jobs}")
        self.log = (workdir / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_http(f"{self.url}/-/ready")
        except OSError:
            self.stop()
            raise

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def targets_up(self) -> dict[str, str]:
        with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=10) as r:
            body = json.loads(r.read())
        return {t["scrapeUrl"]: t["health"] for t in body["data"]["activeTargets"]}

    def wait_scraped(self, url: str, timeout: float = 60.0) -> None:
        """Until the target at ``url`` has been scraped successfully once (its health is "up")."""
        deadline = time.monotonic() + timeout
        while (health := self.targets_up().get(url)) != "up":
            if time.monotonic() > deadline:
                raise TimeoutError(f"prometheus: {url} not scraped within {timeout:.0f} s (health {health!r})")
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()
