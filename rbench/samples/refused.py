"""Who the coordinator's control channel turned away during a run (run.json's ``control_refused``).

A peer that cannot answer the run's handshake (rbench.live.control.auth) is hung up on before any line it
sends is read; a line that fails its MAC closes the connection it came on. Each (address, reason) is one
entry with how many times and when first and last, so that a scan of the port or a misconfigured second
run shows up in the run's record and in one warning line at its end, not as a changed figure.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rbench.samples.fields import Fields

MALFORMED_LINE = "malformed line"     # from a task that passed the handshake: the line is dropped, the connection kept


@dataclass(frozen=True)
class RefusedPeer:
    address: str                 # the peer's IP address as the coordinator saw it
    reason: str                  # no handshake, bad handshake, bad line MAC, TLS handshake failed, …
    count: int                   # connections refused (lines, for MALFORMED_LINE)
    first_at: str                # ISO 8601, UTC
    last_at: str

    def to_json(self) -> dict[str, Any]:
        return {"address": self.address, "reason": self.reason, "count": self.count, "first_at": self.first_at,
                "last_at": self.last_at}

    @classmethod
    def from_json(cls, data: object, where: str) -> RefusedPeer:
        f = Fields(data, where)
        return cls(address=f.text("address"), reason=f.text("reason"), count=f.req_int("count"),
                   first_at=f.text("first_at"), last_at=f.text("last_at"))

    def line(self) -> str:
        """The warning printed at the end of the run."""
        what = "line(s)" if self.reason == MALFORMED_LINE else "connection(s)"
        return f"control channel: refused {self.count} {what} from {self.address} ({self.reason})"
