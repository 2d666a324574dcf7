"""The `amqp10` driver vs Qpid Proton clients in Python and in C: quiver's send/receive shape, same broker, same run.

Each client runs one sender process and one receiver process (quiver's layout), on a fresh
classic queue declared over AMQP 0.9.1: N messages (default 100,000) of 24 bytes (rbench's
stamp; the peers send the same size), receiver credit 200, unsettled (the sender
counts a message once the broker's disposition accepts it; every sender keeps at most 1,000
deliveries unsettled), durable and non-durable. The peers:
- "proton": python-qpid-proton (the `bench` extra), the issue's 3x reference;
- "proton-c": bench/peers/proton_c_peer.c on Debian's libqpid-proton, the kind of client quiver's C
  arrow is, built by `make bench-amqp10` into build/proton-c-peer (left out, with a note, when missing).
Rounds interleave the clients (the order alternates each round) so a drift in the shared
machine's load hits all of them; the table reports medians over rounds and rbench / peer ratios.

``--baseline DIR`` adds another client, "baseline": rbench as checked out (and built) in DIR, run in
the same rounds, so a change to the driver is measured against the tree it started from under the
same load (the shared machine's drift hits all three).

Rates: sender = N / (last disposition - first send); receiver = N / (last - first delivery);
end-to-end = N / (last delivery - first send). CPU µs per message: each process's
getrusage user+system over its N messages, sender + receiver. Broker CPU µs per message: the local
RabbitMQ's beam process, user+system from /proc, over the client's whole run (queue declared to
queue deleted) divided by N; blank when the broker is not on this machine.

Why the broker column: on a machine whose cores the broker shares with the clients, a client whose own
cost is small is bounded by the broker's CPU per message: it cannot exceed (cores / broker CPU per
message) msg/s however cheap it gets, nor its rate ratio to a peer (that bound / the peer's rate).
The ratio table prints that ceiling.

    .venv/bin/python bench/bench_amqp10.py [--messages N] [--rounds R] [--credit C] [--baseline DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BODY_SIZE = 24
WINDOW = 1000                      # both senders: at most this many unsettled deliveries
CLIENTS = ("rbench", "proton", "proton-c")      # table order; "baseline" (--baseline) comes after rbench
C_PEER = ROOT / "build" / "proton-c-peer"          # built by `make bench-amqp10` (scripts/build-proton-c-peer.sh)


def _broker_cpu() -> float | None:
    """CPU seconds the local broker has used so far; None when no single local RabbitMQ beam is found."""
    from rbench.coordinator.broker import find_beam, proc_cpu_rss

    pid = find_beam()
    if pid is None:
        return None
    try:
        return proc_cpu_rss(pid)[0]
    except OSError:
        return None


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------- proton peer (child processes)

def proton_child(role: str, url: str, queue: str, n: int, credit: int, durable: bool) -> None:
    """One python-qpid-proton sender or receiver; prints a JSON line with its timings and CPU."""
    from proton import Message
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    address = f"/amq/queue/{queue}"
    body = b"\0" * BODY_SIZE
    out: dict[str, Any] = {"role": role, "count": 0}

    class Sender(MessagingHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.sent = self.accepted = 0
            self.cpu0 = 0.0

        def on_start(self, event: Any) -> None:
            conn = event.container.connect(url, allowed_mechs="PLAIN", allow_insecure_mechs=True)
            event.container.create_sender(conn, address)

        def on_sendable(self, event: Any) -> None:
            if not self.sent:
                out["t_first"] = time.time_ns()
                self.cpu0 = _cpu()
            self._send(event.sender)

        def _send(self, sender: Any) -> None:
            while sender.credit and self.sent < n and self.sent - self.accepted < WINDOW:
                msg = Message(body=body, durable=durable)
                msg.inferred = True                     # a data section, like rbench's
                sender.send(msg)
                self.sent += 1

        def on_accepted(self, event: Any) -> None:
            self.accepted += 1
            self._send(event.link)
            if self.accepted == n:
                out.update(count=n, t_last=time.time_ns(), cpu_s=_cpu() - self.cpu0)
                event.connection.close()

    class Receiver(MessagingHandler):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(prefetch=credit, auto_accept=True)
            self.received = 0
            self.cpu0 = 0.0

        def on_start(self, event: Any) -> None:
            conn = event.container.connect(url, allowed_mechs="PLAIN", allow_insecure_mechs=True)
            event.container.create_receiver(conn, address)

        def on_link_opened(self, event: Any) -> None:
            print("ready", flush=True)

        def on_message(self, event: Any) -> None:
            if not self.received:
                out["t_first"] = time.time_ns()
                self.cpu0 = _cpu()
            self.received += 1
            if self.received == n:
                out.update(count=n, t_last=time.time_ns(), cpu_s=_cpu() - self.cpu0)
                event.connection.close()

    Container(Sender() if role == "sender" else Receiver()).run()
    print(json.dumps(out), flush=True)


def _run_pair(receiver_cmd: list[str], sender_cmd: list[str], env: dict[str, str], n: int, timeout: float,
              name: str) -> dict[str, Any]:
    """A peer's receiver process (attached first: it prints "ready"), then its sender; their JSON lines → figures."""
    receiver = subprocess.Popen(receiver_cmd, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert receiver.stdout is not None
        if receiver.stdout.readline().strip() != "ready":
            raise SystemExit(f"{name} receiver did not attach")
        sender = subprocess.run(sender_cmd, capture_output=True, text=True, timeout=timeout, env=env)
        rcv_out, _ = receiver.communicate(timeout=timeout)
    finally:
        if receiver.poll() is None:
            receiver.kill()
    if sender.returncode != 0:
        raise SystemExit(f"{name} sender failed: {sender.stderr.strip()[-300:]}")
    snd = json.loads(sender.stdout.strip().splitlines()[-1])
    rcv = json.loads(rcv_out.strip().splitlines()[-1])
    if snd.get("count") != n or rcv.get("count") != n:
        raise SystemExit(f"{name}: sent {snd.get('count')} received {rcv.get('count')} of {n}")
    return _figures(n, snd["t_first"], snd["t_last"], snd["cpu_s"], rcv["t_first"], rcv["t_last"], rcv["cpu_s"])


def run_proton(url: str, queue: str, n: int, credit: int, durable: bool, timeout: float) -> dict[str, Any]:
    """The python-qpid-proton peer; the URL (with its password) travels in the environment, not on argv."""
    args = [sys.executable, __file__, "--proton-child", queue, str(n), str(credit), str(int(durable))]
    env = {**os.environ, "RBENCH_PEER_URL": url}
    return _run_pair([*args, "receiver"], [*args, "sender"], env, n, timeout, "proton")


def run_proton_c(binary: str, url: str, queue: str, n: int, credit: int, durable: bool,
                 timeout: float) -> dict[str, Any]:
    """The C peer (bench/peers/proton_c_peer.c on libqpid-proton): quiver's C client's kind of client."""
    from rbench.drivers.amqp091_connect import AmqpUri

    uri = AmqpUri(url)
    args = [uri.host, str(uri.port), uri.user, f"/amq/queue/{queue}", str(n), str(credit), str(int(durable)),
            str(WINDOW)]
    env = {**os.environ, "RBENCH_PEER_PASSWORD": uri.password}
    return _run_pair([binary, "receiver", *args], [binary, "sender", *args], env, n, timeout, "proton-c")


def _figures(n: int, s_first: int, s_last: int, s_cpu: float, r_first: int, r_last: int,
             r_cpu: float) -> dict[str, Any]:
    return {"sender_rate": n / max(1e-9, (s_last - s_first) / 1e9),
            "receiver_rate": n / max(1e-9, (r_last - r_first) / 1e9),
            "e2e_rate": n / max(1e-9, (r_last - s_first) / 1e9),
            "sender_cpu_us": s_cpu / n * 1e6, "receiver_cpu_us": r_cpu / n * 1e6,
            "cpu_us": (s_cpu + r_cpu) / n * 1e6}


# ---------------------------------------------------------------- rbench side

def run_rbench(url: str, queue: str, n: int, credit: int, durable: bool) -> dict[str, Any]:
    from rbench.scenarios.quiver import QuiverOptions, run

    result = run(QuiverOptions(uri=url, queue=queue, count=n, body_size=BODY_SIZE, credit=credit, durable=durable,
                               settlement="unsettled", window=WINDOW), line=lambda _: None)
    s, r = result.sender, result.receiver
    if s.count != n or r.count != n:
        raise SystemExit(f"rbench: sent {s.count} received {r.count} of {n}")
    return _figures(n, s.t_start_ns, s.t_end_ns, s.cpu_s, r.t_start_ns, r.t_end_ns, r.cpu_s)


BASELINE_CHILD = """
import json, sys
from rbench.scenarios.quiver import QuiverOptions, run
url, queue, n, credit, durable, body, window = sys.argv[1:]
n = int(n)
result = run(QuiverOptions(uri=url, queue=queue, count=n, body_size=int(body), credit=int(credit),
                           durable=durable == "1", settlement="unsettled", window=int(window)), line=lambda _: None)
s, r = result.sender, result.receiver
print(json.dumps([s.count, r.count, s.t_start_ns, s.t_end_ns, s.cpu_s, r.t_start_ns, r.t_end_ns, r.cpu_s]))
"""


def run_baseline(root: str, url: str, queue: str, n: int, credit: int, durable: bool, timeout: float) -> dict[str, Any]:
    """rbench from another checkout (``--baseline DIR``), in its own interpreter with DIR first on the path."""
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run([sys.executable, "-c", BASELINE_CHILD, url, queue, str(n), str(credit), str(int(durable)),
                           str(BODY_SIZE), str(WINDOW)], capture_output=True, text=True, timeout=timeout, cwd=root,
                          env=env)
    if done.returncode != 0:
        raise SystemExit(f"baseline ({root}) failed: {done.stderr.strip().splitlines()[-1:]}")
    sc, rc, s0, s1, scpu, r0, r1, rcpu = json.loads(done.stdout.strip().splitlines()[-1])
    if sc != n or rc != n:
        raise SystemExit(f"baseline: sent {sc} received {rc} of {n}")
    return _figures(n, s0, s1, scpu, r0, r1, rcpu)


def _queue(url: str, name: str, durable: bool, delete: bool) -> None:
    import asyncio

    from rbench.scenarios.quiver import _admin

    asyncio.run(_admin(url, name, durable, delete))


# ---------------------------------------------------------------- parent

def _order(client: str) -> float:
    return CLIENTS.index(client) if client in CLIENTS else 0.5


def _fmt(x: float, spec: str, unit: str = "") -> str:
    return "" if x != x else f"{x:{spec}}{unit}"          # NaN: no local broker to read


def table(results: dict[tuple[str, bool], list[dict[str, Any]]], n: int, rounds: int, credit: int) -> str:
    lines = [f"AMQP 1.0, {n:,} x {BODY_SIZE}-byte messages, credit {credit}, unsettled, "
             f"median of {rounds} interleaved round(s)", "",
             "| durable | client | sender msg/s | receiver msg/s | end-to-end msg/s | sender µs/msg | "
             "receiver µs/msg | client CPU µs/msg | broker CPU µs/msg |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    med: dict[tuple[str, bool], dict[str, float]] = {}
    for (client, durable), runs in sorted(results.items(), key=lambda kv: (kv[0][1], _order(kv[0][0]))):
        m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        med[(client, durable)] = m
        lines.append(f"| {'yes' if durable else 'no'} | {client} | {m['sender_rate']:,.0f} | {m['receiver_rate']:,.0f} "
                     f"| {m['e2e_rate']:,.0f} | {m['sender_cpu_us']:.2f} | {m['receiver_cpu_us']:.2f} "
                     f"| {m['cpu_us']:.2f} | {_fmt(m['broker_cpu_us'], '.1f')} |")
    cores = os.cpu_count() or 1
    lines += ["", f"| durable | peer | end-to-end rate rbench/peer | client CPU peer/rbench | ceiling of the rate ratio: "
              f"{cores} cores ÷ rbench's broker CPU per message ÷ the peer's rate |", "|---|---|---:|---:|---:|"]
    for durable in (False, True):
        ours = med.get(("rbench", durable))
        for peer in CLIENTS[1:]:
            theirs = med.get((peer, durable))
            if ours and theirs:
                # a client costing nothing, with the broker on every core, still pays the broker per message
                ceiling = cores * 1e6 / ours["broker_cpu_us"] / theirs["e2e_rate"]
                lines.append(f"| {'yes' if durable else 'no'} | {peer} | {ours['e2e_rate'] / theirs['e2e_rate']:.2f}x "
                             f"| {theirs['cpu_us'] / ours['cpu_us']:.2f}x | {_fmt(ceiling, '.2f', 'x')} |")
    if any(client == "baseline" for client, _ in results):
        lines += ["", "| durable | end-to-end rate rbench/baseline, median of per-round ratios | "
                  "same, each round | client CPU rbench/baseline |", "|---|---:|---|---:|"]
        for durable in (False, True):
            new, old = results.get(("rbench", durable)), results.get(("baseline", durable))
            if new and old:
                per = [a["e2e_rate"] / b["e2e_rate"] for a, b in zip(new, old)]
                lines.append(f"| {'yes' if durable else 'no'} | {statistics.median(per):.2f}x "
                             f"| {', '.join(f'{x:.2f}' for x in per)} "
                             f"| {med[('rbench', durable)]['cpu_us'] / med[('baseline', durable)]['cpu_us']:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--credit", type=int, default=200)
    ap.add_argument("--durability", default="non-durable,durable")
    ap.add_argument("--baseline", metavar="DIR", help="also run rbench from this checkout (built) in every round")
    ap.add_argument("--url", default=os.environ.get("RBENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "amqp10.md"))
    ap.add_argument("--c-peer", default=str(C_PEER), metavar="PATH",
                    help="the C peer's binary (bench/peers/proton_c_peer.c); skipped with a note when missing")
    ap.add_argument("--proton-child", nargs=5, metavar=("QUEUE", "N", "CREDIT", "DURABLE", "ROLE"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.proton_child:
        queue, n, credit, durable, role = args.proton_child
        proton_child(role, os.environ["RBENCH_PEER_URL"], queue, int(n), int(credit), durable == "1")
        return
    peers = ["rbench", "proton"]
    if os.access(args.c_peer, os.X_OK):
        peers.append("proton-c")
    else:
        print(f"proton-c: {args.c_peer} is not built, the C peer is left out "
              "(make bench-amqp10 builds it from bench/peers/proton_c_peer.c; needs libqpid-proton11-dev)")
    kinds = [d.strip() == "durable" for d in args.durability.split(",") if d.strip()]
    results: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    timeout = max(120.0, args.messages / 500)
    for rnd in range(args.rounds):
        clients = (*peers, "baseline") if args.baseline else tuple(peers)
        order = clients if rnd % 2 == 0 else clients[::-1]
        for durable in kinds:
            for client in order:
                queue = f"rbench-bench-amqp10-{uuid.uuid4().hex[:8]}"
                broker0 = _broker_cpu()
                _queue(args.url, queue, durable, delete=False)
                try:
                    t0 = time.monotonic()
                    if client == "rbench":
                        fig = run_rbench(args.url, queue, args.messages, args.credit, durable)
                    elif client == "proton-c":
                        fig = run_proton_c(args.c_peer, args.url, queue, args.messages, args.credit, durable, timeout)
                    elif client == "baseline":
                        fig = run_baseline(args.baseline, args.url, queue, args.messages, args.credit, durable,
                                           timeout)
                    else:
                        fig = run_proton(args.url, queue, args.messages, args.credit, durable, timeout)
                finally:
                    _queue(args.url, queue, durable, delete=True)
                broker1 = _broker_cpu()
                fig["broker_cpu_us"] = (broker1 - broker0) / args.messages * 1e6 \
                    if broker0 is not None and broker1 is not None else float("nan")
                results.setdefault((client, durable), []).append(fig)
                print(f"round {rnd + 1}/{args.rounds} {'durable' if durable else 'non-durable':<11} {client:<6} "
                      f"e2e {fig['e2e_rate']:>9,.0f} msg/s  client CPU {fig['cpu_us']:6.2f} µs/msg "
                      f"broker CPU {fig['broker_cpu_us']:6.1f} µs/msg "
                      f"({time.monotonic() - t0:.1f} s)", flush=True)
        if rnd + 1 < args.rounds:
            print(table(results, args.messages, rnd + 1, args.credit), flush=True)
    text = table(results, args.messages, args.rounds, args.credit)
    print()
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    base = f" --baseline {args.baseline}" if args.baseline else ""
    out.write_text(f"command: bench/bench_amqp10.py --messages {args.messages} --rounds {args.rounds} "
                   f"--credit {args.credit}{base}\n\n{text}\n")
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
