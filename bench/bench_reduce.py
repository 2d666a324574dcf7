"""Reduce benchmark: exact per-step latency percentiles, Spark local[2] vs DuckDB, same files.

    .venv/bin/python bench/bench_reduce.py [--rows 50000000] [--dir /tmp/rbench-bench] [--keep]

Writes a synthetic run (tests/synthetic_run.py; docs/parquet.md layout) of ``--rows``
samples: half published rows, half consumed rows (3 clusters × 6 steps), generated one
(cluster, step) chunk at a time so memory stays at a few hundred MB. Then, in one process:

* Spark session start-up (reported apart, not in the ratio);
* Spark: exact percentiles (p50 p75 p95 p99 p99.9 + max) of e2e, sent→received and confirm
  latency per (cluster, step) over measured messages — rbench.reduce.stats.latency_percentiles
  (numpy.partition in one Spark task per cluster and side);
* DuckDB (threads=2, like local[2]): the same figures with quantile_cont on the same files;
* the ratio Spark / DuckDB (goal: ≤ 2), after checking both give the same numbers;
* for information: the whole `rbench reduce` (all stats, leaderboards, report) on Spark.

The table is printed and written to bench/out/reduce.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from synthetic_run import SynthCluster, SynthSpec, make_run  # noqa: E402

PCTS = [0.5, 0.75, 0.95, 0.99, 0.999]
NAMES = ["p50", "p75", "p95", "p99", "p999"]


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


def duck_percentiles(files_pub: list[str], files_con: list[str], windows: list[tuple]) -> tuple[list[tuple], float]:
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads TO 2")
    con.execute("CREATE TABLE w(run_id VARCHAR, cluster VARCHAR, step INTEGER, meas_start BIGINT, end_ns BIGINT)")
    con.executemany("INSERT INTO w VALUES (?, ?, ?, ?, ?)", windows)
    q = "[" + ", ".join(str(p) for p in PCTS) + "]"
    sql = f"""
    WITH c AS (
      SELECT c.run_id, c.cluster, c.step,
             quantile_cont(t_received - t_intended, {q}) AS e2e, max(t_received - t_intended) AS e2e_max,
             quantile_cont(t_received - t_sent, {q}) AS e2e_sent, max(t_received - t_sent) AS e2e_sent_max
      FROM read_parquet($con) c JOIN w USING (run_id, cluster, step)
      WHERE t_intended >= w.meas_start AND t_intended < w.end_ns
      GROUP BY ALL),
    p AS (
      SELECT p.run_id, p.cluster, p.step,
             quantile_cont(t_confirmed - t_sent, {q}) AS confirm, max(t_confirmed - t_sent) AS confirm_max
      FROM read_parquet($pub) p JOIN w USING (run_id, cluster, step)
      WHERE t_intended >= w.meas_start AND t_intended < w.end_ns
      GROUP BY ALL)
    SELECT * FROM c FULL OUTER JOIN p USING (run_id, cluster, step) ORDER BY run_id, cluster, step
    """
    t = time.perf_counter()
    rows = con.execute(sql, {"con": files_con, "pub": files_pub}).fetchall()
    return rows, time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=50_000_000, help="total samples (half published, half consumed)")
    ap.add_argument("--dir", default="/tmp/rbench-bench-reduce", help="where the synthetic run goes")
    ap.add_argument("--keep", action="store_true", help="reuse the data if present and keep it afterwards")
    ap.add_argument("--no-full", action="store_true", help="skip the full `rbench reduce` timing")
    args = ap.parse_args()

    root = Path(args.dir)
    spec = spec_for(args.rows)
    run_dir = root / spec.run_id
    t = time.perf_counter()
    if not (args.keep and (run_dir / "run.json").is_file()):
        shutil.rmtree(root, ignore_errors=True)
        made = make_run(root, spec)
        gen_s = time.perf_counter() - t
        print(f"generated {made.rows_written:,} rows in {gen_s:.1f} s", flush=True)
    else:
        gen_s = float("nan")
    from rbench.reduce.load import committed_parts, read_run

    meta = read_run(run_dir)
    files_pub, _ = committed_parts(meta, "published")
    files_con, _ = committed_parts(meta, "consumed")
    import pyarrow.parquet as pq

    n_pub = sum(pq.read_metadata(f).num_rows for f in files_pub)
    n_con = sum(pq.read_metadata(f).num_rows for f in files_con)
    windows = [(meta.run_id, c.name, s.step, int(s.window[0] + meta.warmup_s * 1e9), s.window[1])
               for c in meta.clusters for s in c.steps if s.window is not None]

    duck_rows, duck_s = duck_percentiles(files_pub, files_con, windows)
    print(f"duckdb: {duck_s:.2f} s", flush=True)

    t = time.perf_counter()
    from rbench.spark import local_session

    spark = local_session("local[2]", app_name="bench-reduce")
    spark.range(1).count()
    start_s = time.perf_counter() - t
    print(f"spark session: {start_s:.1f} s", flush=True)
    from rbench.reduce.load import load_samples
    from rbench.reduce.stats import latency_percentiles

    t = time.perf_counter()
    samples = load_samples(spark, [run_dir])
    spark_rows = latency_percentiles(samples)
    spark_s = time.perf_counter() - t
    print(f"spark: {spark_s:.2f} s", flush=True)

    # same numbers? (both interpolate linearly between closest ranks)
    worst = 0.0
    for d, s in zip(duck_rows, spark_rows):
        assert (d[0], d[1], d[2]) == (s["run_id"], s["cluster"], s["step"]), (d[:3], s)
        for i, name in enumerate(NAMES):
            for dv, col in ((d[3][i], f"e2e_{name}_ms"), (d[5][i], f"e2e_sent_{name}_ms"), (d[7][i], f"confirm_{name}_ms")):
                worst = max(worst, abs(dv / 1e6 - s[col]) / max(abs(s[col]), 1e-9))
    agree = f"{len(spark_rows)} steps, 15 percentiles each, max relative difference {worst:.1e}"
    print(f"agreement: {agree}", flush=True)

    def write_table(full_s: float | None) -> None:
        ratio = spark_s / duck_s
        import duckdb
        import pyspark

        lines = [
            "# bench_reduce: exact per-step latency percentiles, Spark vs DuckDB",
            "",
            f"command: `.venv/bin/python bench/bench_reduce.py --rows {args.rows}`  ",
            f"host: {platform.node()}, {os.cpu_count()} cpus (shared), Python {platform.python_version()}, "
            f"pyspark {pyspark.__version__}, duckdb {duckdb.__version__}  ",
            f"data: {n_pub:,} published + {n_con:,} consumed rows = {n_pub + n_con:,} samples, {len(files_pub) + len(files_con)} part files, "
            f"{len(spec.clusters)} clusters × {len(spec.rates)} steps; generated in {gen_s:.1f} s  ",
            "query: per (cluster, step), measured messages only: exact p50 p75 p95 p99 p99.9 and max of "
            "t_received−t_intended, t_received−t_sent (consumed) and t_confirmed−t_sent (published)  ",
            f"agreement: {agree}",
            "",
            "| engine | what | seconds |",
            "|---|---|---|",
            f"| duckdb (threads=2) | exact percentiles, quantile_cont | {duck_s:.2f} |",
            f"| spark local[2] | exact percentiles, numpy.partition per cluster task (incl. listing + footer check) | {spark_s:.2f} |",
            f"| spark local[2] | session start-up (not in the ratio) | {start_s:.2f} |",
        ]
        if full_s is not None:
            lines.append(f"| spark local[2] | full `rbench reduce` (all stats, reorders, losses, timeline, leaderboards, report) | {full_s:.2f} |")
        lines += ["", f"**ratio spark / duckdb = {ratio:.2f}×** (goal ≤ 2×)", ""]
        text = "\n".join(lines)
        print(text, flush=True)
        out = ROOT / "bench" / "out"
        out.mkdir(parents=True, exist_ok=True)
        (out / "reduce.md").write_text(text)

    write_table(None)
    full_s = None
    if not args.no_full:
        from rbench.reduce.job import reduce_runs

        t = time.perf_counter()
        reduce_runs([run_dir], session=spark, out=root / "report")
        full_s = time.perf_counter() - t
        print(f"spark full reduce: {full_s:.1f} s", flush=True)

    if full_s is not None:
        write_table(full_s)
    spark.stop()
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
