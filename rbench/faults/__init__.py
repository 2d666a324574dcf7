"""Faults inside a run (docs/faults.md): the local test cluster (cluster.sh, shipped with the package)
and the executors that kill, stop, pause and bring back a broker node on the coordinator's order.

Coordinator side only: nothing here is imported by an executor task, and nothing here imports
pydantic (the workload's fault sections reach it as the frozen dataclasses of rbench.config.types).
"""
