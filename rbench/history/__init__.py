"""Run history: a Parquet record of every night's per-step results, and regression checks over it."""
