"""The broker sampler: the broker's side of a run, on the run's clock (docs/broker.md).

Capacity studies read broker CPU, memory, disk, network and queue depth beside the client's
throughput and latency. While a cluster's stage runs, one thread on the coordinator asks every
second (``broker_metrics.interval``):

* management (HTTP API, 15672): per node memory, alarms, file descriptors, sockets, Erlang
  processes, disk free, I/O counters; per queue of the workload ready / unacked and rates;
* prometheus (15692, every node the cluster's URIs name): resident memory, the Erlang runtime's CPU
  seconds, bytes in and out of the VM, I/O counters, alarms, messages dropped or returned as unroutable;
* proc: the beam process's CPU seconds and RSS from /proc, when the broker runs on this host;
* amqp: each workload queue's ready count by a passive queue.declare -- exact at every sample,
  whereas the management and Prometheus queue figures are only as fresh as the broker's statistics
  interval (5 s by default);
* management memory breakdown (/api/nodes/NAME/memory), only when the run opens idle connections: what
  each node's connection processes hold (readers, writers, channels, other). The broker walks every
  Erlang process to answer (about 2 s with 8,000 connections on 3.10, 10 to 30 s or more at 10,000 on a loaded host), so it is one request at a time
  beside the per-second samples, stamped with the time of the sample that started it.

Samples go to broker/<cluster>/ Parquet (rbench.samples.broker). A source that does not answer at
the first sample costs one warning line for the cluster and is left out; the run goes on.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, TextIO

from rbench.config.model import BrokerMetrics
from rbench.config.types import ClusterTarget
from rbench.coordinator.broker_endpoints import authorization, is_local, listening_pid, sampled_endpoints
from rbench.samples import broker as bs
from rbench.samples.record import BrokerMetricsRecord

HTTP_TIMEOUT_S = 5.0            # a busy broker (or a loaded coordinator) answers slowly: a gap, not an error
FIRST_TIMEOUT_S = 10.0          # the first sample decides whether a source is reachable at all
FLUSH_EVERY_S = 60.0
BREAKDOWN_TIMEOUT_S = 60.0      # /api/nodes/NAME/memory walks every process: 10-30 s at 10,000 connections on a loaded host

# management /api/nodes field → metric (counters end in _total)
_NODE_FIELDS = {
    "mem_used": "mem_used_bytes", "mem_limit": "mem_limit_bytes", "mem_alarm": "mem_alarm",
    "disk_free": "disk_free_bytes", "disk_free_limit": "disk_free_limit_bytes", "disk_free_alarm": "disk_alarm",
    "fd_used": "fd_used", "fd_total": "fd_total", "sockets_used": "sockets_used", "proc_used": "erlang_processes",
    "run_queue": "run_queue", "io_read_bytes": "io_read_bytes_total", "io_write_bytes": "io_write_bytes_total",
    "io_read_count": "io_reads_total", "io_write_count": "io_writes_total", "io_sync_count": "io_syncs_total",
    "msg_store_read_count": "msg_store_reads_total", "msg_store_write_count": "msg_store_writes_total",
    "context_switches": "context_switches_total", "gc_bytes_reclaimed": "gc_bytes_reclaimed_total",
}
# Prometheus metric → (metric, scale); unlabelled or per-node aggregates
_PROM_FIELDS = {
    "rabbitmq_process_resident_memory_bytes": ("resident_memory_bytes", 1.0),
    "erlang_vm_statistics_runtime_milliseconds": (bs.ERLANG_RUNTIME, 1e-3),
    "erlang_vm_statistics_bytes_received_total": ("net_received_bytes_total", 1.0),
    "erlang_vm_statistics_bytes_output_total": ("net_sent_bytes_total", 1.0),
    "rabbitmq_process_open_fds": ("fd_used", 1.0),
    "rabbitmq_process_open_tcp_sockets": ("sockets_used", 1.0),
    "rabbitmq_disk_space_available_bytes": ("disk_free_bytes", 1.0),
    "rabbitmq_alarms_memory_used_watermark": ("mem_alarm", 1.0),
    "rabbitmq_alarms_free_disk_space_watermark": ("disk_alarm", 1.0),
    "rabbitmq_io_read_bytes_total": ("io_read_bytes_total", 1.0),
    "rabbitmq_io_write_bytes_total": ("io_write_bytes_total", 1.0),
    "rabbitmq_queue_messages_ready": ("messages_ready_all_queues", 1.0),
    "rabbitmq_queue_messages_unacked": ("messages_unacked_all_queues", 1.0),
    "rabbitmq_connection_incoming_bytes_total": ("connections_received_bytes_total", 1.0),
    "rabbitmq_connection_outgoing_bytes_total": ("connections_sent_bytes_total", 1.0),
    # one sample per protocol label (amqp091, amqp10, stream …): summed into one figure per node
    "rabbitmq_global_messages_unroutable_dropped_total": (bs.UNROUTABLE_DROPPED, 1.0),
    "rabbitmq_global_messages_unroutable_returned_total": (bs.UNROUTABLE_RETURNED, 1.0),
}
# (not from the management API: its overview's drop_unroutable is per-exchange statistics, counted only with
# collect_statistics = fine -- 3.10 showed 0 beside Prometheus's 300 -- and 4.0's overview has no message_stats)


def parse_prometheus(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample line of the Prometheus text format."""
    out = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        labels: dict[str, str] = {}
        if "{" in line:
            name, _, rest = line.partition("{")
            body, _, tail = rest.rpartition("}")
            for item in _split_labels(body):
                k, _, v = item.partition("=")
                labels[k.strip()] = v.strip().strip('"')
            fields = tail.split()
        else:
            name, *fields = line.split()
        if not fields:
            continue
        try:
            out.append((name.strip(), labels, float(fields[0])))
        except ValueError:
            continue
    return out


def prometheus_figures(samples: list[tuple[str, dict[str, str], float]],
                       queues: list[str]) -> dict[tuple[str, str | None], float]:
    """(metric, queue) → value of one node's scrape, for the metrics of _PROM_FIELDS: per-queue samples of the
    workload's queues only (when per-object metrics are on), and samples that differ by other labels (the
    unroutable counters' ``protocol``) summed into one figure."""
    out: dict[tuple[str, str | None], float] = {}
    for name, labels, value in samples:
        hit = _PROM_FIELDS.get(name)
        if hit is None:
            continue
        metric, scale = hit
        queue = labels.get("queue")
        if queue is not None:
            if queue not in queues:
                continue
            metric = metric.replace("_all_queues", "")
        out[(metric, queue)] = out.get((metric, queue), 0.0) + value * scale
    return out


def _split_labels(body: str) -> list[str]:
    items: list[str] = []
    cur: list[str] = []
    quoted = False
    for ch in body:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        items.append("".join(cur))
    return [i for i in items if i.strip()]


def find_beam(pid_hint: int | None = None, port: int | None = None) -> int | None:
    """The local broker's beam process: the pid the management API reports, else the one listening on the load's
    ``port`` (two brokers on one host: 3.10 and 4.0 here), else the only RabbitMQ beam."""
    if pid_hint and _comm(pid_hint).startswith("beam"):
        return pid_hint
    listening = listening_pid(port) if port else None
    if listening is not None and _comm(listening).startswith("beam"):
        return listening
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _comm(int(entry)).startswith("beam"):
            with contextlib.suppress(OSError):
                if b"rabbit" in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
    return found[0] if len(found) == 1 else None


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def proc_cpu_rss(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) and resident bytes of a process, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks          # utime, stime: fields 14 and 15 of stat
    rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return cpu, float(rss)


class BrokerSampler:
    """Samples one cluster's broker on a thread from start() to stop(); rows go to broker/<cluster>/."""

    def __init__(self, run_dir: Path, run_id: str, target: ClusterTarget, queues: list[str], cfg: BrokerMetrics,
                 out: TextIO | None, memory_breakdown: bool = False) -> None:
        from rbench.drivers.amqp091_connect import AmqpUri

        self.run_dir, self.run_id, self.target, self.cfg, self.out = run_dir, run_id, target, cfg, out
        self.queues = list(queues)
        first = AmqpUri(target.uris[0])
        self.vhost = first.vhost
        self._auth = authorization(target.uris)
        self.management_bases, self.prometheus_urls = sampled_endpoints(target.uris, cfg)
        self.sources: list[str] = []
        if cfg.source in ("management", "both"):
            self.sources.append("management")
        if cfg.source in ("prometheus", "both"):
            self.sources.append("prometheus")
        self.sources.append("amqp")
        self.local = is_local(first.host)
        self.port = first.port
        self.pid: int | None = None
        self.unreachable: dict[str, str] = {}
        self.samples = 0
        self.errors = 0
        self.files: list[str] = []
        self._rows: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._latest_depth: tuple[int, int] | None = None      # (t_ns, ready + unacked over the workload's queues)
        self._driver: Any = None
        self._timeout = FIRST_TIMEOUT_S
        self.memory_breakdown = memory_breakdown
        self._nodes_at: tuple[str, list[str]] | None = None     # (management base that answered, its nodes' names)
        self._breakdown: asyncio.Task[list[dict[str, Any]]] | None = None

    # ---- the public face -------------------------------------------------------------------
    def start(self) -> BrokerSampler:
        self._thread = threading.Thread(target=self._run, name=f"rbench-broker-{self.target.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> BrokerMetricsRecord:
        """Stop sampling, write what is left; returns what run.json records."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(3 * FIRST_TIMEOUT_S)
        self._flush()
        return self.summary()

    def summary(self) -> BrokerMetricsRecord:
        return BrokerMetricsRecord(interval_s=self.cfg.interval,
                                   sources=tuple(s for s in self.sources if s not in self.unreachable),
                                   unreachable=dict(self.unreachable), proc_pid=self.pid, samples=self.samples,
                                   errors=self.errors, files=tuple(os.path.relpath(f, self.run_dir) for f in self.files),
                                   queues=tuple(self.queues))

    def backlog(self) -> tuple[int, int] | None:
        """(t_ns, messages in the workload's queues) of the latest sample that had queue depths, or None."""
        return self._latest_depth

    # ---- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception as exc:       # the sampler never takes the run down
            self.errors += 1
            print(f"rbench: warning: cluster {self.target.name}: broker sampler stopped ({type(exc).__name__}: {exc})",
                  file=self.out, flush=True)

    async def _main(self) -> None:
        first = True
        next_at = time.monotonic()
        last_flush = time.monotonic()
        try:
            while not self._stop.is_set():
                await self._sample(first)
                if first:
                    self._warn_unreachable()
                    first = False
                    self._timeout = HTTP_TIMEOUT_S
                if time.monotonic() - last_flush >= FLUSH_EVERY_S:
                    self._flush()
                    last_flush = time.monotonic()
                next_at += self.cfg.interval
                delay = next_at - time.monotonic()
                if delay < 0:                                   # fell behind: skip, do not burst
                    next_at = time.monotonic()
                    delay = 0
                await asyncio.to_thread(self._stop.wait, delay)
            if not first:              # one more at stop: the counters' rise covers the stage's last second too
                await self._sample(False)
            if self._breakdown is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(self._breakdown), 2 * HTTP_TIMEOUT_S)   # not a minute at stop
                self._rows += self._collect_breakdown()
        finally:
            if self._driver is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._driver.aclose(), 5)

    def _warn_unreachable(self) -> None:
        if self.unreachable:
            what = "; ".join(f"{s}: {why}" for s, why in self.unreachable.items())
            going = "the run goes on without broker figures" if not any(
                s not in self.unreachable for s in self.sources) else "the run goes on without them"
            print(f"rbench: warning: cluster {self.target.name}: broker metrics unreachable ({what}); {going}",
                  file=self.out, flush=True)

    async def _sample(self, first: bool) -> None:
        t_ns = time.time_ns()
        rows: list[dict[str, Any]] = []
        depth: dict[str, float] = {}
        for source in self.sources:
            if source in self.unreachable:
                continue
            try:
                if source == "management":
                    rows += await asyncio.to_thread(self._management, t_ns, depth)
                elif source == "prometheus":
                    rows += await asyncio.to_thread(self._prometheus, t_ns)
                else:
                    rows += await self._amqp(t_ns, depth)
            except Exception as exc:
                if first:
                    self.unreachable[source] = self._why(exc)
                else:
                    self.errors += 1
        if self.local:
            rows += self._proc(t_ns)
        if self.memory_breakdown:
            rows += self._collect_breakdown()
            if self._breakdown is None and self._nodes_at is not None:
                self._breakdown = asyncio.create_task(asyncio.to_thread(self._memory_breakdown, t_ns, *self._nodes_at))
        if depth:
            self._latest_depth = (t_ns, int(sum(depth.values())))
        if rows:
            self.samples += 1
            self._rows += rows
            if first:
                self._flush()          # a normal run has broker/ Parquet even if it is cut short

    @staticmethod
    def _why(exc: BaseException) -> str:
        if isinstance(exc, urllib.error.HTTPError):
            return f"HTTP {exc.code} {exc.reason}"
        if isinstance(exc, urllib.error.URLError):
            reason = exc.reason
            return str(reason.strerror if isinstance(reason, OSError) and reason.strerror else reason)
        if isinstance(exc, OSError) and exc.strerror:
            return exc.strerror
        return str(exc) or type(exc).__name__

    def _row(self, t_ns: int, source: str, metric: str, value: float, node: str | None = None,
             queue: str | None = None) -> dict[str, Any]:
        return {"run_id": self.run_id, "cluster": self.target.name, "t_ns": t_ns, "source": source, "node": node,
                "queue": queue, "metric": metric, "value": float(value)}

    def _get(self, url: str, auth: bool, timeout: float | None = None) -> bytes:
        req = urllib.request.Request(url, headers={"Authorization": self._auth} if auth else {})
        with urllib.request.urlopen(req, timeout=timeout or self._timeout) as resp:
            body: bytes = resp.read()
            return body

    def _management(self, t_ns: int, depth: dict[str, float]) -> list[dict[str, Any]]:
        rows = []
        last: Exception | None = None
        for base in self.management_bases:          # the first node that answers speaks for the cluster
            try:
                nodes = json.loads(self._get(f"{base}/nodes", auth=True))
                vhost = urllib.parse.quote(self.vhost, safe="")
                cols = "name,messages_ready,messages_unacknowledged,message_stats"
                queues = json.loads(self._get(f"{base}/queues/{vhost}?columns={cols}", auth=True))
                self._nodes_at = (base, [str(n.get("name")) for n in nodes if n.get("name")])
                break
            except Exception as exc:
                last = exc
        else:
            assert last is not None
            raise last
        for n in nodes:
            name = str(n.get("name"))
            for field, metric in _NODE_FIELDS.items():
                v = n.get(field)
                if isinstance(v, (bool, int, float)):
                    rows.append(self._row(t_ns, "management", metric, float(v), node=name))
            if self.local and self.pid is None and isinstance(n.get("os_pid"), (str, int)):
                with contextlib.suppress(ValueError):
                    self.pid = find_beam(int(n["os_pid"]), self.port)
        wanted = set(self.queues)
        for q in queues:
            name = q.get("name")
            if name not in wanted:
                continue
            ready, unacked = q.get("messages_ready"), q.get("messages_unacknowledged")
            if isinstance(ready, (int, float)):
                rows.append(self._row(t_ns, "management", bs.QUEUE_READY, ready, queue=name))
            if isinstance(unacked, (int, float)):
                rows.append(self._row(t_ns, "management", bs.QUEUE_UNACKED, unacked, queue=name))
            stats = q.get("message_stats") or {}
            for key, metric in (("publish_details", "publish_rate"), ("deliver_get_details", "deliver_rate"),
                                ("ack_details", "ack_rate")):
                rate = (stats.get(key) or {}).get("rate")
                if isinstance(rate, (int, float)):
                    rows.append(self._row(t_ns, "management", metric, rate, queue=name))
        if "amqp" in self.unreachable or "amqp" not in self.sources:
            for r in rows:
                if r["queue"] is not None and r["metric"] in (bs.QUEUE_READY, bs.QUEUE_UNACKED):
                    depth[f"{r['queue']}/{r['metric']}"] = r["value"]
        return rows

    def _collect_breakdown(self) -> list[dict[str, Any]]:
        """The rows of the breakdown request when it has finished (then another may start), else []."""
        task = self._breakdown
        if task is None or not task.done():
            return []
        self._breakdown = None
        if task.cancelled() or task.exception() is not None:
            self.errors += 1
            return []
        return task.result()

    def _memory_breakdown(self, t_ns: int, base: str, nodes: list[str]) -> list[dict[str, Any]]:
        """Each node's connection memory by category (bs.CONNECTION_MEMORY), stamped ``t_ns``."""
        rows = []
        for node in nodes:
            doc = json.loads(self._get(f"{base}/nodes/{urllib.parse.quote(node, safe='')}/memory", auth=True,
                                       timeout=BREAKDOWN_TIMEOUT_S))
            memory = doc.get("memory") if isinstance(doc, dict) else None
            if not isinstance(memory, dict):
                continue
            for category, metric in zip(bs.CONNECTION_MEMORY_CATEGORIES, bs.CONNECTION_MEMORY):
                v = memory.get(category)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    rows.append(self._row(t_ns, "management", metric, float(v), node=node))
        return rows

    def _prometheus(self, t_ns: int) -> list[dict[str, Any]]:
        rows = []
        answered = 0
        last: Exception | None = None
        for url in self.prometheus_urls:
            try:
                text = self._get(url, auth=False).decode()
            except Exception as exc:
                last = exc
                continue
            answered += 1
            samples = parse_prometheus(text)
            host = urllib.parse.urlsplit(url).netloc
            node = next((lab.get("rabbitmq_node", host) for name, lab, _ in samples if name == "rabbitmq_identity_info"), host)
            for (metric, queue), value in prometheus_figures(samples, self.queues).items():
                rows.append(self._row(t_ns, "prometheus", metric, value, node=node, queue=queue))
        if not answered:
            assert last is not None
            raise last
        return rows

    async def _amqp(self, t_ns: int, depth: dict[str, float]) -> list[dict[str, Any]]:
        from rbench.drivers.amqp091 import Amqp091Driver
        from rbench.errors import BrokerError

        if self._driver is None:
            driver = Amqp091Driver()
            await asyncio.wait_for(driver.open(self.target), 10)
            self._driver = driver
        rows = []
        for queue in self.queues:
            try:
                _, ready, consumers = await asyncio.wait_for(self._driver.queue_declare(queue, passive=True), 5)
            except BrokerError as exc:
                if getattr(exc, "reply_code", None) == 404:      # not declared yet (or deleted): no depth
                    continue
                raise
            rows.append(self._row(t_ns, "amqp", bs.QUEUE_READY, ready, queue=queue))
            rows.append(self._row(t_ns, "amqp", "consumers", consumers, queue=queue))
            depth[queue] = ready
        return rows

    def _proc(self, t_ns: int) -> list[dict[str, Any]]:
        if self.pid is None:
            self.pid = find_beam(None, self.port)
            if self.pid is None:
                return []
        try:
            cpu, rss = proc_cpu_rss(self.pid)
        except (OSError, ValueError, IndexError):
            self.pid = None
            return []
        return [self._row(t_ns, "proc", bs.CPU_SECONDS, cpu, node="local"),
                self._row(t_ns, "proc", "rss_bytes", rss, node="local")]

    def _flush(self) -> None:
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        try:
            self.files.append(str(bs.write_part(self.run_dir, self.target.name, len(self.files), rows)))
        except OSError as exc:
            self.errors += 1
            print(f"rbench: warning: cluster {self.target.name}: cannot write broker samples ({exc.strerror})",
                  file=self.out, flush=True)
