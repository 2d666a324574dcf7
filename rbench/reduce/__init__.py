"""Spark reductions of a run's Parquet samples: per-step stats, leaderboards, costs.

Small modules, each a set of pure DataFrame → DataFrame functions so the tests can
check them on synthetic rows: ``load`` (run.json and committed attempts), ``stats``
(per-step rates, exact percentiles, fault counts, per-second timeline; the passes it runs are
``counting``, ``step_latencies``, ``messages``/``message_checks`` over a ``plan``, or ``small``
on the driver),
``leaderboard`` (matching and ranking), ``costs`` (conf/costs.yaml and monthly cost)
and ``job`` (the orchestration behind `rbench reduce`).
"""
