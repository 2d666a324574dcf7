"""`rbench report DIR`: re-render leaderboard.md and report.html from a reduce's output, without Spark."""
from __future__ import annotations

import argparse
from pathlib import Path

from rbench.errors import SinkError

HELP = "Re-render report.html and leaderboard.md from the steps.parquet a reduce wrote (no Spark)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("report_dir", help="a reduce output directory (RUN_DIR/report or --out DIR), "
                                           "or a `rbench scalability` run directory")


def run(args: argparse.Namespace) -> int:
    from rbench.report.render import rerender

    out = Path(args.report_dir)
    if (out / "scalability.parquet").is_file():          # a `rbench scalability` run directory
        from rbench.scenarios.scalability.output import render

        print(f"report: {render(out)}")
        return 0
    needed = [out / n for n in ("steps.parquet", "timeline.parquet", "leaderboard.json")]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        raise SinkError(f"{out}: not a reduce output ({', '.join(missing)} missing); run `rbench reduce` first")
    try:
        path = rerender(out)
    except (OSError, ValueError, KeyError) as exc:
        raise SinkError(f"{out}: cannot re-render ({exc})") from None
    print(f"report: {path}")
    return 0
