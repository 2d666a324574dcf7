"""The stream-publish scenario and CLI against the real broker, with small counts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rbench.cli import main
from rbench.config.types import ClusterTarget
from rbench.scenarios.stream_publish import Variant
from rbench.scenarios.stream_publish import run as run_rounds
from tests.broker import on_both_brokers
from tests.brokers import Broker
from tests.loops import LoopRunner

pytestmark = pytest.mark.timeout(120)
amqp_url, stream_url = on_both_brokers.amqp_url, on_both_brokers.stream_url     # fixtures: the broker row's URLs


@pytest.mark.parametrize("fmt", ["amqp", "binary"])
def test_rounds_publish_and_confirm_every_message(fmt: str, stream_url: str, unique_name: str) -> None:
    seen = []
    report = run_rounds(ClusterTarget("local", (), stream_uris=(stream_url,)),
                 [Variant("single", 50, 1), Variant("batch", 2_000, 100)], 2, fmt,  # type: ignore[arg-type]
                 stream=unique_name, progress=seen.append)
    assert [(r.variant, r.round, r.messages) for r in report.rounds] == \
        [("single", 0, 50), ("batch", 0, 2000), ("single", 1, 50), ("batch", 1, 2000)]
    assert seen == report.rounds
    assert all(r.seconds > 0 and r.cpu_seconds >= 0 for r in report.rounds)


def test_cli_writes_table_json_and_plot(stream_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["stream-publish", "--uri", stream_url, "--single", "20", "--batch", "500", "--rounds", "2",
                 "--plot", str(tmp_path / "box.png"), "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert "median msg/s" in out and "single" in out and "batch" in out
    data = json.loads((tmp_path / "r.json").read_text())
    assert set(data["medians"]) == {"single", "batch"} and len(data["rounds"]) == 4
    assert (tmp_path / "box.png").read_bytes()[:4] == b"\x89PNG"
    assert "guest:guest" not in out


def test_cli_wrong_password_is_one_masked_line(stream_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad = stream_url.replace("guest:guest", "guest:wr0ng-secret")
    assert main(["stream-publish", "--uri", bad, "--rounds", "1", "--single", "1", "--batch", "1"]) == 2
    err = capsys.readouterr().err
    assert "wr0ng-secret" not in err and "authentication" in err and err.count("\n") == 1


def test_the_stream_holds_every_round_message_once_in_order(stream_url: str, unique_name: str, run: LoopRunner) -> None:
    """What ConfirmChain published is what a consumer reads back, AMQP-decoded, in publishing order."""
    import asyncio

    from rbench.config.types import ConsumerSpec
    from rbench.drivers.stream import StreamDriver
    from rbench.scenarios.stream_publish import message

    target = ClusterTarget("local", (), stream_uris=(stream_url,))
    run_rounds(target, [Variant("single", 30, 1), Variant("batch", 1_000, 100)], 1, "amqp", stream=unique_name,
        keep_stream=True)
    expected = [message(n) for n in range(30)] + [message(n) for n in range(1_000)]

    async def read_back() -> list[bytes]:
        got: list[bytes] = []
        done = asyncio.get_running_loop().create_future()

        def on_message(body: bytes | memoryview, redelivered: bool, t_ns: int) -> None:
            got.append(bytes(body))
            if len(got) >= len(expected) and not done.done():
                done.set_result(None)

        d = StreamDriver()
        await d.open(target)
        try:
            c = await d.consumer(ConsumerSpec(0, unique_name, offset="first", prefetch=10), on_message)
            await asyncio.wait_for(done, 20)
            await asyncio.sleep(0.2)             # anything extra would arrive now
            await c.aclose()
        finally:
            await d.delete_streams([unique_name])
            await d.aclose()
        return got

    assert run(read_back()) == expected


def test_a_rate_cap_holds_each_round_to_its_schedule(broker: Broker, unique_name: str) -> None:
    """--rate: message n goes out no earlier than n / rate s into its round, on 3.10 and 4.0."""
    report = run_rounds(ClusterTarget("local", (), stream_uris=(broker.stream_url,)),
                        [Variant("single", 40, 1), Variant("batch", 400, 20)], 1, "binary", stream=unique_name, rate=200)
    single, batch = report.rounds
    assert single.messages == 40 and batch.messages == 400
    assert single.seconds >= 39 / 200 and batch.seconds >= 380 / 200        # the last send's due time
    assert report.rate_cap == 200 and report.as_dict()["rate_cap"] == 200
    assert report.table().startswith("rates capped at 200 msg/s")


def test_cli_refuses_a_rate_that_is_not_positive(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0", "-5", "fast"):
        assert main(["stream-publish", "--rate", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--rate: expected a rate in msg/s (a positive number)" in err
