"""Stream filtering's spread and wire format, super stream routing, their workload fields and clean-up names."""
from __future__ import annotations

import struct
from typing import Any

import mmh3
import numpy as np
import pyarrow as pa
import pytest

from rbench.codec._stream import PublishFrame
from rbench.config.load import workload_from_dict
from rbench.config.stream_filter import (
    PRODUCER_STEP,
    SEQ_STEP,
    SLOTS,
    FilterSpread,
    slot,
    unwanted_of_workload,
    unwanted_ranges,
    wanted_table,
)
from rbench.coordinator.cleanup import declared_queues, super_stream_exchanges
from rbench.drivers.stream_super import HASH_SEED, murmur3_32, partition_of, route_table
from rbench.errors import ConfigError
from rbench.plan import expected_queues, plan
from rbench.reduce.small import wanted_rows


def test_any_slots_consecutive_messages_fill_every_slot_once_so_the_spread_is_exact() -> None:
    for producer in (0, 7):
        assert sorted(slot(producer, s) for s in range(5, 5 + SLOTS)) == list(range(SLOTS))
    spread = FilterSpread.of(["eu", "us", "asia"], [1, 1, 2], unfiltered=0.2)
    values = [spread.value(3, s) for s in range(SLOTS)]
    assert (values.count("eu"), values.count("us"), values.count("asia"), values.count(None)) == (200, 200, 400, 200)


def test_the_dropped_slots_are_exactly_the_unwanted_values_with_or_without_unfiltered() -> None:
    spread = FilterSpread.of(["a", "b"], unfiltered=0.5)           # a: [0, 250), b: [250, 500), none: [500, 1000)
    assert unwanted_ranges(wanted_table(spread, ("a",), False)) == ((250, SLOTS),)
    assert unwanted_ranges(wanted_table(spread, ("a",), True)) == ((250, 500),)
    w = {"publisher": {"filter": {"values": ["a", "b"], "weights": None, "unfiltered": 0.5}},
         "consumer": {"filter": ["b"], "match_unfiltered": False}}
    assert unwanted_of_workload(w) == ((0, 250), (500, SLOTS))
    assert unwanted_of_workload({"publisher": w["publisher"], "consumer": {"filter": []}}) == ()
    # the reduce's vector form agrees with the rule, row by row
    prod, seq = np.array([0, 1, 2, 3] * 500), np.arange(2000)
    keep = wanted_rows(pa.array(prod), pa.array(seq), ((0, 250), (500, SLOTS)))
    assert keep.tolist() == [spread.value(int(p), int(s)) == "b" for p, s in zip(prod, seq)]


def _messages(frame: bytes) -> list[tuple[int, bytes | None, bytes]]:
    """(publishing id, filter value, message) of a Publish v2 frame."""
    size, key, version, pub, count = struct.unpack_from(">IHHBI", frame)
    assert (size, key, version, pub) == (len(frame) - 4, 2, 2, 0)
    out, pos = [], 13
    for _ in range(count):
        seq, flen = struct.unpack_from(">Qh", frame, pos)
        pos += 10
        value = None if flen == -1 else frame[pos:pos + flen]
        pos += max(flen, 0)
        (n,) = struct.unpack_from(">I", frame, pos)
        out.append((seq, value, frame[pos + 4:pos + 4 + n]))
        pos += 4 + n
    assert pos == len(frame)
    return out


def test_the_c_frame_builder_writes_each_messages_filter_value_as_publish_v2() -> None:
    spread = FilterSpread.of(["eu", "us"], [3, 1], unfiltered=0.25)
    frame = PublishFrame(0, 1 << 20, False, lambda: None, lambda need: None, spread.table(), SEQ_STEP, 5 * PRODUCER_STEP)
    for seq in range(40):
        frame.add(bytes([seq]) * (seq % 3), seq)
    got = _messages(frame.take() or b"")
    assert [(s, v, m) for s, v, m in got] == [
        (seq, None if spread.value(5, seq) is None else str(spread.value(5, seq)).encode(), bytes([seq]) * (seq % 3))
        for seq in range(40)]
    plain = PublishFrame(0, 1 << 20, False, lambda: None, lambda need: None)
    plain.add(b"x", 1)
    assert struct.unpack_from(">H", plain.take() or b"", 6) == (1,)      # no filter: Publish v1 as before
    with pytest.raises(ValueError, match="filter_table"):
        PublishFrame(0, 1 << 20, False, lambda: None, lambda need: None, ("x",), 1, 0)  # type: ignore[arg-type]


def test_super_stream_routing_is_murmur3_32_of_the_key_with_the_java_clients_seed() -> None:
    for data in (b"", b"1", b"12", b"123", b"1234", b"customer-42", "é".encode()):
        assert murmur3_32(data, HASH_SEED) == mmh3.hash(data, HASH_SEED, signed=False)
    assert route_table(200, 3) == tuple(mmh3.hash(str(k).encode(), HASH_SEED, signed=False) % 3 for k in range(200))
    assert {partition_of(str(k), 3) for k in range(200)} == {0, 1, 2}


def _workload(**over: Any) -> Any:
    data: dict[str, Any] = {"name": "ss", "clusters": [{"name": "c", "uris": ["amqp://guest:guest@h:5672/"]}],
                            "rate": 10, "duration": 1, "driver": "stream", "queues": {"name": "orders", "type": "stream"}}
    for key, value in over.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return workload_from_dict(data)


def test_a_super_stream_plans_its_partitions_and_the_clean_up_deletes_them_and_its_exchange(tmp_path: Any) -> None:
    w = _workload(queues={"super_stream": {"partitions": 3, "routing_keys": 10}}, producers=2, consumers=2)
    (p,) = plan(w, "c", 1, "r", str(tmp_path))
    (decl,) = p.topology.queues
    assert decl.name == "orders" and decl.partitions == ("orders-0", "orders-1", "orders-2")
    assert all(s.partitions == decl.partitions and s.routing_keys == 10 for s in p.publishers)
    assert all(c.partitions == decl.partitions and c.queue == "orders" for c in p.consumers)
    assert p.routes == () and expected_queues(w) is None      # one copy in whichever partition: recorded under it
    assert declared_queues(w) == ["orders-0", "orders-1", "orders-2"] and super_stream_exchanges(w, ["orders-0"]) == ["orders"]
    assert super_stream_exchanges(w, []) == [] and super_stream_exchanges(_workload(), ["orders"]) == []


@pytest.mark.parametrize(("over", "says"), [
    ({"queues": {"super_stream": {"partitions": 2}, "type": "classic"}, "driver": "amqp091"}, "super_stream: needs type: stream"),
    ({"driver": "amqp091", "queues": {"type": "classic"}, "publisher": {"filter": {"values": ["a"]}}},
     "publisher.filter: honoured by the stream driver only"),
    ({"consumer": {"match_unfiltered": True}}, "consumer.match_unfiltered: only means something with consumer.filter"),
    ({"publisher": {"filter": {"values": ["a", "b"], "weights": [1]}}}, "weights: expected 2 weights"),
    ({"publisher": {"filter": {"values": ["a", "a"]}}}, "values: expected each value once"),
])
def test_bad_filter_and_super_stream_fields_are_one_line_errors(over: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        _workload(**over)


def test_an_orphaned_super_stream_run_leaves_its_exchange_named_for_deletion() -> None:
    from rbench.coordinator.orphans import recorded_super_stream_exchanges

    as_recorded = _workload(queues={"super_stream": {"partitions": 2}}).model_dump(mode="json", by_alias=True)
    assert recorded_super_stream_exchanges(as_recorded) == ["orders"]
    assert recorded_super_stream_exchanges(_workload().model_dump(mode="json", by_alias=True)) == []
