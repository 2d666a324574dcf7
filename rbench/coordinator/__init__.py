"""The coordinator: the Spark-driver side of `rbench run` (probe, plan, one barrier stage per cluster,
the status line, run.json, interrupts, and the end-of-run summary)."""
