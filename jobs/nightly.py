"""spark-submit entry for the nightly job: `spark-submit jobs/nightly.py WORKLOAD --history DIR [...]`.

Argument parsing only; the steps are rbench.commands.nightly (same as `rbench nightly`).
"""
import sys

from rbench.cli import main

if __name__ == "__main__":
    sys.exit(main(["nightly", *sys.argv[1:]]))
