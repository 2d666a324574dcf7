"""The `amqp10` driver vs Qpid Proton clients in Python and in C: quiver's send/receive shape, same broker, same run.

Each client runs one sender process and one receiver process (quiver's layout), against each broker of
``--url`` (default both local ones: RabbitMQ 3.10's AMQP 1.0 plugin on 5672 and 4.0's native AMQP 1.0 on
5680; every client addresses 3.x with the v1 form /amq/queue/Q and 4.x with the v2 form /queues/Q), on a
fresh classic queue declared over AMQP 0.9.1: N messages (default 100,000) of 24 bytes (rbench's
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
end-to-end = N / (last delivery - first send). Latency: p50 / p99 / p99.9 of (received - sent) per message,
from the send time each client writes into the body (rbench: its 24-byte stamp, written in C as the message
is encoded; the peers: 8 bytes of time, written just before the message is handed to proton), read with
CLOCK_REALTIME on this machine, percentiles by numpy for every client. rbench's sender also keeps at most
``--in-flight`` messages (default the window) sent and not yet received: its receiver publishes its
count in shared memory (rbench amqp10 --in-flight; by default adaptive below it, about twice the delivery rate x
the least round trip: rbench/scenarios/quiver_inflight.py); the peers, like quiver, have no such bound, so a
sender faster than its receiver fills the queue and their latency at saturation is the queue's. ``--paced`` adds
"rbench paced", rbench open loop at the rate the C peer reached in the same round: latency at the same rate. CPU µs per message: each process's
getrusage user+system over its N messages, sender + receiver. Broker CPU µs per message: the local
RabbitMQ's beam process, user+system from /proc, over the client's whole run (queue declared to
queue deleted) divided by N; blank when the broker is not on this machine. With two brokers on one
machine the beam measured is the one listening on the URL's port (rbench.coordinator.broker.find_beam).

Why the broker column: on a machine whose cores the broker shares with the clients, a client whose own
cost is small is bounded by the broker's CPU per message: it cannot exceed (cores / broker CPU per
message) msg/s however cheap it gets, nor its rate ratio to a peer (that bound / the peer's rate).
The ratio table prints that ceiling.

    .venv/bin/python bench/bench_amqp10.py [--messages N] [--rounds R] [--credit C] [--baseline DIR] [--url URL]…
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BODY_SIZE = 24
WINDOW = 1000                      # every sender: at most this many unsettled deliveries (--window)
CLIENTS = ("rbench", "proton", "proton-c")      # table order; "baseline" (--baseline) comes after rbench
PACED = "rbench paced"          # --paced: rbench open loop at the C peer's rate of the same round, right after it
C_PEER = ROOT / "build" / "proton-c-peer"          # built by `make bench-amqp10` (scripts/build-proton-c-peer.sh)
BROKER_URLS = ("amqp://guest:guest@127.0.0.1:5672/", "amqp://guest:guest@127.0.0.1:5680/")   # 3.10, 4.0 (docs/brokers.md)


class Broker:
    """One broker of the run: its URL, what it says it is, and the address form its clients use."""

    def __init__(self, url: str) -> None:
        import asyncio

        from rbench.config.types import ClusterTarget
        from rbench.drivers.amqp091 import Amqp091Driver
        from rbench.drivers.amqp091_connect import AmqpUri

        async def props() -> dict[Any, Any]:
            d = Amqp091Driver()
            await d.open(ClusterTarget("bench", (url,)))
            try:
                return dict(d.server_properties)
            finally:
                await d.aclose()

        p = asyncio.run(props())
        text = {str(k): v.decode() if isinstance(v, bytes) else str(v) for k, v in p.items()}
        self.version = text.get("version", "?")
        self.native = self.version.split(".")[0].isdigit() and int(self.version.split(".")[0]) >= 4
        self.label = f"{text.get('product', 'RabbitMQ')} {self.version} {'native' if self.native else 'plugin'}"
        self.port = AmqpUri(url).port
        self.url = url
        # rbench reads the address form from the URL (docs/amqp10.md); the peers are given the address itself
        self.client_url = url + ("&" if "?" in url else "?") + "address=v2" if self.native else url

    def address(self, queue: str) -> str:
        return f"/queues/{queue}" if self.native else f"/amq/queue/{queue}"


def _broker_cpu(port: int) -> float | None:
    """CPU seconds the local broker serving ``port`` has used so far; None when its beam is not found here."""
    from rbench.coordinator.broker import find_beam, proc_cpu_rss

    pid = find_beam(None, port)
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

def proton_child(role: str, url: str, address: str, n: int, credit: int, durable: bool, window: int) -> None:
    """One python-qpid-proton sender or receiver; prints a JSON line with its timings and CPU.

    The sender puts its send time (time.time_ns(), little-endian int64) in the body's first 8 bytes; the
    receiver keeps received - sent per message and writes them to RBENCH_PEER_SAMPLES (as the C peer does)."""
    from array import array

    from proton import Message
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    pad = b"\0" * (BODY_SIZE - 8)
    latency = array("q")
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
            while sender.credit and self.sent < n and self.sent - self.accepted < window:
                msg = Message(body=time.time_ns().to_bytes(8, "little") + pad, durable=durable)
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
            body = event.message.body
            if len(body) >= 8:
                latency.append(time.time_ns() - int.from_bytes(body[:8], "little"))
            if self.received == n:
                out.update(count=n, t_last=time.time_ns(), cpu_s=_cpu() - self.cpu0)
                event.connection.close()

    Container(Sender() if role == "sender" else Receiver()).run()
    samples = os.environ.get("RBENCH_PEER_SAMPLES")
    if role == "receiver" and samples:
        Path(samples).write_bytes(latency.tobytes())
    print(json.dumps(out), flush=True)


def _run_pair(receiver_cmd: list[str], sender_cmd: list[str], env: dict[str, str], n: int, timeout: float,
              name: str) -> dict[str, Any]:
    """A peer's receiver process (attached first: it prints "ready"), then its sender; their JSON lines and the
    receiver's latency samples (RBENCH_PEER_SAMPLES) → figures."""
    with tempfile.TemporaryDirectory(prefix="rbench-amqp10-") as tmp:
        samples = Path(tmp) / "latency.bin"
        fig = _run_pair_in(receiver_cmd, sender_cmd, env, {**env, "RBENCH_PEER_SAMPLES": str(samples)}, n, timeout,
                           name)
        fig.update(_latency(np.fromfile(samples, dtype=np.int64) if samples.exists() else np.zeros(0, np.int64)))
    return fig


def _run_pair_in(receiver_cmd: list[str], sender_cmd: list[str], env: dict[str, str], rcv_env: dict[str, str],
                 n: int, timeout: float, name: str) -> dict[str, Any]:
    receiver = subprocess.Popen(receiver_cmd, stdout=subprocess.PIPE, text=True, env=rcv_env)
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


def run_proton(url: str, address: str, n: int, credit: int, durable: bool, window: int,
               timeout: float) -> dict[str, Any]:
    """The python-qpid-proton peer; the URL (with its password) travels in the environment, not on argv."""
    args = [sys.executable, __file__, "--proton-child", address, str(n), str(credit), str(int(durable)), str(window)]
    env = {**os.environ, "RBENCH_PEER_URL": url}
    return _run_pair([*args, "receiver"], [*args, "sender"], env, n, timeout, "proton")


def run_proton_c(binary: str, url: str, address: str, n: int, credit: int, durable: bool, window: int,
                 timeout: float) -> dict[str, Any]:
    """The C peer (bench/peers/proton_c_peer.c on libqpid-proton): quiver's C client's kind of client."""
    from rbench.drivers.amqp091_connect import AmqpUri

    uri = AmqpUri(url)
    args = [uri.host, str(uri.port), uri.user, address, str(n), str(credit), str(int(durable)),
            str(window)]
    env = {**os.environ, "RBENCH_PEER_PASSWORD": uri.password}
    return _run_pair([binary, "receiver", *args], [binary, "sender", *args], env, n, timeout, "proton-c")


LATENCY = (50.0, 99.0, 99.9)          # end-to-end latency percentiles in the tables


def _latency(ns: Any) -> dict[str, float]:
    """p50 / p99 / p99.9 in ms of per-message (received - sent) ns, numpy's linear percentile for every client;
    NaN when a client sent none (a peer whose samples are missing)."""
    return {f"p{p:g}": float(np.percentile(ns, p)) / 1e6 if len(ns) else float("nan") for p in LATENCY}


def _figures(n: int, s_first: int, s_last: int, s_cpu: float, r_first: int, r_last: int,
             r_cpu: float) -> dict[str, Any]:
    return {"sender_rate": n / max(1e-9, (s_last - s_first) / 1e9),
            "receiver_rate": n / max(1e-9, (r_last - r_first) / 1e9),
            "e2e_rate": n / max(1e-9, (r_last - s_first) / 1e9),
            "sender_cpu_us": s_cpu / n * 1e6, "receiver_cpu_us": r_cpu / n * 1e6,
            "cpu_us": (s_cpu + r_cpu) / n * 1e6}


# ---------------------------------------------------------------- rbench side

def run_rbench(url: str, queue: str, n: int, credit: int, durable: bool, window: int,
               in_flight: int, policy: str = "adaptive", rate: float = 0.0) -> dict[str, Any]:
    from rbench.scenarios.quiver import QuiverOptions, run

    result = run(QuiverOptions(uri=url, queue=queue, count=n, body_size=BODY_SIZE, credit=credit, durable=durable,
                               settlement="unsettled", window=window, in_flight=in_flight,
                               in_flight_policy="fixed" if policy == "fixed" else "adaptive", rate=rate),
                 line=lambda _: None)
    s, r = result.sender, result.receiver
    if s.count != n or r.count != n:
        raise SystemExit(f"rbench: sent {s.count} received {r.count} of {n}")
    fig = _figures(n, s.t_start_ns, s.t_end_ns, s.cpu_s, r.t_start_ns, r.t_end_ns, r.cpu_s)
    cols = result.columns          # closed loop: t_intended is the send time, stamped in C as the peers do
    # paced (open loop): from the send time too, as the peers measure theirs, not from the intended time: the
    # comparison is of what the pipeline adds at the same rate, not of a sender's lateness at a rate it may not
    # reach in that moment of a shared machine
    fig.update(_latency(cols["t_received"] - cols["t_sent" if rate else "t_intended"] if cols else []))
    return fig


BASELINE_CHILD = """
import json, sys
from rbench.scenarios.quiver import QuiverOptions, run
url, queue, n, credit, durable, body, window = sys.argv[1:]
n = int(n)
result = run(QuiverOptions(uri=url, queue=queue, count=n, body_size=int(body), credit=int(credit),
                           durable=durable == "1", settlement="unsettled", window=int(window)), line=lambda _: None)
s, r = result.sender, result.receiver
c = result.columns
lat = (c["t_received"] - c["t_intended"]).tolist() if c else []
print(json.dumps([s.count, r.count, s.t_start_ns, s.t_end_ns, s.cpu_s, r.t_start_ns, r.t_end_ns, r.cpu_s, lat]))
"""


def run_baseline(root: str, url: str, queue: str, n: int, credit: int, durable: bool, window: int,
                 timeout: float) -> dict[str, Any]:
    """rbench from another checkout (``--baseline DIR``), in its own interpreter with DIR first on the path."""
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run([sys.executable, "-c", BASELINE_CHILD, url, queue, str(n), str(credit), str(int(durable)),
                           str(BODY_SIZE), str(window)], capture_output=True, text=True, timeout=timeout, cwd=root,
                          env=env)
    if done.returncode != 0:
        raise SystemExit(f"baseline ({root}) failed: {done.stderr.strip().splitlines()[-1:]}")
    sc, rc, s0, s1, scpu, r0, r1, rcpu, lat = json.loads(done.stdout.strip().splitlines()[-1])
    if sc != n or rc != n:
        raise SystemExit(f"baseline: sent {sc} received {rc} of {n}")
    fig = _figures(n, s0, s1, scpu, r0, r1, rcpu)
    fig.update(_latency(np.array(lat, dtype=np.int64)))
    return fig


def _queue(url: str, name: str, durable: bool, delete: bool) -> None:
    import asyncio

    from rbench.scenarios.quiver import _admin

    asyncio.run(_admin(url, name, durable, delete))


# ---------------------------------------------------------------- parent

def _order(client: str) -> float:
    return CLIENTS.index(client) if client in CLIENTS else 0.5


def _fmt(x: float, spec: str, unit: str = "") -> str:
    return "" if x != x else f"{x:{spec}}{unit}"          # NaN: no local broker to read


Key = tuple[str, str, bool]          # (broker label, client, durable)


def table(results: dict[Key, list[dict[str, Any]]], n: int, rounds: int, credit: int, window: int, in_flight: int,
          brokers: list[str], policy: str = "adaptive") -> str:
    loads = [r["load1"] for runs in results.values() for r in runs]
    lines = [f"AMQP 1.0, {n:,} x {BODY_SIZE}-byte messages, credit {credit}, window {window}, unsettled, "
             f"median of {rounds} interleaved round(s); 1-minute load average at the runs' ends "
             f"{min(loads):.1f}–{max(loads):.1f}",
             f"rbench's sender also keeps at most {in_flight or 'unbounded'} messages sent and not yet received "
             f"(rbench amqp10 --in-flight{'' if not in_flight or policy == 'fixed' else ', adaptive: 2 x delivery rate x least round trip, from the credit up to it'}"
             f"); the peers' senders are bounded by the window only", "",
             "| broker | durable | client | sender msg/s | receiver msg/s | end-to-end msg/s | p50 ms | p99 ms "
             "| p99.9 ms | sender µs/msg | receiver µs/msg | client CPU µs/msg | broker CPU µs/msg |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    med: dict[Key, dict[str, float]] = {}
    for (broker, client, durable), runs in sorted(results.items(), key=lambda kv: (
            brokers.index(kv[0][0]), kv[0][2], _order(kv[0][1]))):
        m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        med[(broker, client, durable)] = m
        lines.append(f"| {broker} | {'yes' if durable else 'no'} | {client} | {m['sender_rate']:,.0f} "
                     f"| {m['receiver_rate']:,.0f} | {m['e2e_rate']:,.0f} | {_fmt(m['p50'], '.2f')} "
                     f"| {_fmt(m['p99'], '.2f')} | {_fmt(m['p99.9'], '.2f')} | {m['sender_cpu_us']:.2f} "
                     f"| {m['receiver_cpu_us']:.2f} | {m['cpu_us']:.2f} | {_fmt(m['broker_cpu_us'], '.1f')} |")
    cores = os.cpu_count() or 1
    lines += ["", f"| broker | durable | peer | end-to-end rate rbench/peer | same, each round | client CPU "
              f"peer/rbench | p50 rbench/peer | p99 rbench/peer | ceiling of the rate ratio: {cores} cores ÷ "
              f"rbench's broker CPU per message ÷ the peer's rate |",
              "|---|---|---|---:|---|---:|---:|---:|---:|"]
    for broker in brokers:
        for durable in (False, True):
            ours = med.get((broker, "rbench", durable))
            for peer in CLIENTS[1:]:
                theirs = med.get((broker, peer, durable))
                if ours and theirs:
                    # a client costing nothing, with the broker on every core, still pays the broker per message
                    ceiling = cores * 1e6 / ours["broker_cpu_us"] / theirs["e2e_rate"]
                    per = [a["e2e_rate"] / b["e2e_rate"] for a, b in zip(results[(broker, "rbench", durable)],
                                                                          results[(broker, peer, durable)])]
                    lines.append(f"| {broker} | {'yes' if durable else 'no'} | {peer} "
                                 f"| {ours['e2e_rate'] / theirs['e2e_rate']:.2f}x | {', '.join(f'{x:.2f}' for x in per)} "
                                 f"| {theirs['cpu_us'] / ours['cpu_us']:.2f}x | {_fmt(ours['p50'] / theirs['p50'], '.2f', 'x')} "
                                 f"| {_fmt(ours['p99'] / theirs['p99'], '.2f', 'x')} | {_fmt(ceiling, '.2f', 'x')} |")
    if any(client == PACED for _, client, _ in results):
        lines += ["", "| broker | durable | the C peer's rate, msg/s | rbench paced at it (open loop), msg/s | "
                  "p50 rbench/peer at that rate | p99 rbench/peer at that rate | each round: p50, p99 ratios |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for broker in brokers:
            for durable in (False, True):
                paced, peer = results.get((broker, PACED, durable)), results.get((broker, "proton-c", durable))
                if paced and peer:
                    mp, mc = med[(broker, PACED, durable)], med[(broker, "proton-c", durable)]
                    each = "; ".join(f"{a['p50'] / b['p50']:.2f}, {a['p99'] / b['p99']:.2f}" for a, b in zip(paced, peer))
                    lines.append(f"| {broker} | {'yes' if durable else 'no'} | {mc['e2e_rate']:,.0f} | {mp['e2e_rate']:,.0f} "
                                 f"| {_fmt(mp['p50'] / mc['p50'], '.2f', 'x')} | {_fmt(mp['p99'] / mc['p99'], '.2f', 'x')} "
                                 f"| {each} |")
    if any(client == "baseline" for _, client, _ in results):
        lines += ["", "| broker | durable | end-to-end rate rbench/baseline, median of per-round ratios | "
                  "same, each round | client CPU rbench/baseline |", "|---|---|---:|---|---:|"]
        for broker in brokers:
            for durable in (False, True):
                new, old = results.get((broker, "rbench", durable)), results.get((broker, "baseline", durable))
                if new and old:
                    per = [a["e2e_rate"] / b["e2e_rate"] for a, b in zip(new, old)]
                    ratio = med[(broker, "rbench", durable)]["cpu_us"] / med[(broker, "baseline", durable)]["cpu_us"]
                    lines.append(f"| {broker} | {'yes' if durable else 'no'} | {statistics.median(per):.2f}x "
                                 f"| {', '.join(f'{x:.2f}' for x in per)} | {ratio:.2f}x |")
    return "\n".join(lines)


def one_run(broker: Broker, client: str, durable: bool, args: argparse.Namespace, timeout: float,
            rate: float = 0.0) -> dict[str, Any]:
    """One client's run on a fresh queue of ``broker``; its figures with the broker's CPU per message. ``rate``
    (PACED only): rbench's open-loop rate."""
    queue = f"rbench-bench-amqp10-{uuid.uuid4().hex[:8]}"
    address = broker.address(queue)
    broker0 = _broker_cpu(broker.port)
    _queue(broker.url, queue, durable, delete=False)
    try:
        t0 = time.monotonic()
        if client in ("rbench", PACED):
            fig = run_rbench(broker.client_url, queue, args.messages, args.credit, durable, args.window,
                             args.in_flight, args.in_flight_policy, rate)
        elif client == "proton-c":
            fig = run_proton_c(args.c_peer, broker.url, address, args.messages, args.credit, durable, args.window,
                               timeout)
        elif client == "baseline":
            fig = run_baseline(args.baseline, broker.client_url, queue, args.messages, args.credit, durable,
                               args.window, timeout)
        else:
            fig = run_proton(broker.url, address, args.messages, args.credit, durable, args.window, timeout)
    finally:
        _queue(broker.url, queue, durable, delete=True)
    broker1 = _broker_cpu(broker.port)
    fig["broker_cpu_us"] = (broker1 - broker0) / args.messages * 1e6 \
        if broker0 is not None and broker1 is not None else float("nan")
    fig["load1"] = os.getloadavg()[0]
    print(f"{broker.label:<26} {'durable' if durable else 'non-durable':<11} {client:<8} "
          f"e2e {fig['e2e_rate']:>9,.0f} msg/s  p50 {fig['p50']:7.2f} p99 {fig['p99']:7.2f} ms  "
          f"client CPU {fig['cpu_us']:6.2f} µs/msg broker CPU {fig['broker_cpu_us']:6.1f} µs/msg "
          f"({time.monotonic() - t0:.1f} s, load {fig['load1']:.1f})", flush=True)
    return fig


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--credit", type=int, default=200)
    ap.add_argument("--durability", default="non-durable,durable")
    ap.add_argument("--window", type=int, default=WINDOW, help="every sender's max unsettled deliveries")
    ap.add_argument("--in-flight", type=int, default=-1,
                    help="rbench's sender: max sent and not yet received (rbench amqp10 --in-flight; default the "
                         "window, 0: no bound); the peers have no such bound")
    ap.add_argument("--in-flight-policy", choices=["adaptive", "fixed"], default="adaptive",
                    help="rbench's sender: the bound adapts to the delivery rate x round trip, up to --in-flight "
                         "(default), or is --in-flight itself (rbench amqp10 --in-flight-policy)")
    ap.add_argument("--paced", action="store_true",
                    help="also run rbench open loop at the rate the C peer reached in the same round, right after "
                         "it: latency at the same rate")
    ap.add_argument("--clients", default=",".join(CLIENTS),
                    help="which of rbench, proton, proton-c to run (rbench always runs: the ratios are to it)")
    ap.add_argument("--baseline", metavar="DIR", help="also run rbench from this checkout (built) in every round")
    ap.add_argument("--url", action="append", default=None,
                    help="a broker's AMQP URL, repeatable (default: RBENCH_AMQP_URL, else 3.10 on 5672 and 4.0 on "
                         "5680; a broker that does not answer is left out with a note)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "amqp10.md"))
    ap.add_argument("--c-peer", default=str(C_PEER), metavar="PATH",
                    help="the C peer's binary (bench/peers/proton_c_peer.c); skipped with a note when missing")
    ap.add_argument("--proton-child", nargs=6, metavar=("ADDRESS", "N", "CREDIT", "DURABLE", "WINDOW", "ROLE"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.proton_child:
        address, n, credit, durable, window, role = args.proton_child
        proton_child(role, os.environ["RBENCH_PEER_URL"], address, int(n), int(credit), durable == "1", int(window))
        return
    from rbench.config.uri import mask_uri
    from rbench.errors import ConnectError

    urls = args.url or ([os.environ["RBENCH_AMQP_URL"]] if os.environ.get("RBENCH_AMQP_URL") else list(BROKER_URLS))
    brokers: list[Broker] = []
    for url in urls:
        try:
            brokers.append(Broker(url))
        except ConnectError as exc:
            print(f"broker left out: {exc}")
    if not brokers:
        raise SystemExit("no broker answered")
    chosen = {c.strip() for c in args.clients.split(",") if c.strip()}
    unknown = chosen - set(CLIENTS)
    if unknown:
        raise SystemExit(f"--clients: expected some of {', '.join(CLIENTS)}, got {', '.join(sorted(unknown))}")
    peers = ["rbench"] + (["proton"] if "proton" in chosen else [])
    if "proton-c" in chosen and os.access(args.c_peer, os.X_OK):
        peers.append("proton-c")
    elif "proton-c" in chosen:
        print(f"proton-c: {args.c_peer} is not built, the C peer is left out "
              "(make bench-amqp10 builds it from bench/peers/proton_c_peer.c; needs libqpid-proton11-dev)")
    kinds = [d.strip() == "durable" for d in args.durability.split(",") if d.strip()]
    in_flight = args.window if args.in_flight < 0 else args.in_flight          # QuiverOptions.in_flight_bound
    results: dict[Key, list[dict[str, Any]]] = {}
    labels = [b.label for b in brokers]
    timeout = max(120.0, args.messages / 500)
    completed: dict[Key, list[dict[str, Any]]] = {}     # the rounds every client finished on every broker
    rounds = 0
    for rnd in range(args.rounds):
        clients = (*peers, "baseline") if args.baseline else tuple(peers)
        order = clients if rnd % 2 == 0 else clients[::-1]
        try:
            for broker in brokers:
                for durable in kinds:
                    for client in order:
                        results.setdefault((broker.label, client, durable), []).append(
                            one_run(broker, client, durable, args, timeout))
                    if args.paced and "proton-c" in order:      # at the rate the C peer just reached
                        peer_rate = results[(broker.label, "proton-c", durable)][-1]["e2e_rate"]
                        results.setdefault((broker.label, PACED, durable), []).append(
                            one_run(broker, PACED, durable, args, timeout, peer_rate))
        except ConnectError as exc:         # a broker gone mid-run: the rounds before it still stand
            print(f"round {rnd + 1} stopped: {exc}; the table is of the {rounds} round(s) before it", flush=True)
            break
        completed = {k: list(v) for k, v in results.items()}
        rounds = rnd + 1
        if rounds < args.rounds:
            print(table(completed, args.messages, rounds, args.credit, args.window, in_flight, labels,
                  args.in_flight_policy), flush=True)
    if not rounds:
        raise SystemExit("no round finished")
    text = table(completed, args.messages, rounds, args.credit, args.window, in_flight, labels,
                  args.in_flight_policy)
    print()
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    base = f" --baseline {args.baseline}" if args.baseline else ""
    on = "".join(f" --url {mask_uri(b.url)}" for b in brokers)
    out.write_text(f"command: bench/bench_amqp10.py --messages {args.messages} --rounds {args.rounds} (finished {rounds}) "
                   f"--credit {args.credit} --window {args.window} --in-flight {in_flight} --in-flight-policy {args.in_flight_policy}{' --paced' if args.paced else ''} --clients {','.join(peers)} --durability {args.durability}"
                   f"{base}{on}\n\n{text}\n")
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
