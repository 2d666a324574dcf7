"""A node lost in the middle of a run, on the real local 3-node cluster (issue 17's end-to-end case).

The clients connect to the node that is killed (rabbit-2 first in the URI list), and the quorum queue
is declared through it, so its leader dies with it: the hardest case for a client, which must
fail over to another node while the queue elects a new leader. The cluster fixture stops the
cluster after the session, also when this test fails.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from rbench.config.load import workload_from_dict
from rbench.coordinator.run import run_workload
from rbench.coordinator.summary import print_summary
from rbench.reduce.job import reduce_runs
from tests.cluster_fixture import LocalCluster
from tests.runhelpers import read, run_json

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.cluster


def test_kill_the_clients_node_at_10s_back_at_20s_nothing_confirmed_is_lost(
        spark: Any, rabbit_cluster: LocalCluster, unique_name: str, tmp_path: Path) -> None:
    spec = yaml.safe_load((ROOT / "conf" / "workloads" / "faults-local.yaml").read_text())
    one, two, three = rabbit_cluster.uris
    spec["clusters"][0]["uris"] = [two, one, three]            # connect (and declare the queue) through rabbit-2
    spec["queues"]["name"] = unique_name
    assert spec["duration"] == "40s" and spec["faults"] == [
        {"at": "10s", "action": "kill", "node": "rabbit-2", "restart_after": "10s"}]
    out = io.StringIO()
    result = run_workload(workload_from_dict(spec), tmp_path, spark, out=out, progress=False)
    printed = out.getvalue()
    assert result.status == "complete", printed

    info = run_json(result.run_dir)
    (fault,) = info["faults"]
    assert fault["ok"] and fault["node"] == "rabbit-2" and fault["t_back_end_ns"] is not None, fault
    assert rabbit_cluster.running_nodes() == sorted(rabbit_cluster.nodes)         # the node is back in the cluster
    reconnects = info["clusters"][0]["reconnects"]
    assert reconnects and all(r["t_back_ns"] is not None and ":5702" not in r["uri"] for r in reconnects), reconnects

    res = reduce_runs([result.run_dir], session=spark)
    (step,) = res.steps
    assert step["lost"] == 0, step                               # confirmed by a quorum queue: never lost
    published = read(result.run_dir, "published")
    outcomes = published["outcome"].to_pylist()
    assert outcomes.count("connection_lost") == sum(r["in_flight"] for r in reconnects)
    keys = list(zip(published["producer"].to_pylist(), published["seq"].to_pylist()))
    assert len(keys) == len(set(keys))                           # nothing in flight at the cut was sent again

    (f,) = res.faults
    # the clients' node died: the first confirm waits for the reconnect and the new queue leader
    assert f["first_confirm_s"] is not None and 0 < f["first_confirm_s"] < 30, f
    assert f["consume_back"] is True and f["consume_back_s"] is not None, f
    assert f["lost"] == 0 and f["reconnect_max_s"] is not None, f
    html = (res.out_dir / "report.html").read_text()
    assert "Faults" in html and (res.out_dir / "faults.csv").is_file()
    summary = io.StringIO()
    print_summary(result.run_dir, res, out=summary)
    line = next(x for x in summary.getvalue().splitlines() if x.startswith("fault 1 kill rabbit-2 at 10.0 s"))
    assert "first confirm after" in line and "consume rate back after" in line and "lost 0" in line
