"""How long `rbench perftest` takes from the command to its first message, stage by stage (issue 30).

Runs ``rbench perftest -x 1 -y 1 -a -s 12 -z SECONDS --timings --no-reduce`` on the local broker
(local[*] master) --rounds times, each a fresh process, and reads the `--timings` table it prints.
Every instant is counted from the moment this script launched the command, so a checkout whose
table starts after its imports (before `rbench.proctime`) is measured on the same footing: the
command's "rbench: run … →" line, printed right after its "run planned" mark, is timestamped here
as it arrives and ties the table's clock to the launch (the offset is printed). Writes the medians
(and ranges) to bench/out/startup.md.

``--root DIR`` runs another checkout's rbench (the commit before a change, built in place) in the
same rounds, alternating with this one, as the "before" column. ``--reduce`` keeps the reduce
(the start-up table does not depend on it; it costs minutes on a busy 2-core machine).

    .venv/bin/python bench/bench_startup.py --rounds 3 --seconds 30 --root /tmp/before
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# the stages shown, in order: (row name, the --timings labels that mean it, old and new wording)
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("Python started, rbench imported", ("rbench imported, options read", "command started")),
    ("brokers probed (facts, limits)", ("brokers probed",)),
    ("JVM listening (its gateway's port written)", ("JVM listening (its gateway's port written)",)),
    ("JVM started (py4j gateway answers)", ("JVM started (py4j gateway answers)",)),
    ("Python daemon pre-started, runtime imported",
     ("Python daemon ready (pre-started beside the JVM: runtime imported)",)),
    ("Spark ready (context; before: session)", ("SparkContext ready", "Spark session ready")),
    ("run planned, run.json written", ("run planned, run.json written",)),
    ("stage submitted to Spark", ("default: stage submitted to Spark",)),
    ("Spark launched its Python daemon", ("Spark launched its Python daemon (the process started)",)),
    ("daemon handed to the pre-started one", ("Spark's daemon handed its pipes to the pre-started one",)),
    ("worker process started (daemon fork)", ("default: worker process started (last task)",)),
    ("task started (worker has the plan)", ("default: task started (last task)",)),
    ("connected", ("default: connected (last task)",)),
    ("declared", ("default: declared (last task)",)),
    ("consumers and publishers ready", ("default: consumers and publishers ready (last task)",)),
    ("first send (t0: first message due)", ("default: load started (t0, first message due)",)),
]
FIRST_SEND = "first send (t0: first message due)"
ROW = re.compile(r"^\s*(-?\d+\.\d+)s\s+-?\d+\.\d+s\s+(.*\S)\s*$")


def run_once(root: Path, seconds: int, reduce: bool, uri: str | None) -> dict[str, float]:
    """One perftest in ``root``'s checkout: each stage's seconds since this function launched it."""
    with tempfile.TemporaryDirectory(prefix="rbench-bench-startup-") as out:
        cmd = [sys.executable, "-m", "rbench.cli", "perftest", "-x", "1", "-y", "1", "-a", "-s", "12",
               "-z", str(seconds), "--timings", "--quiet", "--out", out] + ([] if reduce else ["--no-reduce"]) \
            + (["-h", uri] if uri else [])
        env = {**os.environ, "PYTHONPATH": str(root)}
        launched = time.time()
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        run_line_at = None
        lines = []
        for line in proc.stdout:
            if run_line_at is None and line.startswith("rbench: run "):
                run_line_at = time.time() - launched
            lines.append(line)
        err = proc.stderr.read() if proc.stderr else ""
        if proc.wait() != 0:
            raise SystemExit(f"{root}: perftest failed ({proc.returncode}): {err.strip()[-500:]}")
    table: dict[str, float] = {}
    for line in lines[next(i for i, ln in enumerate(lines) if ln.startswith("where the time went")) + 2:]:
        m = ROW.match(line)
        if m:
            table.setdefault(m.group(2), float(m.group(1)))
    planned = table.get("run planned, run.json written")
    offset = (run_line_at - planned) if run_line_at is not None and planned is not None else 0.0
    found = {"(table starts after launch)": offset}
    for name, labels in STAGES:
        at = next((table[label] for label in labels if label in table), None)
        if at is not None:
            found[name] = at + offset
    return found


def median_cell(values: list[float]) -> str:
    if not values:
        return "—"
    return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=30, help="perftest -z: the load's duration")
    ap.add_argument("--root", type=Path, help="another checkout, run alternately as the 'before' column")
    ap.add_argument("--reduce", action="store_true", help="keep the reduce and summary (slow; not part of start-up)")
    ap.add_argument("--uri", help="perftest -h: the broker (default PerfTest's, amqp://localhost)")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "startup.md")
    args = ap.parse_args()
    sides = [("this checkout", ROOT)] + ([("before", args.root.resolve())] if args.root else [])
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in sides}
    loads: dict[str, list[float]] = {name: [] for name, _ in sides}     # 1-minute load average at each launch
    for rnd in range(args.rounds):
        for name, root in (sides if rnd % 2 == 0 else sides[::-1]):
            loads[name].append(os.getloadavg()[0])
            try:
                found = run_once(root, args.seconds, args.reduce, args.uri)
            except SystemExit as exc:          # a broker that did not answer (shared machine): once more
                print(f"round {rnd + 1} {name}: {exc}; once more", flush=True)
                found = run_once(root, args.seconds, args.reduce, args.uri)
            runs[name].append(found)
            print(f"round {rnd + 1} {name}: first send {found.get(FIRST_SEND, float('nan')):.2f} s after the command "
                  f"(load average {loads[name][-1]:.1f})", flush=True)
    load = os.getloadavg()
    head = "| stage (seconds since the command was launched) | " + " | ".join(n for n, _ in sides) + " |"
    rows = [head, "|---|" + "--:|" * len(sides)]
    for name in ["(table starts after launch)"] + [n for n, _ in STAGES]:
        rows.append(f"| {name} | " + " | ".join(median_cell([r[name] for r in runs[s] if name in r]) for s, _ in sides) + " |")
    text = (f"`rbench perftest -x 1 -y 1 -a -s 12 -z {args.seconds} --timings{'' if args.reduce else ' --no-reduce'}"
            f"{' -h ' + args.uri if args.uri else ''}` "
            f"on local[*], {args.rounds} rounds alternating, medians (min–max); load average at the end "
            f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} cores.\n"
            "Each stage is the instant `--timings` reports for it (a task's instants as the task reported them), "
            "counted from this script's launch of the command. 1-minute load average at each launch: "
            + "; ".join(f"{n}: " + ", ".join(f"{v:.1f}" for v in loads[n]) for n, _ in sides) + ".\n\n"
            + "\n".join(rows))
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
