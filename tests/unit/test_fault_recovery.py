"""The rules behind the fault figures (rbench.reduce.recovery) and run.json's fault log (rbench.samples.faults, .reconnects)."""
from __future__ import annotations

import re
from typing import Any

import pytest

from rbench.coordinator.summary import fault_line
from rbench.errors import SinkError
from rbench.reduce.recovery import consume_recovery, fault_window, first_after
from rbench.samples.record import read_faults, read_reconnects

S = 1_000_000_000
T0 = 1_790_000_000 * S


def rates(*values: int, start: int = 0) -> dict[int, int]:
    """Consumed per second: ``values`` for the seconds from ``start`` on."""
    return {start + i: v for i, v in enumerate(values)}


def rec(consumed: dict[int, int], at_s: float, meas_s: float = 2.0, end_s: float = 30.0,
        disturbed: tuple[tuple[float, float], ...] = ()) -> Any:
    return consume_recovery(consumed, T0, T0 + int(meas_s * S), T0 + int(end_s * S), T0 + int(at_s * S),
                            [(T0 + int(a * S), T0 + int(b * S)) for a, b in disturbed])


def test_dip_then_back() -> None:
    # 100/s; fault at 10.4: seconds 11-12 consume 0, 13 consumes 60 (below 95), 14-16 back at 96, 100, 95
    r = rec(rates(*[100] * 10, 40, 0, 0, 60, 96, 100, 95, 100), 10.4, end_s=18)
    assert (r.baseline, r.baseline_seconds) == (100.0, 8)           # seconds 2..9: 10 holds the fault
    assert r.back is True and r.back_s == pytest.approx(14 - 10.4) and r.back_at_ns == T0 + 14 * S
    assert r.lowest == 0.0 and r.why is None


def test_exactly_95_percent_counts_and_two_good_seconds_do_not() -> None:
    r = rec(rates(*[100] * 10, 0, 95, 95, 20, 95, 95, 95), 10.0, end_s=17)
    assert r.back is True and r.back_s == 4.0                       # 11-12 are only two; 14-16 are three
    assert r.lowest == 0.0                                          # second 10 is whole: the fault is at its start


def test_catching_up_a_backlog_counts_as_back() -> None:
    r = rec(rates(*[100] * 10, 0, 0, 900, 100, 100), 10.0, end_s=15)
    assert r.back is True and r.back_s == 2.0


def test_fault_without_effect_is_back_at_the_next_second() -> None:
    r = rec(rates(*[100] * 20), 10.3, end_s=20)
    assert r.back is True and r.back_s == pytest.approx(0.7) and r.lowest == 100.0


def test_never_recovers() -> None:
    r = rec(rates(*[100] * 10, *[90] * 10), 10.0, end_s=20)
    assert r.back is False and r.back_s is None and r.back_at_ns is None
    assert r.lowest == 90.0 and "not back" in (r.why or "")


def test_fault_during_warm_up() -> None:
    r = rec(rates(*[100] * 20), 1.5, meas_s=2.0, end_s=20)
    assert r.baseline is None and r.back is None and "warm-up" in (r.why or "")


def test_fault_in_the_first_measured_second_has_no_whole_second_before_it() -> None:
    r = rec(rates(*[100] * 20), 2.5, meas_s=2.0, end_s=20)
    assert r.baseline is None and r.back is None and "no whole measured second" in (r.why or "")


def test_fault_in_the_last_seconds() -> None:
    r = rec(rates(*[100] * 20), 17.5, end_s=20)                     # only seconds 18 and 19 follow
    assert r.baseline == 100.0 and r.back is None and "fewer than 3" in (r.why or "")
    assert r.lowest == 100.0


def test_fault_outside_every_step() -> None:
    r = consume_recovery(rates(100), T0, None, None, T0 + 40 * S)
    assert r.baseline is None and r.back is None and "outside every step" in (r.why or "")


def test_nothing_consumed_before_the_fault() -> None:
    r = rec({}, 10.0, end_s=20)
    assert r.baseline == 0.0 and r.back is None and r.lowest == 0.0


def test_second_fault_leaves_out_what_the_first_disturbed() -> None:
    # fault 1 at 5.0, back at 8 (catch-up 300 at second 8); fault 2 at 14.0
    consumed = rates(*[100] * 5, 0, 0, 0, 300, 100, 100, 100, 100, 100, 100, 0, 100, 100, 100, 100)
    first = rec(consumed, 5.0, end_s=20)
    assert (first.baseline, first.back_s) == (100.0, 3.0)
    second = rec(consumed, 14.0, end_s=20, disturbed=((5.0, 8.0 + 3),))   # through its 3 recovery seconds
    assert (second.baseline, second.baseline_seconds) == (100.0, 6)      # seconds 2-4 and 11-13
    assert second.back is True and second.back_s == 2.0
    # without leaving them out, the catch-up and the outage would both bias the mean
    assert rec(consumed, 14.0, end_s=20).baseline == pytest.approx(1100 / 12)


def test_first_confirm_after_each_fault() -> None:
    minima = {0: T0 + 12 * S, 2: T0 + 30 * S}        # nothing was confirmed between fault 2 and fault 3
    assert first_after(minima, 0) == T0 + 12 * S
    assert first_after(minima, 1) == T0 + 30 * S
    assert first_after(minima, 3) is None
    assert first_after({}, 0) is None                # no confirms at all


def test_fault_window() -> None:
    assert fault_window(T0 + 10 * S, T0 + 20 * S, T0 + 40 * S) == (T0, T0 + 30 * S)
    assert fault_window(T0 + 10 * S, None, T0 + 40 * S) == (T0, T0 + 50 * S)      # never back: load end


def _entry(**kw: Any) -> dict[str, Any]:
    e = {"cluster": "local", "index": 0, "action": "kill", "node": "rabbit-2", "at_s": 10, "restart_after_s": None,
         "t_start_ns": T0, "t_end_ns": T0 + 1, "t_back_start_ns": None, "t_back_end_ns": None, "ok": True, "error": None}
    e.update(kw)
    return e


def test_read_faults() -> None:
    assert read_faults({"clusters": []}) == []
    faults = read_faults({"faults": [_entry(index=1, at_s=20.5), _entry()]})
    assert [(f.index, f.at_s) for f in faults] == [(1, 20.5), (0, 10.0)]           # in the order they were executed
    for bad, field in (({"t_start_ns": "soon"}, "faults[0].t_start_ns"), ({"action": "reboot"}, "faults[0].action"),
                       ({"t_back_end_ns": 1.5}, "faults[0].t_back_end_ns"), ({"index": True}, "faults[0].index")):
        with pytest.raises(SinkError, match=re.escape(f"{field}: expected")) as err:
            read_faults({"faults": [_entry(**bad)]})
        assert "\n" not in str(err.value)
    with pytest.raises(SinkError, match="faults"):
        read_faults({"faults": {"a": 1}})


def test_read_reconnects_from_the_cluster_entry() -> None:
    r = {"task": 1, "t_lost_ns": T0 + 5, "t_back_ns": T0 + 9, "uri": None, "in_flight": 3, "skipped": 7}
    early = {**r, "task": 0, "t_lost_ns": T0 + 1, "t_back_ns": None}
    got = read_reconnects({"clusters": [{"name": "b", "reconnects": [r]}, {"name": "a", "reconnects": [r, early]}]}, "a")
    assert [(x.task, x.t_back_ns, x.in_flight, x.skipped) for x in got] == [(0, None, 3, 7), (1, T0 + 9, 3, 7)]
    assert read_reconnects({"clusters": [{"name": "a"}]}, "a") == []
    with pytest.raises(SinkError, match=r"clusters\[0\]\.reconnects\[0\]\.t_lost_ns"):
        read_reconnects({"clusters": [{"name": "a", "reconnects": [{**r, "t_lost_ns": None}]}]}, "a")


def test_fault_line() -> None:
    f = {"cluster": "local", "index": 0, "action": "kill", "node": "rabbit-2", "ok": True, "at_s": 10.04, "back_s": 20.1,
         "first_confirm_s": 0.42, "consume_back": True, "consume_back_s": 12.0, "lost": 0, "connection_lost": 37,
         "connection_lost_consumed": 35, "duplicated": 0, "reordered": 0, "reconnect_max_s": None}
    assert fault_line(f) == ("fault 1 kill rabbit-2 at 10.0 s (node back at 20.1 s): first confirm after 0.42 s, consume rate "
                             "back after 12.0 s, lost 0, in flight at the cut 37 (35 consumed), duplicated 0, reordered 0")
    never = {**f, "back_s": None, "first_confirm_s": None, "consume_back": False, "consume_back_s": None,
             "consume_lowest_rate": 12.0, "ok": False, "error": "nodedown", "reconnect_max_s": 1.5}
    assert fault_line(never, with_cluster=True) == (
        "local: fault 1 kill rabbit-2 at 10.0 s (node not back during the run) FAILED (nodedown): no confirm after it, "
        "consume rate not back (lowest 12/s), lost 0, in flight at the cut 37 (35 consumed), duplicated 0, reordered 0, "
        "longest reconnect 1.50 s")


def test_a_malformed_fault_log_fails_the_reduce_before_spark_starts(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import rbench.spark
    from rbench.reduce.job import reduce_runs

    monkeypatch.setattr(rbench.spark, "local_session", lambda *a, **k: pytest.fail("Spark started"))
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "clusters": [{"name": "local"}],
                                                   "faults": [_entry(t_end_ns=None)]}))
    with pytest.raises(SinkError, match=r"^run\.json: faults\[0\]\.t_end_ns: expected int, got None$"):
        reduce_runs([tmp_path])
