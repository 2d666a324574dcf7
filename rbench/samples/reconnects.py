"""The connections a run's tasks lost and got back, as run.json lists them (each cluster's ``reconnects``).

Written by the coordinator when the cluster's stage ends, from the tasks' results (rbench.samples.record);
a run without them has none. Times are wall-clock ns like the samples'.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from rbench.samples.fields import Fields


@dataclass(frozen=True)
class Reconnect:
    """One connection a task lost (back at ``t_back_ns``; None: not during the run)."""

    task: int
    t_lost_ns: int
    t_back_ns: int | None
    uri: str | None
    in_flight: int          # messages in flight at the cut (written with outcome connection_lost)
    skipped: int            # schedule slots not published while disconnected

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object, where: str) -> Reconnect:
        """One entry; a malformed one is a SinkError naming the field."""
        f = Fields(data, where)
        return cls(task=f.req_int("task"), t_lost_ns=f.req_int("t_lost_ns"), t_back_ns=f.opt_int("t_back_ns"),
                   uri=f.opt_text("uri"), in_flight=f.opt_int("in_flight") or 0, skipped=f.opt_int("skipped") or 0)


def by_loss(reconnects: Iterable[Reconnect]) -> list[Reconnect]:
    """In the order the connections were lost (ties by task): the order run.json keeps and the reduce reads."""
    return sorted(reconnects, key=lambda r: (r.t_lost_ns, r.task))

