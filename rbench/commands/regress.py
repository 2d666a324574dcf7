"""`rbench regress`: is tonight worse than the nights before? Exit 1 on a regression, 4 when it cannot tell yet.

Method, thresholds and false-alarm rate: docs/history.md. Thresholds come from the
workload's `regress:` section (as tonight's run recorded it) and the flags below.
"""
from __future__ import annotations

import argparse
from pathlib import Path

HELP = ("Check tonight's run against the history (gate + change points); exit 1 on a regression, "
        "4 when some series have too few nights to judge.")


def _fraction(text: str) -> float:
    text = text.strip()
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction or a percentage (0.03 or 3%), got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--history", default=None, help="history directory (default $RBENCH_HISTORY)")
    parser.add_argument("--workload", default=None, help="workload name (default: the only one in the history)")
    parser.add_argument("--run", default=None, help="the run to judge (default: the latest night's latest run)")
    parser.add_argument("--metrics", default=None,
                        help="comma-separated steps.parquet columns (default consume_rate,publish_rate,confirm_rate,"
                             "e2e_p50_ms,e2e_p95_ms,e2e_p99_ms,confirm_p99_ms)")
    parser.add_argument("--alpha", type=float, default=None, help="gate false-alarm rate per series per night (default 0.01)")
    parser.add_argument("--change-point-alpha", type=float, default=None, help="change-point permutation level (default 0.01)")
    parser.add_argument("--baseline-nights", type=int, default=None, help="at most this many baseline nights (default 30)")
    parser.add_argument("--recent-nights", type=int, default=None, help="tonight and the nights before it tested together (default 3)")
    parser.add_argument("--min-throughput-drop", type=_fraction, default=None, help="smallest drop that counts (default 3%%)")
    parser.add_argument("--min-latency-rise", type=_fraction, default=None, help="smallest latency rise that counts (default 10%%)")
    parser.add_argument("--any-hash", action="store_true", help="compare with nights of other workload hashes too")
    parser.add_argument("--out", default=None, help="where regress.md and regress.html go (default HISTORY/regress/<night>-<run>)")


def run(args: argparse.Namespace) -> int:
    from rbench.history import summary
    from rbench.history.regress import analyse, thresholds_from
    from rbench.history.store import history_dir, pick_workload, read_steps

    history = history_dir(args.history)
    workload = pick_workload(history, args.workload)
    table = read_steps(history, workload)
    rows = table.select([c for c in ("run_id", "night", "started_at", "regress") if c in table.schema.names]).to_pylist()
    tonight = args.run or max(rows, key=lambda r: (str(r["night"]), str(r.get("started_at") or ""), r["run_id"]))["run_id"]
    section = next((r.get("regress") for r in rows if r["run_id"] == tonight), None)
    overrides = {"alpha": args.alpha, "change_point_alpha": args.change_point_alpha, "baseline_nights": args.baseline_nights,
                 "recent_nights": args.recent_nights, "min_throughput_drop": args.min_throughput_drop,
                 "min_latency_rise": args.min_latency_rise,
                 "metrics": [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None}
    result = analyse(table, workload, thresholds_from(section, overrides), run_id=args.run or tonight, any_hash=args.any_hash)
    out = Path(args.out) if args.out else history / "regress" / f"{result.tonight['night']}-{result.tonight['run_id']}"
    md, page = summary.write(result, out)
    print(summary.markdown(result))
    print(f"summary: {md}  {page}")
    return result.exit_code
