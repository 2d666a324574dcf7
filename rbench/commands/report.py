"""`rbench report RUN_DIR|DIR`: re-render leaderboard.md and report.html from a reduce's output, without Spark."""
from __future__ import annotations

import argparse
from pathlib import Path

from rbench.errors import SinkError

HELP = "Re-render report.html and leaderboard.md from the steps.parquet a reduce wrote (no Spark)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("report_dir", help="a reduced run directory (RUN_DIR), a reduce output (RUN_DIR/report, --out DIR), "
                                           "or a `rbench scalability` run directory")


def run(args: argparse.Namespace) -> int:
    from rbench.report.render import rerender

    out = Path(args.report_dir)
    if (out / "scalability.parquet").is_file():          # a `rbench scalability` run directory
        from rbench.scenarios.scalability.output import render

        print(f"report: {render(out)}")
        return 0
    names = ("steps.parquet", "timeline.parquet", "leaderboard.json")
    if not (out / names[0]).is_file() and (out / "report" / names[0]).is_file():
        out = out / "report"                  # a run directory: its reduce wrote RUN_DIR/report
    missing = [n for n in names if not (out / n).is_file()]
    if missing:
        if not out.is_dir():
            raise SinkError(f"{out}: no such directory; expected a run directory or a reduce output")
        hint = f"run `rbench reduce {out}` first" if (out / "run.json").is_file() else \
            "expected a run directory (RUN_DIR, reduced) or a reduce output (RUN_DIR/report, --out DIR)"
        raise SinkError(f"{out}: no reduce output here ({', '.join(missing)} missing); {hint}")
    try:
        path = rerender(out)
    except (OSError, ValueError, KeyError) as exc:
        raise SinkError(f"{out}: cannot re-render ({exc})") from None
    print(f"report: {path}")
    return 0
