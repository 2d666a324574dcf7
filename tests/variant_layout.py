"""scripts/variant.sh's layout as its `info` command prints it: the one place tests read a variant's ports."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "variant.sh"


@dataclass(frozen=True)
class VariantLayout:
    name: str
    slot: int
    node: str
    ports: dict[str, int]           # amqp, stream, management, prometheus, dist

    @property
    def amqp_url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.ports['amqp']}/"

    @property
    def management_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['management']}/api"

    @property
    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['prometheus']}/metrics"


def run_script(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def layouts(*names: str, env: dict[str, str] | None = None) -> dict[str, VariantLayout]:
    out = run_script("info", *names, env=env)
    assert out.returncode == 0, out.stderr
    found = {}
    for line in out.stdout.splitlines():
        name, *words = line.split()
        kv = dict(w.split("=", 1) for w in words)
        found[name] = VariantLayout(name=name, slot=int(kv["slot"]), node=kv["node"],
                                    ports={k: int(kv[k]) for k in ("amqp", "stream", "management", "prometheus", "dist")})
    return found
