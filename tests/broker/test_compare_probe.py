"""`rbench compare` probes every cluster before round 1: a B that does not answer is one line, and no round
of A runs (nor any folder is made) only to fail when B's turn comes."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import yaml

from rbench.cli import main
from tests.brokers import RABBITMQ_3


def test_a_cluster_that_does_not_answer_stops_the_comparison_before_any_round(tmp_path: Path) -> None:
    RABBITMQ_3.require()
    f = tmp_path / "w.yaml"
    f.write_text(yaml.safe_dump({"name": "w", "duration": 5, "clusters": [
        {"name": "up", "uris": [RABBITMQ_3.amqp_url]}, {"name": "down", "uris": ["amqp://guest:guest@127.0.0.1:1/"]}]}))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["compare", str(f), "--rounds", "2", "--out", str(tmp_path / "out")])
    lines = err.getvalue().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("rbench compare: "), lines
    assert "127.0.0.1:1" in lines[0] and "guest:guest" not in lines[0]
    assert not (tmp_path / "out").exists()
