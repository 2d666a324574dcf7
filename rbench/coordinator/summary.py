"""The one-screen summary `rbench run` prints when a run ends.

Every per-step figure comes from the reduce (rbench.reduce: the same rows as steps.csv and the
report), so the summary and the report can never disagree: there is one definition of a rate
and one of a percentile. Without a reduce (``--no-reduce``) only the totals the tasks counted
are printed, with the command that gives the per-step figures.
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, TextIO

from rbench.reduce.churn import summary_lines as churn_lines
from rbench.reduce.rereads import print_cluster as print_rereads
from rbench.reduce.unroutable import print_cluster as print_unroutable
from rbench.samples.attempts import restarted_stage_note
from rbench.samples.connections import ConnectStats, summary_line
from rbench.samples.conventions import shown_step
from rbench.samples.record import ClusterRecord, read_run_record
from rbench.samples.runinfo import STEP_CUT, STEP_NOT_RUN
from rbench.samples.tasks import TaskCounts
from rbench.samples.windows import cut_text, window_text


def mem_line(cluster: str, kib: float | None, conn_kib: float | None) -> str | None:
    """The broker's memory per idle connection, both ways it is read (rbench.reduce.connections.MEM_METHOD)."""
    if kib is None and conn_kib is None:
        return None
    parts = []
    if kib is not None:
        parts.append(f"{kib:,.1f} KiB of mem_used")
    if conn_kib is not None:
        parts.append(f"{conn_kib:,.1f} KiB in its connection processes (memory breakdown: connection readers, "
                     f"writers, channels, other)")
    return (f"{cluster}: broker memory per idle connection {', '.join(parts)} (each the rise while the idle "
            f"connections opened ÷ their number, from the broker samples; estimates, docs/connections.md)")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"




def cluster_totals(clusters: tuple[ClusterRecord, ...]) -> dict[str, TaskCounts]:
    """What the tasks counted per cluster (run.json task_results): every message, warm-up included."""
    return {c.name: c.counts() for c in clusters}


def stream_filter_line(name: str, cluster: ClusterRecord, counts: TaskCounts) -> str | None:
    """How well the broker's stream filter worked: of what it sent the consumers, how much they dropped client-side
    (the broker filters whole chunks by a bloom filter, so a chunk holding any wanted value comes whole)."""
    dropped = [r.filtered for r in cluster.task_results if r.filtered is not None]
    if not dropped:
        return None
    total = sum(dropped)
    sent = counts.consumed + total
    share = f" ({total / sent:.1%})" if sent else ""
    return (f"{name}, stream filter (tasks' counts, whole run): the broker sent {sent:,} messages to the consumers, "
            f"which dropped {total:,} of them client-side{share}: values they do not filter on, in chunks the "
            f"broker's per-chunk filter let through; the rest ({counts.consumed:,}) is consumed. Dropped messages "
            f"are neither consumed, lost nor duplicated")


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def fault_line(f: dict[str, Any], with_cluster: bool = False) -> str:
    """One fault of the reduce (rbench.reduce.faults) in one line: when, the first confirm after it, when the
    consume rate was back, and what it cost in its window (the same figures as faults.csv)."""
    back = "node not back during the run" if f.get("back_s") is None else f"node back at {f['back_s']:.1f} s"
    head = (f"{f['cluster']}: " if with_cluster else "") + f"fault {int(f['index']) + 1} {f['action']} {f['node']} at {f['at_s']:.1f} s ({back})"
    if not f.get("ok", True):
        head += f" FAILED ({f.get('error') or 'no reason given'})"
    wait = f.get("first_confirm_s")
    first = ("no confirm after it" if wait is None else
             f"first confirm after {wait:.2f} s" if wait >= 0.01 else f"first confirm after {wait * 1000:.1f} ms")
    if f.get("consume_back"):
        rate = f"consume rate back after {f['consume_back_s']:.1f} s"
    elif f.get("consume_back") is False:
        lowest = f.get("consume_lowest_rate")
        rate = "consume rate not back" + ("" if lowest is None else f" (lowest {lowest:,.0f}/s)")
    else:
        rate = f"consume rate back: not measurable ({f.get('recovery_note')})"
    cut = f"in flight at the cut {_n(f.get('connection_lost'))} ({_n(f.get('connection_lost_consumed'))} consumed)"
    line = (f"{head}: {first}, {rate}, lost {_n(f.get('lost'))}, {cut}, duplicated {_n(f.get('duplicated'))}, "
            f"reordered {_n(f.get('reordered'))}")
    if f.get("reconnect_max_s") is not None:
        line += f", longest reconnect {f['reconnect_max_s']:.2f} s"
    return line


def print_reconnects(cluster: ClusterRecord, out: TextIO | None = None) -> None:
    """One line per lost connection a task of ``cluster`` rode through (run.json ``reconnects``)."""
    skipped = cluster.skipped_disconnected()
    for r in cluster.reconnects:
        if r.t_back_ns is None:
            back = "never back"
        else:
            back = f"back after {(r.t_back_ns - r.t_lost_ns) / 1e9:.2f} s on {r.uri}"
        print(f"{cluster.name} task {r.task}: connection lost, {back}; {r.in_flight} in flight "
              f"(connection_lost), {r.skipped} scheduled message(s) not sent while disconnected", file=out)
    if skipped and cluster.reconnects:
        print(f"{cluster.name}: {skipped} scheduled message(s) skipped while disconnected in all "
              f"(run.json steps[].skipped_disconnected)", file=out)


def wrap_legend(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` (the table's): one line of ~900 characters is a wall on a terminal
    and in a CI log. A difference "a − b" stays on one line (no-break spaces while wrapping, since textwrap
    breaks at ASCII whitespace only); words longer than the width are not cut."""
    wrapped = textwrap.fill(text.replace(" − ", "\u00a0−\u00a0"), width=width, break_long_words=False,
                            break_on_hyphens=False)
    return wrapped.replace("\u00a0", " ")


def print_summary(run_dir: Path, reduced: Any = None, out: TextIO | None = None) -> None:
    """Print the run's status, its per-step table (from ``reduced``, a ReduceResult) and per-cluster totals."""
    record = read_run_record(run_dir)
    print(f"\nrun {record.run_id}: {record.status}  ({run_dir})", file=out)
    for c in record.clusters:                   # what the figures below were measured on (run.json clusters[].broker)
        if c.broker is not None:
            print(f"{c.name}: broker: {c.broker.line()}", file=out)
        if c.variant is not None:               # the settings asked for (run.json clusters[].variant)
            print(f"{c.name}: {c.variant.line()}", file=out)
    steps = list(reduced.steps) if reduced is not None else []
    if steps:
        from rbench.reduce.job import RATE_METHOD

        legend = (f"per step, over its {window_text(record.warmup_s)}; {RATE_METHOD}; latency in ms: "
                  f"end-to-end = received − intended (coordinated-omission corrected), e2e/sent = received − sent, "
                  f"confirm = confirmed − sent, late = sent − intended (the generator's own lateness: the part of "
                  f"e2e that is not the broker's); exact percentiles over every measured message")
        header = (f"{'cluster':<12}{'step':>5}{'target/s':>10}{'sent/s':>10}{'conf/s':>10}{'recv/s':>10}"
                  f"{'e2e p50':>9}{'e2e p99':>9}{'e2e max':>9}{'sent p50':>9}{'sent p99':>9}{'conf p99':>9}"
                  f"{'late p50':>9}{'late p99':>9}")
        print(wrap_legend(legend, len(header)), file=out)
        print(header, file=out)
        for r in steps:
            target = "max" if r["target_rate"] is None else f"{r['target_rate']:,.0f}"
            rates = [r.get(k) for k in ("publish_rate", "confirm_rate", "consume_rate")]
            shown = "".join(f"{'-' if v is None else f'{v:,.0f}':>10}" for v in rates)
            print(f"{r['cluster']:<12}{shown_step(r['step']):>5}{target:>10}{shown}"
                  f"{_ms(r['e2e_p50_ms']):>9}{_ms(r['e2e_p99_ms']):>9}{_ms(r['e2e_max_ms']):>9}"
                  f"{_ms(r['e2e_sent_p50_ms']):>9}{_ms(r['e2e_sent_p99_ms']):>9}{_ms(r['confirm_p99_ms']):>9}"
                  f"{_ms(r['send_lag_p50_ms']):>9}{_ms(r['send_lag_p99_ms']):>9}", file=out)
    for r in steps:
        if r.get("generator_bound"):
            print(f"{r['cluster']} step {shown_step(r['step'])}: GENERATOR-BOUND: {r['generator_note']}", file=out)
    for c in record.clusters:
        for st in c.steps:
            if st.status == STEP_CUT and st.window is not None:
                ran = (st.window[1] - st.window[0]) / 1e9
                print(f"{c.name} step {shown_step(st.step)}: {cut_text(st.duration_s, ran, st.cut_by)}", file=out)
            if st.measure_note and (measured := st.measured(record.warmup_s)) is not None:
                print(f"{c.name} step {shown_step(st.step)}: measured over {(measured[1] - measured[0]) / 1e9:.2f} s: "
                      f"the window {st.measure_note}", file=out)
            if st.status == STEP_NOT_RUN:
                print(f"{c.name} step {shown_step(st.step)}: not run ({st.cut_by} before it started)", file=out)
    stale = {c["cluster"]: c["stale"] for c in (reduced.clusters if reduced is not None else [])}
    for name, counts in cluster_totals(record.clusters).items():
        lost_conn = f", connection lost {counts.connection_lost:,}" if counts.connection_lost else ""
        stale_note = (f"; stale {stale[name]:,} (left in the queue by an earlier run or stage attempt: ignored)"
                      if stale.get(name) else "")
        print(f"{name}, whole run (every message, warm-up and start included): published {counts.published:,}, "
              f"confirmed {counts.confirmed:,}, consumed {counts.consumed:,} (deliveries: redeliveries and re-reads "
              f"count again), nacked {counts.nacked:,}, returned {counts.returned:,}, confirm timeouts "
              f"{counts.timeout:,}{lost_conn}{stale_note}", file=out)
        mine = [r for r in steps if r["cluster"] == name]
        if mine:
            print(f"{name}, measured messages (due inside a step's measurement window; the figures above the verdict): "
                  f"{sum(r['published'] for r in mine):,}, consumed {sum(r['consumed_unique'] for r in mine):,} of "
                  f"{sum(r['expected'] for r in mine):,} expected copies (each once), lost {sum(r['lost'] for r in mine):,}, duplicated {sum(r['duplicated'] for r in mine):,}"
                  f", reordered {sum(r['reordered'] for r in mine):,}", file=out)
        filtering = bool((record.workload.get("consumer") or {}).get("filter"))
        filtered = stream_filter_line(name, next(c for c in record.clusters if c.name == name), counts) \
            if filtering else None
        if filtered:
            print(filtered, file=out)
        print_rereads(name, reduced, out)          # where the copies in "consumed" went
        print_unroutable(name, reduced, out)
    for c in record.clusters:
        note = restarted_stage_note(c.name, c.stage_attempts)
        if note is not None:
            print(note, file=out)
        print_reconnects(c, out)
        reported = [r.connect for r in c.task_results if r.connect is not None]
        if reported:
            print(summary_line(c.name, ConnectStats.total(reported)), file=out)
        row: dict[str, Any] = next((r for r in (reduced.clusters if reduced is not None else []) if r["cluster"] == c.name), {})
        line = mem_line(c.name, row.get("broker_mem_per_connection_kib"), row.get("broker_conn_mem_per_connection_kib"))
        if line is not None:
            print(line, file=out)
        for line in churn_lines([r for r in steps if r["cluster"] == c.name]):
            print(line, file=out)
    faults = list(getattr(reduced, "faults", None) or [])
    for f in faults:
        print(fault_line(f, with_cluster=len({x["cluster"] for x in faults}) > 1), file=out)
    if reduced is None:
        print(f"per-step figures: rbench reduce {run_dir}", file=out)
    else:
        from rbench.reduce.verdict import lines

        for line in lines(reduced.leaderboard):
            print(line, file=out)
        print(f"report: {reduced.report}", file=out)
