"""spark-submit entry for a capacity run: `spark-submit jobs/run.py WORKLOAD [--out DIR]`.

Argument parsing only; the work is rbench.coordinator.run.run_workload (same as `rbench run`).
"""
import sys

from rbench.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
