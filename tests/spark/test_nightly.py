"""`rbench nightly` (what the chart's job runs): run, reduce, history, regress, upload, in one process.

Upload targets tested here: a local directory through a file:// URI, and pyarrow's in-memory
mock:// filesystem (a non-local pyarrow filesystem, read back in-process). Object stores proper
(s3://, gs://, abfs://) go through the same pyarrow.fs.copy_files call but are not reachable here.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from rbench.cli import main
from tests.runhelpers import workload_dict


def test_nightly_runs_reduces_files_and_uploads(spark: Any, amqp_url: str, unique_name: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps(workload_dict(amqp_url, unique_name, rate=200, duration=2, exchange={"name": ""})))
    history, store = tmp_path / "history", tmp_path / "store"
    status = main(["nightly", str(workload), "--out", str(tmp_path / "runs"), "--history", str(history), "--quiet",
                   "--regress", "--commit", "cafe123", "--upload", store.as_uri()])
    out = capsys.readouterr().out
    assert status == 0, out[-2000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    steps = [line for line in out.splitlines() if line.startswith("nightly step")]
    assert [s.split(":")[0] for s in steps] == [f"nightly step {n}" for n in (1, 2, 3, 4, 5)]
    assert (run_dir / "report" / "steps.parquet").exists()
    (filed,) = history.glob("steps/workload=t/date=*/*.parquet")
    assert filed.stem == run_dir.name
    assert pq.read_table(filed).column("commit").to_pylist() == ["cafe123"]
    # the store holds the same files as the run and the history
    for local, copied in ((run_dir, store / "runs" / run_dir.name), (history, store / "history")):
        want = sorted(str(p.relative_to(local)) for p in local.rglob("*") if p.is_file())
        assert want and sorted(str(p.relative_to(copied)) for p in copied.rglob("*") if p.is_file()) == want


def test_upload_to_a_non_local_pyarrow_filesystem(tmp_path: Path) -> None:
    """pyarrow's in-memory filesystem stands for an object store: same copy path, read back here."""
    from rbench.nightly.upload import copy_dirs, filesystem_for

    run = tmp_path / "run-1"
    (run / "report").mkdir(parents=True)
    (run / "report" / "steps.csv").write_text("step,rate\n0,100\n")
    (run / "run.json").write_text("{}")
    fs, root = filesystem_for("mock:///bucket/rbench")       # the URI form resolves to pyarrow's mock store
    assert not isinstance(fs, pafs.LocalFileSystem) and root == "bucket/rbench"
    (done,) = copy_dirs({"runs/run-1": run}, fs, root, "mock:///bucket/rbench")
    assert done.files == 2 and done.destination == "mock:///bucket/rbench/runs/run-1"
    infos = fs.get_file_info(pafs.FileSelector("bucket/rbench", recursive=True))
    files = {i.path: i.size for i in infos if i.type == pafs.FileType.File}
    assert files == {"bucket/rbench/runs/run-1/run.json": 2, "bucket/rbench/runs/run-1/report/steps.csv": 16}
    with fs.open_input_stream("bucket/rbench/runs/run-1/report/steps.csv") as f:
        assert f.read() == b"step,rate\n0,100\n"


def test_bad_upload_uri_fails_before_any_load(tmp_path: Path, capsys: pytest.CaptureFixture[str], amqp_url: str) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps(workload_dict(amqp_url, "never-declared")))
    status = main(["nightly", str(workload), "--history", str(tmp_path / "h"), "--upload", "nosuch://user:pw@bucket/x"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("rbench nightly: --upload: nosuch://user:***@bucket/x is not a filesystem URI")
    assert "pw@" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "h").exists() and not (tmp_path / "results").exists()
