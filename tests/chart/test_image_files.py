"""The Dockerfile and its entry point, linted (hadolint, shellcheck: both from PyPI, pinned).

No container engine runs here, so the image is never built by the tests: this checks what can
be checked without one, plus that the paths the chart relies on are the ones the image creates.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
ENTRYPOINT = ROOT / "scripts" / "docker-entrypoint.sh"


def _tool(name: str) -> str:
    path = shutil.which(name) or str(Path(__import__("sys").executable).parent / name)
    if not Path(path).exists():
        pytest.skip(f"{name} not installed (pip install -e '.[test]' brings it)")
    return path


def test_dockerfile_passes_hadolint() -> None:
    proc = subprocess.run([_tool("hadolint"), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_entrypoint_passes_shellcheck() -> None:
    proc = subprocess.run([_tool("shellcheck"), "--severity=style", str(ENTRYPOINT)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_image_paths_match_the_chart() -> None:
    """The chart runs /opt/rbench/jobs/nightly.py with /opt/rbench/venv/bin/python and conf/costs.yaml."""
    text = DOCKERFILE.read_text()
    copied = dict(re.findall(r"^COPY (?:--from=\S+ )?(\S+) (\S+)$", text, flags=re.M))
    assert copied["jobs"] == "/opt/rbench/jobs" and (ROOT / "jobs" / "nightly.py").exists()
    assert copied["conf"] == "/opt/rbench/conf" and (ROOT / "conf" / "costs.yaml").exists()
    assert "python -m venv /opt/rbench/venv" in text
    chart = "\n".join(p.read_text() for p in (ROOT / "helm" / "rbench" / "templates").glob("*"))
    for path in ("/opt/rbench/jobs/nightly.py", "/opt/rbench/venv/bin/python", "/opt/rbench/conf/costs.yaml"):
        assert path in chart
    assert re.search(r"FROM python:3\.11", text) and "openjdk-17" in text     # Spark 4 needs Java 17+
