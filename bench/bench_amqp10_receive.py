"""The amqp10 receive path's CPU per message without a broker: transfers fed to a connection in reads of K messages.

Why: against a broker the receiver's cost is mixed with the kernel's and the shared machine's noise; this
isolates what rbench's own code spends per read and per message. N transfers (24-byte stamped bodies,
durable header, as the C Sender writes them) are cut into reads of K messages and handed to the connection's
protocol (``Connection.data_received``: the C FrameReader), one ``asyncio.sleep(0)`` per read as a loop
iteration would, under uvloop; a LatencyTap takes them and the reader settles each read. CPU is the
process's getrusage user+system over the N messages. ``--root DIR`` runs another checkout (built in place)
in a child process, for a before/after in the same run.

    .venv/bin/python bench/bench_amqp10_receive.py [--messages N] [--root DIR]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
READS = (1, 4, 16, 64)


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def write(self, data: Any) -> None:
        self.bytes += len(data)

    def is_closing(self) -> bool:
        return False


class _Sink:
    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        pass

    def on_return(self, body: Any, t_ns: int) -> None:
        pass


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _one(n: int, k: int) -> float:
    from rbench.drivers._amqp10_link import LatencyTap, Receiver, Sender
    from rbench.drivers.amqp10_protocol import Connection
    from rbench.drivers.amqp10_uri import Amqp10Uri
    from rbench.runtime.stamp import new_payload

    conn = Connection(asyncio.get_running_loop(), Amqp10Uri("amqp://guest:guest@127.0.0.1:5672/"))
    transport = _Transport()
    conn.transport = transport
    if hasattr(conn.reader, "transport"):          # the reader is the protocol (older trees: the connection)
        conn.reader.transport = transport
    sender = Sender(1, 0, False, True, 131072, 0, _Sink())
    sender.flow(0, 1 << 30)
    tap = LatencyTap()
    conn.reader.add_receiver(1, Receiver(0, 0, tap, 200, 0, True, 0))
    payload = new_payload(24)
    reads = []
    for first in range(0, n, k):
        out = bytearray()
        sender.send_batch(out, payload, first, k, 0)
        reads.append(bytes(out))
    feed = conn.data_received
    cpu0 = _cpu()
    for data in reads:
        feed(data)
        await asyncio.sleep(0)
    cpu = _cpu() - cpu0
    if tap.count != n:
        raise SystemExit(f"received {tap.count} of {n}")
    return cpu / n * 1e6


def measure(n: int) -> list[float]:
    import uvloop

    uvloop.install()
    return [asyncio.run(_one(n, k)) for k in READS]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--root", metavar="DIR", help="also measure the checkout in DIR (built in place)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(" ".join(f"{x:.4f}" for x in measure(args.messages)))
        return
    rows = {}
    for name, root in [("this tree", str(ROOT))] + ([("--root", args.root)] if args.root else []):
        done = subprocess.run([sys.executable, __file__, "--child", "--messages", str(args.messages)],
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": root}, cwd=root)
        if done.returncode != 0:
            raise SystemExit(f"{name}: {done.stderr.strip()[-300:]}")
        rows[name] = [float(x) for x in done.stdout.split()]
    print(f"amqp10 receive path, {args.messages:,} messages, CPU µs per message (getrusage), "
          f"1-minute load average {os.getloadavg()[0]:.1f}\n")
    print("| tree | " + " | ".join(f"K={k}" for k in READS) + " |")
    print("|---|" + "---:|" * len(READS))
    for name, vals in rows.items():
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")


if __name__ == "__main__":
    main()
