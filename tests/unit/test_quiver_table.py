"""`rbench amqp10`'s 2-second table (rbench.scenarios.quiver_output.StatusTable) and its options, without a broker."""
from __future__ import annotations

import pytest

from rbench.scenarios.quiver_output import StatusTable

S = 1_000_000_000


def _cells(row: str) -> list[str]:
    return row.split()


def test_rows_pair_the_receivers_status_with_the_senders_latest_interval() -> None:
    table = StatusTable(t_start=0)
    assert table.status("sender", (2 * S, 40_000, 0.2, 30_000)) is None          # only receiver statuses make rows
    row = table.status("receiver", (2 * S, 10_000, 0.1, 40_000, 1.5))
    assert row is not None
    cells = _cells(row)
    assert cells[:3] == ["2.0", "40,000", "20,000"]       # time, sender count, sender rate over the interval
    assert cells[5:7] == ["10,000", "5,000"] and cells[-1] == "1.500"


def test_a_finished_sender_shows_dashes_not_its_last_interval() -> None:
    table = StatusTable(t_start=0)
    table.status("sender", (2 * S, 90_000, 0.2, 30_000))
    table.status("receiver", (2 * S, 10_000, 0.1, 40_000, 1.5))
    table.done("sender")                                  # the sender reached its count after its last status
    row = table.status("receiver", (4 * S, 30_000, 0.2, 40_000, 2.5))
    assert row is not None
    cells = _cells(row)
    assert cells[1:5] == ["-", "-", "-", "-"], row
    assert cells[5:7] == ["30,000", "10,000"]             # the receiver's own interval is unaffected


def test_the_senders_in_flight_bound_defaults_to_the_window_and_refuses_negatives() -> None:
    from rbench.errors import ConfigError
    from rbench.scenarios.quiver import QuiverOptions

    url = "amqp://guest:guest@127.0.0.1:5672/"
    assert QuiverOptions(uri=url, count=1, credit=200, window=700).in_flight_bound == 700
    assert QuiverOptions(uri=url, count=1, window=0).in_flight_bound == 0              # no window: no bound
    assert QuiverOptions(uri=url, count=1, credit=200, in_flight=0).in_flight_bound == 0       # no bound
    assert QuiverOptions(uri=url, count=1, credit=200, in_flight=50).in_flight_bound == 50
    with pytest.raises(ConfigError, match="--in-flight"):
        QuiverOptions(uri=url, count=1, in_flight=-2).check()
