"""The control server's note of every peer it turned away: counted per (address, reason), logged the first
time each is seen (one warning line, never a traceback), and handed to run.json as typed records
(rbench.samples.refused) with one warning line each at the end of the run."""
from __future__ import annotations

import datetime as dt
import logging
import threading
from dataclasses import replace

from rbench.samples.refused import RefusedPeer

log = logging.getLogger("rbench.live.control.server")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RefusalLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._peers: dict[tuple[str, str], RefusedPeer] = {}

    def note(self, address: str, reason: str, detail: str = "") -> None:
        """One more refusal of ``address`` for ``reason``; ``detail`` goes to the first log line only."""
        now = _now()
        with self._lock:
            held = self._peers.get((address, reason))
            self._peers[(address, reason)] = RefusedPeer(address, reason, 1, now, now) if held is None else \
                replace(held, count=held.count + 1, last_at=now)
        if held is None:
            log.warning("control channel: refused %s (%s)%s", address, reason, f": {detail}" if detail else "")

    def records(self) -> tuple[RefusedPeer, ...]:
        with self._lock:
            return tuple(sorted(self._peers.values(), key=lambda p: (p.first_at, p.address, p.reason)))

    def total(self, reason: str | None = None) -> int:
        with self._lock:
            return sum(p.count for p in self._peers.values() if reason is None or p.reason == reason)
