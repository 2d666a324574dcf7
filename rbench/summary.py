"""The one-screen summary `rbench run` prints when a run ends.

Computed on the driver with pyarrow and numpy straight from the run's committed
Parquet parts (exact percentiles, no Spark job), because a person who just ran a
workload wants the answer at once. Runs too large for one process get a pointer to
`rbench reduce`, which computes the same figures (and more) on Spark.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pyarrow.compute  # noqa: F401  (pa.compute)
import pyarrow as pa
import pyarrow.parquet as pq

from rbench.conventions import shown_step

MAX_ROWS = 20_000_000
QUANTILES = (0.5, 0.99)


def committed_parts(run_dir: Path, kind: str) -> list[Path]:
    """Part files of the highest committed attempt of every (cluster, task)."""
    parts: list[Path] = []
    for task_dir in sorted((run_dir / kind).glob("*/task-*")):
        attempts = [a for a in task_dir.glob("attempt-*") if (a / "_COMMITTED").exists()]
        if attempts:
            best = max(attempts, key=lambda a: int(a.name.split("-", 1)[1]))
            parts.extend(sorted(best.glob("part-*.parquet")))
    return parts


def read_kind(run_dir: Path, kind: str, columns: list[str]) -> pa.Table | None:
    parts = committed_parts(run_dir, kind)
    if not parts:
        return None
    return pa.concat_tables([pq.read_table(p, columns=columns) for p in parts])


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.2f}"


def step_rows(run_dir: Path) -> list[dict[str, Any]]:
    """Per (cluster, step): target, sent/s, confirmed/s, received/s, latency percentiles, loss."""
    info = json.loads((run_dir / "run.json").read_text())
    warmup_ns = int(info.get("warmup_s", 0) * 1e9)
    pub = read_kind(run_dir, "published", ["cluster", "producer", "seq", "t_intended", "t_sent", "t_confirmed", "outcome"])
    con = read_kind(run_dir, "consumed", ["cluster", "producer", "seq", "t_intended", "t_sent", "t_received"])
    rows = []
    for c in info["clusters"]:
        pc = pub.filter(pa.compute.equal(pub["cluster"], c["name"])) if pub is not None else None
        cc = con.filter(pa.compute.equal(con["cluster"], c["name"])) if con is not None else None
        p_int = pc["t_intended"].to_numpy() if pc is not None else np.empty(0, np.int64)
        c_int = cc["t_intended"].to_numpy() if cc is not None else np.empty(0, np.int64)
        c_recv = cc["t_received"].to_numpy() if cc is not None else np.empty(0, np.int64)
        outcome = np.asarray(pc["outcome"].to_numpy(zero_copy_only=False)) if pc is not None else np.empty(0, object)
        for s in c["steps"]:
            if s.get("start_ns") is None:
                continue
            lo, hi = s["start_ns"] + warmup_ns, s["end_ns"]
            seconds = (hi - lo) / 1e9
            pm = (p_int >= lo) & (p_int < hi)
            cm = (c_int >= lo) & (c_int < hi)
            e2e = (c_recv[cm] - c_int[cm]).astype(np.float64)
            row = {"cluster": c["name"], "step": s["step"], "target": s.get("target_rate"), "window_s": seconds,
                   "sent_per_s": pm.sum() / seconds, "received_per_s": cm.sum() / seconds,
                   "confirmed_per_s": (outcome[pm] == "ack").sum() / seconds,
                   "nacked": int((outcome[pm] == "nack").sum()), "returned": int((outcome[pm] == "returned").sum()),
                   "timeout": int((outcome[pm] == "timeout").sum())}
            for q in QUANTILES:
                row[f"e2e_p{q * 100:g}"] = float(np.quantile(e2e, q)) if e2e.size else None
            row["e2e_max"] = float(e2e.max()) if e2e.size else None
            if pc is not None:
                conf = (pc["t_confirmed"].to_numpy(zero_copy_only=False) - pc["t_sent"].to_numpy()) if pc.num_rows else np.empty(0)
                conf = np.asarray(conf, dtype=np.float64)[pm]
                conf = conf[~np.isnan(conf)]
                row["confirm_p50"] = float(np.quantile(conf, 0.5)) if conf.size else None
                row["confirm_p99"] = float(np.quantile(conf, 0.99)) if conf.size else None
            rows.append(row)
        # loss and duplicates over the whole run of this cluster
        if pc is not None and cc is not None:
            sent_keys = (pc["producer"].to_numpy().astype(np.int64) << 32) | pc["seq"].to_numpy()
            delivered_ok = np.isin(outcome, ["ack", "unconfirmed"])
            # messages left in a queue by an earlier run carry stamps from before this run's t0: not ours
            ours = c_int >= (c.get("t0_ns") or 0)
            got_keys = ((cc["producer"].to_numpy().astype(np.int64) << 32) | cc["seq"].to_numpy())[ours]
            uniq, counts = np.unique(got_keys, return_counts=True)
            lost = int((~np.isin(sent_keys[delivered_ok], uniq)).sum())
            dup = int((counts - 1).sum())
            for r in rows:
                if r["cluster"] == c["name"]:
                    r["lost_run"], r["duplicated_run"], r["stale_run"] = lost, dup, int((~ours).sum())
    return rows


def print_summary(run_dir: Path, session: Any = None, reduce: bool = True, out: TextIO = sys.stdout) -> None:
    info = json.loads((run_dir / "run.json").read_text())
    total = sum(r.get("published_rows", 0) + r.get("consumed_rows", 0)
                for c in info["clusters"] for r in c.get("task_results", []))
    print(f"\nrun {info['run_id']}: {info['status']}  ({run_dir})", file=out)
    if total > MAX_ROWS:
        print(f"{total:,} samples: too many for the quick summary; run `rbench reduce {run_dir}`", file=out)
        return
    rows = step_rows(run_dir)
    warm = info.get("warmup_s", 0)
    print(f"per step, after a {warm:g} s warm-up; rates = messages whose intended send time falls in the window ÷ "
          f"window; latency in ms: end-to-end = received − intended (coordinated-omission corrected), "
          f"confirm = confirmed − sent; exact percentiles over every sample", file=out)
    head = f"{'cluster':<12}{'step':>5}{'target/s':>10}{'sent/s':>10}{'conf/s':>10}{'recv/s':>10}{'e2e p50':>9}{'e2e p99':>9}{'e2e max':>9}{'conf p99':>9}"
    print(head, file=out)
    for r in rows:
        target = "max" if r["target"] is None else f"{r['target']:,.0f}"
        print(f"{r['cluster']:<12}{shown_step(r['step']):>5}{target:>10}{r['sent_per_s']:>10,.0f}{r['confirmed_per_s']:>10,.0f}"
              f"{r['received_per_s']:>10,.0f}{_ms(r['e2e_p50']):>9}{_ms(r['e2e_p99']):>9}{_ms(r['e2e_max']):>9}"
              f"{_ms(r.get('confirm_p99')):>9}", file=out)
    for c in info["clusters"]:
        r = next((x for x in rows if x["cluster"] == c["name"] and "lost_run" in x), None)
        counts = {k: sum(t.get(k, 0) for t in c.get("task_results", [])) for k in ("published", "confirmed", "consumed", "nacked", "returned", "timeout")}
        extra = f", lost {r['lost_run']}, duplicated {r['duplicated_run']}" if r else ""
        if r and r["stale_run"]:
            extra += f", stale {r['stale_run']:,} (left in the queue by an earlier run: ignored)"
        print(f"{c['name']}: published {counts['published']:,}, confirmed {counts['confirmed']:,}, consumed {counts['consumed']:,}, "
              f"nacked {counts['nacked']}, returned {counts['returned']}, confirm timeouts {counts['timeout']}{extra}", file=out)
    if reduce and session is not None:
        _reduce(run_dir, session, out)


def _reduce(run_dir: Path, session: Any, out: TextIO) -> None:
    """Full report via the reduce job, when it is installed in this build."""
    try:
        from rbench.reduce.job import reduce_runs  # type: ignore[import-not-found]
    except ImportError:
        return
    report = reduce_runs([run_dir], session=session)
    print(f"report: {report}", file=out)
