"""The nightly job: run a workload, reduce it, file it in the history, judge it, upload it."""
