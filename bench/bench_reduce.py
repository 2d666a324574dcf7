"""Reduce benchmark: the whole per-step reduce (driver passes and Spark passes) beside DuckDB, same files.

    .venv/bin/python bench/bench_reduce.py [--rows 50000000] [--dir /tmp/rbench-bench-reduce] [--keep]
                                           [--engines driver,duckdb[,spark]]

Writes a synthetic run (tests/synthetic_run.py; docs/parquet.md layout) of ``--rows`` samples: about half
published, half consumed rows, 3 clusters × 6 steps, 100 producers on 10 queues, with nacks, returns,
confirm timeouts, losses, duplicates and reorders injected; generated one (cluster, step) at a time.
Then each engine runs in its own process (so each one's peak RSS is its own, read from getrusage):

* ``driver``: rbench's per-step reduce with its passes on the driver (rbench.reduce.small; the memory
  budget set high enough to choose it): listing and footer checks, the counting pass, the timeline
  fetch, the message pass and the step latencies (rbench.reduce.stats.reduce_samples);
* ``spark``: the same with every pass in Spark local[2] (RBENCH_REDUCE_DRIVER_MEMORY=0); the session's
  start-up is timed apart and left out;
* ``duckdb``: a DuckDB SQL script (threads=2, like local[2]) computing the same per-step figures on the
  same part files: achieved rates (rows in the measurement window), exact percentiles (quantile_cont)
  and max of e2e, e2e from sent, confirm latency and send lateness, measured published and deliveries,
  distinct deliveries, lost, duplicated and reordered.

The figures of every engine are compared per (cluster, step): counts must be equal, percentiles equal to
1e-9 relative. Seconds are wall clock from the first file read to the figures in memory (imports and
Spark's start-up excluded). The table goes to stdout and bench/out/reduce.md; docs/reduce.md quotes it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from synthetic_run import SynthCluster, SynthSpec, make_run  # noqa: E402

PCTS = (0.5, 0.75, 0.95, 0.99, 0.999)
NAMES = ("p50", "p75", "p95", "p99", "p999")
LATENCIES = ("e2e", "e2e_sent", "confirm", "send_lag")
COUNTED = ("published_in_window", "confirmed_in_window", "consumed_in_window", "published", "deliveries",
           "consumed_unique", "lost", "duplicated", "reordered")
ENGINES = ("driver", "duckdb", "spark")
DUCK_MEMORY = "6GB"
DEFAULT_ENGINES = "driver,duckdb"     # spark at 50M rows takes many minutes on 2 cores: --engines driver,duckdb,spark


def spec_for(rows: int) -> SynthSpec:
    """A cluster-sizing-like run whose published + consumed rows come to about ``rows``."""
    rates = [50.0, 100.0, 150.0, 200.0, 250.0, 300.0]
    producers = 100
    clusters = [SynthCluster("qq-3x-m5large", 18_000.0), SynthCluster("qq-3x-m5xlarge", 28_000.0, instance_type="m5.xlarge"),
                SynthCluster("qq-5x-m5large", 1e9, nodes=5)]
    per_second = producers * sum(rates) * len(clusters)      # published rows per second of every step
    duration = max(0.5, rows / 2 / per_second)
    return SynthSpec(run_id="bench-reduce", clusters=clusters, rates=rates, durations_s=[duration] * len(rates),
                     producers=producers, queues=10, tasks=2, warmup_s=round(duration * 0.1, 3), keep_rows=False,
                     seed=11)


# --- one engine, in its own process ---

def _rbench_figures(run_dir: Path, engine: str) -> dict[str, Any]:
    from rbench.reduce import stats
    from rbench.reduce.load import load_samples

    if engine == "spark":
        os.environ[stats.DRIVER_MEMORY_ENV] = "0"
        from rbench.spark import local_session

        t = time.perf_counter()
        spark = local_session("local[2]", app_name="bench-reduce")
        spark.range(1).count()
        startup = time.perf_counter() - t
        session: Any = spark
    else:
        os.environ[stats.DRIVER_MEMORY_ENV] = "1000g"      # chosen whatever the budget: the driver path is measured
        startup = 0.0
        session = lambda: None                               # noqa: E731  (no Spark at all)
    t, cpu = time.perf_counter(), _cpu()
    samples = load_samples(session, [run_dir])
    assert stats.on_driver(samples) == (engine == "driver")
    steps, _timeline, _clusters, _faults = stats.reduce_samples(samples)
    seconds, cpu = time.perf_counter() - t, _cpu() - cpu
    rows = []
    for s in steps.to_pylist():
        row = {"cluster": s["cluster"], "step": s["step"], **{c: s[c] for c in COUNTED}}
        for m in LATENCIES:
            for n in (*NAMES, "max"):
                row[f"{m}_{n}"] = s[f"{m}_{n}_ms"]
        rows.append(row)
    return {"seconds": seconds, "cpu_s": cpu, "startup_s": startup, "rows": rows, "sample_rows": samples.rows,
            "largest_cluster_rows": max(samples.cluster_rows.values())}


DUCK_LOAD_PUB = """CREATE TEMP TABLE pub AS SELECT cluster, step, producer, seq, t_intended, t_sent, t_confirmed, outcome
    FROM read_parquet($pub)"""
# fresh deliveries only (stale ones, t_intended before the cluster's t0, are excluded from every figure)
DUCK_LOAD_CON = """CREATE TEMP TABLE con AS SELECT c.cluster, c.step, producer, queue, seq, t_intended, t_sent, t_received
    FROM read_parquet($con) c JOIN t0s USING (cluster) WHERE t_intended IS NULL OR t_intended >= t0"""
DUCK_SQL = """
WITH
  pub_m AS (SELECT p.* FROM pub p JOIN w USING (cluster, step) WHERE p.t_intended >= w.ms AND p.t_intended < w.e),
  con_m AS (SELECT c.* FROM con c JOIN w USING (cluster, step) WHERE c.t_intended >= w.ms AND c.t_intended < w.e),
  sent_w AS (SELECT w.cluster, w.step, count(*) AS n FROM pub p ASOF JOIN w ON p.cluster = w.cluster AND p.t_sent >= w.ms
             WHERE p.t_sent < w.e GROUP BY ALL),
  conf_w AS (SELECT w.cluster, w.step, count(*) AS n FROM (SELECT * FROM pub WHERE outcome = 'ack') p
             ASOF JOIN w ON p.cluster = w.cluster AND p.t_confirmed >= w.ms WHERE p.t_confirmed < w.e GROUP BY ALL),
  recv_w AS (SELECT w.cluster, w.step, count(*) AS n FROM con c ASOF JOIN w ON c.cluster = w.cluster
             AND c.t_received >= w.ms WHERE c.t_received < w.e GROUP BY ALL),
  pub_lat AS (SELECT cluster, step, count(*) AS published,
                     quantile_cont(t_confirmed - t_sent, $q) AS confirm_q, max(t_confirmed - t_sent) AS confirm_max,
                     quantile_cont(t_sent - t_intended, $q) AS lag_q, max(t_sent - t_intended) AS lag_max
              FROM pub_m GROUP BY ALL),
  con_lat AS (SELECT cluster, step, count(*) AS deliveries,
                     quantile_cont(t_received - t_intended, $q) AS e2e_q, max(t_received - t_intended) AS e2e_max,
                     quantile_cont(t_received - t_sent, $q) AS sent_q, max(t_received - t_sent) AS sent_max
              FROM con_m GROUP BY ALL),
  copies AS (SELECT cluster, step, count(*) AS consumed_unique, count(*) FILTER (WHERE n > 1) AS duplicated
             FROM (SELECT cluster, step, producer, seq, queue, count(*) AS n FROM con_m GROUP BY ALL) GROUP BY ALL),
  -- a loss: a measured ack/unconfirmed message no delivery (of a step with a window) of its cluster has
  lost AS (SELECT cluster, step, count(*) AS lost FROM
             (SELECT * FROM pub_m WHERE outcome IN ('ack', 'unconfirmed')) p
             ANTI JOIN (SELECT DISTINCT cluster, producer, seq FROM con SEMI JOIN w USING (cluster, step)) d
             USING (cluster, producer, seq) GROUP BY ALL),
  -- receive order per (producer, queue): t_received, ties by seq; a seq below the largest before it
  ranked AS (SELECT cluster, step, t_intended, seq < max(seq) OVER (PARTITION BY cluster, producer, queue
                    ORDER BY t_received, seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS late FROM con),
  reord AS (SELECT r.cluster, r.step, count(*) AS reordered FROM ranked r JOIN w USING (cluster, step)
            WHERE r.late AND r.t_intended >= w.ms AND r.t_intended < w.e GROUP BY ALL)
SELECT w.cluster, w.step, coalesce(sent_w.n, 0), coalesce(conf_w.n, 0), coalesce(recv_w.n, 0),
       coalesce(published, 0), coalesce(deliveries, 0), coalesce(consumed_unique, 0), coalesce(lost, 0),
       coalesce(duplicated, 0), coalesce(reordered, 0),
       e2e_q, e2e_max, sent_q, sent_max, confirm_q, confirm_max, lag_q, lag_max
FROM w LEFT JOIN sent_w USING (cluster, step) LEFT JOIN conf_w USING (cluster, step)
     LEFT JOIN recv_w USING (cluster, step) LEFT JOIN pub_lat USING (cluster, step) LEFT JOIN con_lat USING (cluster, step)
     LEFT JOIN copies USING (cluster, step) LEFT JOIN lost USING (cluster, step) LEFT JOIN reord USING (cluster, step)
ORDER BY w.cluster, w.step
"""


def _duck_figures(run_dir: Path) -> dict[str, Any]:
    import duckdb

    from rbench.reduce.load import committed_parts, read_run, window_rows

    meta = read_run(run_dir)
    files_pub, _ = committed_parts(meta, "published")
    files_con, _ = committed_parts(meta, "consumed")
    windows = window_rows([meta])
    t, cpu = time.perf_counter(), _cpu()
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    con.execute("SET preserve_insertion_order = false")
    # bounded like the driver's passes (their peak at 50M rows: ~6 GB), the rest spills: a shared 24 GiB machine
    con.execute(f"SET memory_limit = '{DUCK_MEMORY}'")
    con.execute(f"SET temp_directory = '{run_dir.parent / 'duckdb-tmp'}'")
    con.execute("CREATE TEMP TABLE w(cluster VARCHAR, step INTEGER, ms BIGINT, e BIGINT)")
    con.executemany("INSERT INTO w VALUES (?, ?, ?, ?)", [(r.cluster, r.step, r.meas_start_ns, r.end_ns) for r in windows])
    con.execute("CREATE TEMP TABLE t0s(cluster VARCHAR, t0 BIGINT)")
    con.executemany("INSERT INTO t0s VALUES (?, ?)", sorted({(r.cluster, r.t0_ns) for r in windows}))
    con.execute(DUCK_LOAD_PUB, {"pub": files_pub})
    con.execute(DUCK_LOAD_CON, {"con": files_con})
    got = con.execute(DUCK_SQL, {"q": list(PCTS)}).fetchall()
    seconds, cpu = time.perf_counter() - t, _cpu() - cpu
    rows = []
    for r in got:
        row = {"cluster": r[0], "step": r[1], **dict(zip(COUNTED, r[2:11], strict=True))}
        for m, (qs, mx) in zip(("e2e", "e2e_sent", "confirm", "send_lag"), ((r[11], r[12]), (r[13], r[14]), (r[15], r[16]),
                                                                           (r[17], r[18])), strict=True):
            for i, n in enumerate(NAMES):
                row[f"{m}_{n}"] = None if qs is None else qs[i] / 1e6
            row[f"{m}_max"] = None if mx is None else mx / 1e6
        rows.append(row)
    return {"seconds": seconds, "cpu_s": cpu, "startup_s": 0.0, "rows": rows}


def _cpu() -> float:
    """CPU seconds of this process, every thread (user + system): what the work cost whatever else runs."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(engine: str, run_dir: Path, out: Path) -> int:
    load_before = os.getloadavg()[0]
    result = _duck_figures(run_dir) if engine == "duckdb" else _rbench_figures(run_dir, engine)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["loadavg"] = [load_before, os.getloadavg()[0]]     # the machine's 1-min load: wall seconds depend on it
    out.write_text(json.dumps(result))
    return 0


# --- the parent: data, engines, comparison, table ---

def _compare(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[int, float]:
    """(count mismatches, worst relative percentile difference) between two engines' rows."""
    assert [(r["cluster"], r["step"]) for r in a] == [(r["cluster"], r["step"]) for r in b], "different steps"
    bad, worst = 0, 0.0
    for x, y in zip(a, b, strict=True):
        bad += sum(x[c] != y[c] for c in COUNTED)
        for m in LATENCIES:
            for n in (*NAMES, "max"):
                u, v = x[f"{m}_{n}"], y[f"{m}_{n}"]
                if (u is None) != (v is None):
                    bad += 1
                elif u is not None:
                    worst = max(worst, abs(u - v) / max(abs(v), 1e-9))
    return bad, worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000_000, help="total samples (about half published, half consumed)")
    ap.add_argument("--dir", default="/tmp/rbench-bench-reduce", help="where the synthetic run goes")
    ap.add_argument("--keep", action="store_true", help="reuse the data if present and keep it afterwards")
    ap.add_argument("--engines", default=DEFAULT_ENGINES, help=f"comma-separated, of {', '.join(ENGINES)}")
    ap.add_argument("--table-only", action="store_true",
                    help="with --keep: an engine whose result file is there is not run again, the table is re-written")
    ap.add_argument("--engine", choices=ENGINES, help=argparse.SUPPRESS)       # a child process
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    root = Path(args.dir)
    spec = spec_for(args.rows)
    run_dir = root / spec.run_id
    if args.engine:
        return child(args.engine, run_dir, Path(args.result))
    engines = [e for e in args.engines.split(",") if e]
    unknown = set(engines) - set(ENGINES)
    if unknown:
        ap.error(f"--engines: unknown {', '.join(sorted(unknown))}; expected some of {', '.join(ENGINES)}")
    t = time.perf_counter()
    if not (args.keep and (run_dir / "run.json").is_file()):
        shutil.rmtree(root, ignore_errors=True)
        made = make_run(root, spec)
        (root / "generated.json").write_text(json.dumps({"seconds": time.perf_counter() - t}))
        print(f"generated {made.rows_written:,} rows in {time.perf_counter() - t:.1f} s", flush=True)
    gen_s = json.loads((root / "generated.json").read_text())["seconds"] if (root / "generated.json").is_file() else float("nan")
    results: dict[str, dict[str, Any]] = {}
    for engine in engines:
        out = root / f"result-{engine}.json"
        if not (args.table_only and out.is_file()):
            subprocess.run([sys.executable, __file__, "--rows", str(args.rows), "--dir", str(root), "--engine", engine,
                            "--result", str(out)], check=True)
        results[engine] = json.loads(out.read_text())
        r = results[engine]
        print(f"{engine}: {r['seconds']:.1f} s ({r['cpu_s']:.1f} CPU s), peak RSS {r['peak_rss_mb']:,.0f} MB", flush=True)
    write_table(args, spec, results, gen_s)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def write_table(args: argparse.Namespace, spec: SynthSpec, results: dict[str, dict[str, Any]], gen_s: float) -> None:
    import duckdb
    import pyspark

    some = next((r for r in results.values() if "sample_rows" in r), None)
    base = results.get("duckdb")
    what = {"driver": "rbench per-step reduce, passes on the driver (pyarrow + numpy, a cluster at a time)",
            "spark": "rbench per-step reduce, passes in Spark local[2] (session start-up apart)",
            "duckdb": "DuckDB SQL script, threads=2 (the same figures, quantile_cont)"}
    lines = [
        "# bench_reduce: the whole per-step reduce, rbench (driver, Spark) beside DuckDB",
        "",
        f"command: `.venv/bin/python bench/bench_reduce.py --rows {args.rows} --engines {args.engines}`  ",
        f"host: {platform.node()}, {os.cpu_count()} cpus (shared), Python {platform.python_version()}, "
        f"pyspark {pyspark.__version__}, duckdb {duckdb.__version__}  ",
        (f"data: {some['sample_rows']:,} samples (published + consumed; largest cluster {some['largest_cluster_rows']:,}), "
         if some else "data: ")
        + f"{len(spec.clusters)} clusters × {len(spec.rates)} steps, {spec.producers} producers, {spec.queues} queues; "
        + f"generated in {gen_s:.1f} s  ",
        "figures per (cluster, step): rows in the measurement window (publish, confirm, consume rates), measured "
        "published and deliveries, distinct deliveries, lost, duplicated, reordered; exact p50 p75 p95 p99 p99.9 and max "
        "of e2e, e2e from sent, confirm latency, send lateness  ",
        "seconds: wall clock from the first file read to the figures in memory, each engine in its own process "
        "(imports and Spark start-up left out); CPU s: user + system seconds of that process over the same span (every "
        "thread; Spark: the Python driver only, not the JVM and its workers); peak RSS: getrusage of that process. "
        f"DuckDB: memory_limit {DUCK_MEMORY}, spilling to disk past it",
        "",
        "| engine | what | seconds | × DuckDB | CPU s | × DuckDB | peak RSS MB | figures vs DuckDB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for engine, r in results.items():
        ratio = f"{r['seconds'] / base['seconds']:.2f}" if base else "–"
        cpu_ratio = f"{r['cpu_s'] / base['cpu_s']:.2f}" if base else "–"
        if base and engine != "duckdb":
            bad, worst = _compare(r["rows"], base["rows"])
            agree = f"{len(r['rows'])} steps: {bad} counts differ, percentiles within {worst:.1e}"
        else:
            agree = "(reference)" if engine == "duckdb" else "–"
        lines.append(f"| {engine} | {what[engine]} | {r['seconds']:.1f} | {ratio} | {r['cpu_s']:.1f} | {cpu_ratio} | "
                     f"{r['peak_rss_mb']:,.0f} | {agree} |")
    if "spark" in results:
        lines.append(f"| spark | session start-up (not in the seconds above) | {results['spark']['startup_s']:.1f} | | | | | |")
    loads = [f"{e} {r['loadavg'][0]:.1f} → {r['loadavg'][1]:.1f}" for e, r in results.items() if "loadavg" in r]
    if loads:
        lines += ["", f"machine load (1-min load average before → after each engine, {os.cpu_count()} cpus): {', '.join(loads)}"]
    if "driver" in results and "spark" in results:
        bad, worst = _compare(results["driver"]["rows"], results["spark"]["rows"])
        lines += ["", f"driver vs Spark passes: {bad} counts differ, percentiles within {worst:.1e}"]
    lines.append("")
    text = "\n".join(lines)
    print(text, flush=True)
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "reduce.md").write_text(text)


if __name__ == "__main__":
    sys.exit(main())
