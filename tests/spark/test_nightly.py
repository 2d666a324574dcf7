"""`rbench nightly` (what the chart's job runs): run, reduce, history, regress, upload, in one process.

Upload targets tested here: a local directory through a file:// URI; s3:// against an
S3-compatible server on loopback (moto's server, in the test extra), through pyarrow's own S3
client; and pyarrow's in-memory mock:// filesystem. gs://, abfs:// and hdfs:// go through the
same pyarrow.fs.copy_files call but no such store is reachable here.
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from rbench.cli import main
from rbench.history.regress import EXIT_NOT_ENOUGH_HISTORY
from tests.runhelpers import workload_dict


def test_nightly_runs_reduces_files_and_uploads(spark: Any, amqp_url: str, unique_name: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps(workload_dict(amqp_url, unique_name, rate=200, duration=2, exchange={"name": ""})))
    history, store = tmp_path / "history", tmp_path / "store"
    status = main(["nightly", str(workload), "--out", str(tmp_path / "runs"), "--history", str(history), "--quiet",
                   "--regress", "--commit", "cafe123", "--upload", store.as_uri()])
    out = capsys.readouterr().out
    # the first night: every step ran and was filed and uploaded, and regress says it cannot judge yet (exit 4)
    assert status == EXIT_NOT_ENOUGH_HISTORY, out[-2000:]
    assert "Not enough history: 7 of 7 series have 1 night(s)" in out and "No regression" not in out
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


def test_nightly_on_a_rate_search_files_the_searchs_answer(spark: Any, amqp_url: str, unique_name: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A `rate_search:` workload searches under `rbench nightly` as under `rbench run` (search.json, one reduce
    over the probes), and the history's row per cluster carries the search's answer."""
    # 6 ms per message, one at a time: the consumer cannot take 200 msg/s, 100 msg/s is easy; two 2 s probes
    w = workload_dict(amqp_url, unique_name, driver="amqp091", producers=1, consumers=1, rate=None, duration=None,
                      queues={"pattern": f"{unique_name}-%d", "from": 1, "to": 1, "durable": False, "auto_delete": False},
                      consumer={"prefetch": 1, "multi_ack_every": 1, "processing_delay": "6ms"},
                      rate_search={"start": 100, "max": 200, "step": 2, "max_probes": 2,
                                   "slo": {"p99": "1s", "consume_ratio": 0.95}})
    workload = tmp_path / "w.yaml"
    workload.write_text(json.dumps(w))
    history = tmp_path / "history"
    status = main(["nightly", str(workload), "--out", str(tmp_path / "runs"), "--history", str(history), "--quiet",
                   "--master", "local[2]", "--commit", "beef456"])
    out = capsys.readouterr().out
    assert status == 0, out[-2000:]
    (folder,) = (tmp_path / "runs").iterdir()
    assert folder.name.endswith("-search")
    (cluster,) = json.loads((folder / "search.json").read_text())["clusters"]
    assert (folder / "report" / "steps.parquet").exists() and "rate search (" in out
    # the answer as this machine gave it (100 msg/s unless its load made the generator the limit)
    probes, answer = cluster["probes"], cluster["highest_pass"]
    best = next((p for p in probes if p["passed"] and p["target"] == answer), probes[0])
    (filed,) = history.glob("steps/workload=t/date=*/*.parquet")
    assert filed.stem == folder.name
    (row,) = pq.read_table(filed).to_pylist()
    assert row["highest_met_rate"] == (answer or 0.0) and row["first_failed_rate"] == cluster["first_fail"]
    assert row["search_probes"] == len(probes) and row["probe_run_id"] == best["run_id"]
    assert row["target_rate"] == best["target"] and row["commit"] == "beef456" and row["run_status"] == "complete"
    (verdict,) = pq.read_table(next(history.glob("leaderboard/workload=t/date=*/*.parquet"))).to_pylist()
    assert verdict["board"] == "verdict" and verdict["highest_met"] == answer


def test_nightly_refuses_a_taken_metrics_port_before_any_load(tmp_path: Path, amqp_url: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        workload = tmp_path / "w.yaml"
        workload.write_text(json.dumps(workload_dict(amqp_url, "never-declared", metrics_port=port, tasks=1)))
        status = main(["nightly", str(workload), "--out", str(tmp_path / "runs"), "--history", str(tmp_path / "h"),
                       "--master", "local[2]"])
    err = capsys.readouterr().err
    assert status == 2 and f"metrics_port: port {port} is already in use on this host" in err, err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "h").exists()


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
    assert err.startswith("rbench nightly: --upload: nosuch://***@bucket/x is not a filesystem URI") and "pw" not in err
    assert "pw@" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "h").exists() and not (tmp_path / "results").exists()


@pytest.fixture()
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An S3-compatible server on 127.0.0.1 (moto_server); yields its host:port."""
    exe = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    if not Path(exe).exists():
        pytest.skip("moto_server (pip install 'moto[server]', in the test extra) is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "moto_server did not start"
                time.sleep(0.2)
        for key, value in {"AWS_ACCESS_KEY_ID": "rbench-test", "AWS_SECRET_ACCESS_KEY": "s3-secret-value",
                           "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(key, value)            # how the chart's objectStore Secret reaches the driver
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_upload_to_s3(s3_server: str, tmp_path: Path) -> None:
    from rbench.nightly.upload import upload_dirs

    fs = pafs.S3FileSystem(endpoint_override=s3_server, scheme="http", region="us-east-1", allow_bucket_creation=True)
    fs.create_dir("capacity")
    run = tmp_path / "run-7"
    (run / "published" / "c1").mkdir(parents=True)
    (run / "published" / "c1" / "part-0.parquet").write_bytes(b"PAR1" + bytes(range(256)) + b"PAR1")
    (run / "run.json").write_text('{"status": "complete"}')
    uri = f"s3://capacity/rbench?endpoint_override={s3_server}&scheme=http&region=us-east-1"
    (done,) = upload_dirs({"runs/run-7": run}, uri)
    assert done.files == 2
    got = {i.path: i.size for i in fs.get_file_info(pafs.FileSelector("capacity/rbench", recursive=True)) if i.type == pafs.FileType.File}
    assert got == {"capacity/rbench/runs/run-7/run.json": 22, "capacity/rbench/runs/run-7/published/c1/part-0.parquet": 264}
    with fs.open_input_stream("capacity/rbench/runs/run-7/published/c1/part-0.parquet") as f:
        assert f.read() == (run / "published" / "c1" / "part-0.parquet").read_bytes()


def test_upload_to_a_missing_bucket_is_one_line(s3_server: str, tmp_path: Path) -> None:
    from rbench.errors import SinkError
    from rbench.nightly.upload import upload_dirs

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "run.json").write_text("{}")
    with pytest.raises(SinkError) as caught:
        upload_dirs({"runs/r": tmp_path / "r"}, f"s3://no-such-bucket/x?endpoint_override={s3_server}&scheme=http")
    text = str(caught.value)
    assert text.startswith("--upload: copying") and "no-such-bucket" in text and "\n" not in text
    assert "s3-secret-value" not in text
