"""The routing scalability sweep (`rbench scalability`, docs/scalability.md).

RabbitMQ's old ScalabilityTest, rebuilt on a 3.x broker and spread over Spark tasks:
plan.py (levels, names, shares), phases.py (what one task does in one phase, executor side),
counters.py (the broker's exact routed counter, the memory alarm), sweep.py (the coordinator
loop and its cleanup), fit.py (log-log slopes), output.py (Parquet rows, tables, plots).
"""
