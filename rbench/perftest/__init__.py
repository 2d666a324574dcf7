"""RabbitMQ PerfTest compatibility: PerfTest's option grammar, mapped onto rbench's workload model.

* ``options``  — one table of every PerfTest option with what rbench does with it (``option``: its record);
* ``grammar``  — the tokenizer that reads a PerfTest command line by that table;
* ``mapping``  — parsed options → the workload mapping a YAML file would give (``connection``: the URIs);
* ``bodies``   — message bodies from files (-B) and random JSON documents (--json-body);
* ``compat``   — the compatibility table of docs/perftest.md, generated from ``options``.
"""
