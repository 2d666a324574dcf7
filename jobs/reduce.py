"""spark-submit entry for the reduce: `spark-submit jobs/reduce.py RUN_DIR… [--out DIR] [...]`.

Argument parsing only; the work is rbench.reduce.job.reduce_runs (same as `rbench reduce`).
"""
import sys

from rbench.cli import main

if __name__ == "__main__":
    sys.exit(main(["reduce", *sys.argv[1:]]))
