"""`rbench perftest … -o out.csv` through the CLI, the shared local[2] Spark session and the real broker."""
from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rbench.cli import main
from rbench.perftest.lines import PerfTestOutput
from tests.brokers import BROKERS, Broker
from tests.runhelpers import read


@contextlib.contextmanager
def cpu_hogs(n: int) -> Iterator[None]:
    """``n`` processes spinning at full speed (none: a quiet machine) for the block's length."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.mark.parametrize("hogs", [0, 3], ids=["quiet", "saturated"])
def test_perftest_command_writes_perftests_csv_once_per_interval(spark, amqp_url: str, unique_name: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str], hogs: int) -> None:
    """Every published, confirmed and received message is in one CSV row, on a quiet machine and on one whose two
    cores are busy with other work (issue 29: rows summed to 411 of 600 when progress lines arrived late)."""
    csv = tmp_path / "out.csv"
    argv = ["perftest", "-h", amqp_url, "-u", unique_name, "-x", "1", "-y", "1", "-r", "200", "-prsd", "0",
            "-c", "50", "-z", "3", "-o", str(csv), "-mf", "compact", "-d", "csv-test", "-st", "5",
            "--out", str(tmp_path), "--no-reduce", "--master", "local[2]"]
    try:
        with cpu_hogs(hogs):
            assert main(argv) == 0, capsys.readouterr().err
    finally:
        from tests.broker.test_perftest_features import opened, run

        async def delete() -> None:
            d = await opened(amqp_url)
            await d.delete_queues([unique_name])
            await d.aclose()
        run(delete)
    out = capsys.readouterr().out
    assert "-s/--size: bodies below 24 bytes are sent as 24 bytes" in out          # said once per run
    assert out.count("-s/--size:") == 1
    lines = csv.read_text(encoding="utf-8").splitlines()
    fmt = PerfTestOutput("csv-test", producers=True, consumers=True, confirm=True)
    assert lines[0] == fmt.csv_header()
    rows = [ln.split(",") for ln in lines[1:]]
    # -z 3 at -i 1: one row per wall-clock second the 3 s window touches (the first and last are partial), and
    # on a busy machine a row or two more for the counts whose progress lines arrived late (never dropped)
    assert 3 <= len(rows) <= 6, lines
    assert all(len(r) == 17 and r[0] == "csv-test" for r in rows)
    times = [float(r[1]) for r in rows]
    gaps = [b - a for a, b in zip(times, times[1:])]         # whole seconds apart (a late row may skip an empty one)
    assert 0 < times[0] <= 1.0 and all(g == pytest.approx(round(g)) and round(g) >= 1 for g in gaps), times
    published = [float(r[2]) for r in rows]                   # whole msg/s from 10 up, as PerfTest prints them
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir() and (p / "run.json").exists())
    sent = read(run_dir, "published").num_rows
    if not hogs:
        assert sent == pytest.approx(600, abs=30)                # 3 s at 200 msg/s (a saturated machine may send fewer)
    # every published message is in exactly one row (rates are per second, intervals are 1 s; a rate
    # below 10/s prints with a decimal, so allow a message of rounding per row)
    assert sum(published) == pytest.approx(sent, abs=len(rows))
    assert all(r[3] == "" for r in rows)                         # returned: no -f mandatory, as PerfTest leaves it
    assert sum(float(r[4]) for r in rows) == pytest.approx(sent, abs=len(rows))       # confirmed
    assert sum(float(r[6]) for r in rows) == pytest.approx(sent, abs=len(rows))       # received
    busy = [r for r in rows if float(r[6]) >= 10]
    assert busy and all(0 < int(r[7]) <= int(r[8]) <= int(r[11]) for r in busy)     # consumer min ≤ median ≤ p99, µs
    assert all(0 < int(r[12]) <= int(r[16]) for r in busy)                          # confirm latency, µs
    # the compact console format, its header once
    assert out.count("consumer latency") == 1 and "confirm latency" in out


def test_perftest_stream_queue_is_deleted_after_the_run(spark, amqp_url: str, unique_name: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """issue 11: `perftest -qa x-queue-type=stream` left its stream on the broker (streams ignore auto-delete)."""
    from tests.broker.test_cleanup import exists

    argv = ["perftest", "-h", amqp_url, "-u", unique_name, "-qa", "x-queue-type=stream", "-x", "1", "-y", "1",
            "-r", "100", "-prsd", "0", "-z", "2", "--out", str(tmp_path), "--no-reduce", "--master", "local[2]"]
    assert main(argv) == 0, capsys.readouterr().err
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir() and (p / "run.json").exists())
    assert read(run_dir, "published").num_rows > 0               # the run used the stream
    assert not exists(amqp_url, unique_name)


@pytest.mark.parametrize("broker", BROKERS, ids=lambda b: b.name)
def test_perftest_predeclared_queue_is_bound_consumed_and_kept(spark, broker: Broker, unique_name: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """issue 27: `-p -u Q` on a queue the user declared gave it no binding to `direct`: every message was
    confirmed, dropped as unroutable and reported lost. PerfTest binds predeclared queues; so does rbench,
    and the user's queue outlives the run. On both brokers (4.0's queue is deleted here: the session's
    clean-up reads 3.10's management API only)."""
    from tests.broker.test_cleanup import declare, exists
    from tests.broker.test_perftest_features import opened, run

    broker.require()
    amqp_url = broker.amqp_url
    declare(amqp_url, unique_name)
    argv = ["perftest", "-h", amqp_url, "-p", "-u", unique_name, "-x", "1", "-y", "1", "-r", "100", "-prsd", "0",
            "-z", "2", "--out", str(tmp_path), "--no-reduce", "--master", "local[2]"]
    try:
        assert main(argv) == 0, capsys.readouterr().err
        assert exists(amqp_url, unique_name)                       # the user's queue: never deleted by the run
    finally:
        async def delete() -> None:
            d = await opened(amqp_url)
            await d.delete_queues([unique_name])
            await d.aclose()
        run(delete)
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir() and (p / "run.json").exists())
    published, consumed = read(run_dir, "published"), read(run_dir, "consumed")
    assert published.num_rows == pytest.approx(200, abs=10)         # 2 s at 100 msg/s
    assert sorted(consumed["seq"].to_pylist()) == sorted(published["seq"].to_pylist())
