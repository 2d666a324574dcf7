"""Scenario ``amqp10``: a quiver-style AMQP 1.0 send/receive benchmark on rbench's driver.

RabbitMQ's AMQP 1.0 numbers are quoted from quiver: one sender and one receiver process,
a count or a duration, a body size, the receiver's link credit, durable or not. This runs
the same shape with the `amqp10` driver, so the figures are comparable: the sender and the
receiver each run in their own process (their CPU and RSS are measured apart, as quiver
does), report every 2 s to the parent, and the receiver's samples come back at the end.

Per message nothing runs in Python: the sender calls ``Sender.send_batch`` once per batch
(transfer frames and the 24-byte stamp written in C), the receiver's ``on_message`` is a
C ``LatencyTap``. Latency is t_received - t_intended (open loop with ``rate``: the intended
send time; closed loop: the actual send time), in µs resolution.
"""
from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import queue as queue_mod
import resource
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from rbench.config.uri import mask_uri
from rbench.errors import BrokerError, ConfigError, RbenchError
from rbench.runtime.stamp import STAMP_SIZE, new_payload
from rbench.scenarios.quiver_inflight import AdaptiveInFlight, Wakeup
from rbench.scenarios.quiver_output import StatusTable, header

STATUS_EVERY_S = 2.0
DRAIN_TIMEOUT_S = 30.0
IDLE_END_S = 15.0                   # the receiver stops this long after the sender ended with nothing new
BATCH = 500                         # messages per send_batch call in closed loop
PERCENTILES = (0.0, 25.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0)
Settlement = Literal["unsettled", "presettled"]
InFlightPolicy = Literal["adaptive", "fixed"]


@dataclass(frozen=True)
class QuiverOptions:
    uri: str
    queue: str = ""                          # "" = a fresh queue; either way deleted afterwards if this run created it
    count: int = 0                           # messages; 0 = until duration
    duration: float = 0.0                    # seconds; 0 = until count
    body_size: int = STAMP_SIZE
    credit: int = 1000                       # receiver link credit window
    durable: bool = False
    settlement: Settlement = "unsettled"
    rate: float = 0.0                        # msg/s open loop; 0 = as fast as credit allows
    warmup: float = 0.0                      # seconds excluded from latency statistics
    window: int = 1000                       # sender: max unsettled deliveries; 0 = the broker's credit only
    in_flight: int = -1                      # sender: max sent and not yet received; -1 = the window, 0 = no bound
    in_flight_policy: InFlightPolicy = "adaptive"    # closed loop: the bound adapts below in_flight (quiver_inflight)
    keep_queue: bool = False                 # leave a queue this run created (rbench run's queues.keep)

    def check(self) -> None:
        from rbench.drivers.amqp10_uri import Amqp10Uri

        Amqp10Uri(self.uri)                      # a malformed URI fails before any process starts
        if self.count <= 0 and self.duration <= 0:
            raise ConfigError("--count/--duration: expected a message count or a duration")
        if self.body_size < 0 or self.credit <= 0:
            raise ConfigError("--body-size: expected >= 0; --credit: expected > 0")
        if self.rate < 0 or self.warmup < 0 or self.window < 0:
            raise ConfigError("--rate, --warmup, --window: expected >= 0")
        if self.in_flight < -1:
            raise ConfigError(f"--in-flight: expected >= 0 (0: no bound), got {self.in_flight}")
        if self.in_flight_policy not in ("adaptive", "fixed"):
            raise ConfigError(f"--in-flight-policy: expected adaptive or fixed, got {self.in_flight_policy!r}")

    @property
    def in_flight_bound(self) -> int:
        """Messages the sender may have sent that the receiver has not yet got (0: no bound)."""
        return self.window if self.in_flight < 0 else self.in_flight


@dataclass
class Side:
    """What one process (sender or receiver) reports at the end."""

    role: str
    count: int = 0
    t_start_ns: int = 0
    t_end_ns: int = 0
    cpu_s: float = 0.0
    max_rss_kb: int = 0
    error: str = ""

    @property
    def seconds(self) -> float:
        return max(1e-9, (self.t_end_ns - self.t_start_ns) / 1e9)

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    @property
    def cpu_us_per_msg(self) -> float:
        return self.cpu_s / self.count * 1e6 if self.count else float("nan")


@dataclass
class QuiverResult:
    options: QuiverOptions
    queue: str
    sender: Side
    receiver: Side
    latency_ms: dict[str, float] = field(default_factory=dict)      # percentile → ms (µs resolution)
    latency_avg_ms: float = float("nan")
    columns: dict[str, Any] = field(default_factory=dict)           # numpy int64 arrays

    @property
    def duration_s(self) -> float:
        return max(1e-9, (max(self.receiver.t_end_ns, self.sender.t_end_ns) - self.sender.t_start_ns) / 1e9)

    @property
    def end_to_end_rate(self) -> float:
        return self.receiver.count / self.duration_s

    def summary(self) -> dict[str, Any]:
        """quiver's summary keys (configuration / results), plus rbench's own under ``rbench``."""
        o = self.options
        lat = [self.latency_ms.get(_pname(p), float("nan")) for p in PERCENTILES]
        return {
            "configuration": {"impl": "rbench-amqp10", "url": mask_uri(o.uri), "address": self.queue,
                              "count": o.count, "duration": o.duration, "body_size": o.body_size,
                              "credit_window": o.credit, "durable": o.durable, "settlement": o.settlement,
                              "rate": o.rate, "warmup": o.warmup},
            "results": {"message_count": self.receiver.count, "duration": round(self.duration_s, 6),
                        "message_rate": round(self.end_to_end_rate, 1),
                        "latency_average": round(self.latency_avg_ms, 3),
                        "latency_quartiles": lat[1:4] if len(lat) > 3 else [],
                        "latency_nines": lat[4:7]},
            "sender": {"count": self.sender.count, "rate": round(self.sender.rate, 1),
                       "cpu_us_per_msg": round(self.sender.cpu_us_per_msg, 3), "max_rss_kb": self.sender.max_rss_kb},
            "receiver": {"count": self.receiver.count, "rate": round(self.receiver.rate, 1),
                         "cpu_us_per_msg": round(self.receiver.cpu_us_per_msg, 3),
                         "max_rss_kb": self.receiver.max_rss_kb},
            "rbench": {"latency_ms_by_percentile": self.latency_ms,
                       "client_cpu_us_per_msg": round(self.sender.cpu_us_per_msg + self.receiver.cpu_us_per_msg, 3),
                       "lost": max(0, self.sender.count - self.receiver.count)},
        }

    def results_block(self) -> str:
        o = self.options
        lines = ["-" * 80, f"Subject: rbench amqp10 {mask_uri(o.uri)} {self.queue} "
                           f"({o.settlement}, {'durable' if o.durable else 'non-durable'})", "",
                 f"{'Count:':<40}{self.receiver.count:>24,} messages",
                 f"{'Body size:':<40}{o.body_size:>24,} bytes",
                 f"{'Credit window:':<40}{o.credit:>24,} messages",
                 f"{'Duration:':<40}{self.duration_s:>24,.1f} s",
                 f"{'Sender rate:':<40}{self.sender.rate:>24,.0f} messages/s",
                 f"{'Receiver rate:':<40}{self.receiver.rate:>24,.0f} messages/s",
                 f"{'End-to-end rate:':<40}{self.end_to_end_rate:>24,.0f} messages/s",
                 f"{'Sender CPU:':<40}{self.sender.cpu_us_per_msg:>24,.2f} µs/message",
                 f"{'Receiver CPU:':<40}{self.receiver.cpu_us_per_msg:>24,.2f} µs/message",
                 "", "Latencies by percentile:", ""]
        pcts = list(PERCENTILES)
        half = (len(pcts) + 1) // 2
        for a, b in zip(pcts[:half], pcts[half:] + [None] * (2 * half - len(pcts))):
            left = f"{_pname(a):>12} {self.latency_ms.get(_pname(a), float('nan')):>12.3f} ms"
            right = "" if b is None else f"{_pname(b):>16} {self.latency_ms.get(_pname(b), float('nan')):>12.3f} ms"
            lines.append(left + right)
        lines.append("-" * 80)
        return "\n".join(lines)


def _pname(p: float) -> str:
    return f"{p:g}%"


# ---------------------------------------------------------------- the child processes

def _rss_kb() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _use_uvloop() -> None:
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass


def sender_main(opts: QuiverOptions, queue: str, out: Any, go: Any, received: Any, wake: Any) -> None:
    """Child process: send until count or duration, settle, report. ``received``: the receiver's count
    (shared memory, written by its LatencyTap), which bounds what is in flight; ``wake``: the pipe it wakes
    this process on (Wakeup)."""
    _use_uvloop()
    side = Side("sender")
    try:
        asyncio.run(_send(opts, queue, out, go, side, received, wake))
    except RbenchError as exc:
        side.error = str(exc)
    except Exception as exc:                       # reported as one line by the parent
        side.error = f"{type(exc).__name__}: {exc}"
    out.put(("done", "sender", asdict(side), None))


class _Confirms:
    """The sender's PublishSink: counts (nothing per message in Python beyond the call)."""

    def __init__(self) -> None:
        self.acked = 0
        self.nacked = 0

    def on_confirm(self, seq: int, acked: bool, t_ns: int) -> None:
        if acked:
            self.acked += 1
        else:
            self.nacked += 1

    def on_return(self, body: bytes | memoryview, t_ns: int) -> None:
        pass


async def _send(opts: QuiverOptions, queue: str, out: Any, go: Any, side: Side, received: Any,
                wake: Any) -> None:
    from rbench.config.types import ClusterTarget, PublisherSpec
    from rbench.drivers.amqp10 import Amqp10Driver
    from rbench.drivers.amqp10_protocol import FLUSH_BYTES

    driver = Amqp10Driver()
    await driver.open(ClusterTarget("quiver", (opts.uri,)))
    woken: Wakeup | None = None
    try:
        unsettled = opts.settlement == "unsettled"
        pub = await driver.publisher(PublisherSpec(0, queue, routing_key=queue, confirm=unsettled,
                                                   confirm_window=opts.window, persistent=opts.durable), _Confirms())
        conn = driver.connection
        sender = pub._sender
        payload = new_payload(opts.body_size)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, go.wait)
        cpu0 = _cpu_s()
        side.t_start_ns = t0 = time.time_ns()
        end_ns = t0 + int(opts.duration * 1e9) if opts.duration else 2**63 - 1
        limit = opts.count or 2**62
        seq = 0
        next_status = time.monotonic() + STATUS_EVERY_S
        period_ns = int(1e9 / opts.rate) if opts.rate else 0
        bound = opts.in_flight_bound
        # closed loop: the bound follows the pipeline's bandwidth-delay product, at most --in-flight. Open loop
        # keeps the fixed one: a paced sender is not what fills the queue, and a message held back is late.
        adapt = AdaptiveInFlight(bound, opts.credit) \
            if bound and not period_ns and opts.in_flight_policy == "adaptive" else None
        # Waiting for a quarter of the bound to free (not one message) keeps the batches, and the writes, large.
        resume = max(1, bound // 4)
        woken = Wakeup(loop, wake)
        while seq < limit:
            now = time.time_ns()
            if now >= end_ns:
                break
            if time.monotonic() >= next_status:                 # also while waiting for the receiver
                next_status += STATUS_EVERY_S
                out.put(("status", "sender", (time.time_ns(), seq, _cpu_s() - cpu0, _rss_kb()), None))
            if adapt is not None:
                # resume at half: in flight then stays between the bound's half (one bandwidth-delay product)
                # and the bound (two), and a batch is half the bound or more (at most BATCH)
                bound = adapt.update(received[0], now)
                resume = max(1, bound // 2)
            room = bound - (seq - received[0]) if bound else BATCH
            if room < resume:            # the receiver is behind: more would only queue up in the broker
                await woken.until(received, seq - bound + resume)
                continue
            if period_ns:                                        # open loop: every message due by now
                due = t0 + seq * period_ns
                if due > now:
                    await asyncio.sleep((due - now) / 1e9)
                    continue
                # every message due by now, each with its own intended time, then one write for them all
                due_n = min(limit - seq, (now - due) // period_ns + 1, room if bound else BATCH)
                sent = 0
                while sent < due_n and sender.send_batch(conn.reader.out, payload, seq + sent, 1, opts.window,
                                                         due + sent * period_ns):
                    sent += 1
            else:
                sent = sender.send_batch(conn.reader.out, payload, seq, min(BATCH, limit - seq, room), opts.window,
                                         0, FLUSH_BYTES)
            seq += sent
            conn.flush()             # open loop too: a due message goes on the wire now, not with the next batch
            if adapt is not None and sent:
                adapt.sent(seq, now)
            if sent == 0:
                await pub.ready()                                # credit, window or socket buffer
            elif not period_ns:
                await asyncio.sleep(0)                           # let dispositions and flow frames in
        side.count = seq
        conn.flush()
        if unsettled:
            await pub.drain(DRAIN_TIMEOUT_S)
        side.t_end_ns = time.time_ns()
        side.cpu_s = _cpu_s() - cpu0
        side.max_rss_kb = _rss_kb()
        await pub.aclose()
    finally:
        if woken is not None:
            woken.close()
        await driver.aclose()


def receiver_main(opts: QuiverOptions, queue: str, out: Any, ready: Any, expected: Any, received: Any,
                  wake: Any) -> None:
    """Child process: receive until ``expected`` (set by the parent when the sender is done) arrived; the count
    so far is kept in ``received`` for the sender."""
    _use_uvloop()
    side = Side("receiver")
    columns: tuple[bytes, ...] | None = None
    try:
        columns = asyncio.run(_receive(opts, queue, out, ready, expected, side, received, wake))
    except RbenchError as exc:
        side.error = str(exc)
    except Exception as exc:
        side.error = f"{type(exc).__name__}: {exc}"
    ready.set()
    out.put(("done", "receiver", asdict(side), columns))


async def _receive(opts: QuiverOptions, queue: str, out: Any, ready: Any, expected: Any,
                   side: Side, received: Any, wake: Any) -> tuple[bytes, ...]:
    import numpy as np

    from rbench.config.types import ClusterTarget, ConsumerSpec
    from rbench.drivers._amqp10_link import LatencyTap
    from rbench.drivers.amqp10 import Amqp10Driver

    driver = Amqp10Driver()
    await driver.open(ClusterTarget("quiver", (opts.uri,)))
    try:
        tap = LatencyTap()
        os.set_blocking(wake.fileno(), False)
        tap.publish_count(received, wake.fileno())
        consumer = await driver.consumer(ConsumerSpec(0, queue, prefetch=opts.credit,
                                                      auto_ack=opts.settlement == "presettled"), tap)
        cpu0 = _cpu_s()
        ready.set()
        first_ns = 0
        reported = 0
        last_count, last_change = 0, time.monotonic()
        next_status = time.monotonic() + STATUS_EVERY_S
        while True:
            await asyncio.sleep(0.05)
            n = tap.count
            if n and not first_ns:
                first_ns = int(np.frombuffer(tap.columns(0)[3][:8], dtype=np.int64)[0])
            if n != last_count:
                last_count, last_change = n, time.monotonic()
            target = expected.value
            if target >= 0 and (n >= target or time.monotonic() - last_change > IDLE_END_S):
                break
            if time.monotonic() >= next_status:
                next_status += STATUS_EVERY_S
                cols = tap.columns(reported)
                lat = (np.frombuffer(cols[3], dtype=np.int64) - np.frombuffer(cols[1], dtype=np.int64))
                med = float(np.median(lat)) / 1e6 if lat.size else float("nan")
                reported = n
                out.put(("status", "receiver", (time.time_ns(), n, _cpu_s() - cpu0, _rss_kb(), med), None))
        side.count = tap.count
        cols = tap.columns(0)
        side.t_start_ns = first_ns
        side.t_end_ns = int(np.frombuffer(cols[3], dtype=np.int64)[-1]) if tap.count else time.time_ns()
        side.cpu_s = _cpu_s() - cpu0
        side.max_rss_kb = _rss_kb()
        await consumer.aclose()
        return cols
    finally:
        await driver.aclose()


# ---------------------------------------------------------------- the parent

def run(opts: QuiverOptions, line: Callable[[str], None] = print) -> QuiverResult:
    """Declare the queue, run receiver then sender in child processes, print the 2-second table."""
    import numpy as np

    opts.check()
    queue = opts.queue or f"rbench-amqp10-{uuid.uuid4().hex[:8]}"
    created = asyncio.run(_admin(opts.uri, queue, opts.durable, delete=False))
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    ready, go = ctx.Event(), ctx.Event()
    expected = ctx.Value("q", -1)
    received = ctx.RawArray("q", 2)       # the receiver's count, and the count the sender waits for (Wakeup)
    wake_r, wake_w = ctx.Pipe(duplex=False)
    receiver = ctx.Process(target=receiver_main, args=(opts, queue, out, ready, expected, received, wake_w),
                           daemon=True)
    sender = ctx.Process(target=sender_main, args=(opts, queue, out, go, received, wake_r), daemon=True)
    sides: dict[str, Side] = {}
    columns: tuple[bytes, ...] | None = None
    try:
        receiver.start()
        if not ready.wait(30):
            raise BrokerError("amqp10: the receiver did not attach within 30 s")
        sender.start()
        go.set()
        line(header())
        t_start = time.time_ns()
        table = StatusTable(t_start)
        while len(sides) < 2:
            try:
                kind, role, data, extra = out.get(timeout=1.0)
            except queue_mod.Empty:
                if not receiver.is_alive() and "receiver" not in sides:
                    raise BrokerError("amqp10: the receiver process died") from None
                if not sender.is_alive() and "sender" not in sides:
                    raise BrokerError("amqp10: the sender process died") from None
                continue
            if kind == "status":
                row = table.status(role, data)
                if row is not None:
                    line(row)
                continue
            side = Side(**data)
            sides[role] = side
            table.done(role)
            if side.error:
                expected.value = 0
                raise BrokerError(f"amqp10 {role}: {side.error}")
            if role == "sender":
                expected.value = side.count
            else:
                columns = extra
    finally:
        for p in (sender, receiver):
            if p.pid is None:                    # never started (the receiver did not attach)
                continue
            p.join(10)
            if p.is_alive():
                p.kill()
        if created and not opts.keep_queue:      # as rbench run: what the run made goes, a queue it found stays
            try:
                asyncio.run(_admin(opts.uri, queue, opts.durable, delete=True))
            except RbenchError:
                pass
    result = QuiverResult(opts, queue, sides["sender"], sides["receiver"])
    if columns:
        seq, t_int, t_sent, t_recv = (np.frombuffer(c, dtype=np.int64) for c in columns)
        result.columns = {"seq": seq, "t_intended": t_int, "t_sent": t_sent, "t_received": t_recv}
        lat = t_recv - t_int
        if opts.warmup:
            keep = t_int >= result.sender.t_start_ns + int(opts.warmup * 1e9)
            lat = lat[keep] if keep.any() else lat
        if lat.size:
            result.latency_ms = {_pname(p): round(float(np.percentile(lat, p)) / 1e6, 3) for p in PERCENTILES}
            result.latency_avg_ms = round(float(lat.mean()) / 1e6, 3)
    return result


async def _admin(uri: str, queue: str, durable: bool, delete: bool) -> bool:
    """Declare (or delete) the queue over AMQP 0.9.1: RabbitMQ 3.x's AMQP 1.0 plugin cannot declare.
    Declaring returns whether the queue was created here (False: it existed, and is not this run's to delete)."""
    from rbench.config.types import ClusterTarget, QueueDecl, Topology
    from rbench.drivers.amqp091 import Amqp091Driver
    from rbench.drivers.replies import NotFound

    admin = Amqp091Driver()
    await admin.open(ClusterTarget("quiver-admin", (uri,)))
    try:
        if delete:
            await admin.delete_queues([queue])
            return False
        try:
            await admin.queue_declare(queue, passive=True)
            return False
        except NotFound:
            await admin.declare(Topology(queues=(QueueDecl(queue, durable=durable),)))
            return True
    finally:
        await admin.aclose()
