"""What an executor imports: the task runtime must not drag in the coordinator's dependencies.

An executor receives frozen dataclasses (rbench.config.types), never pydantic models, and it
runs inside Spark's Python worker without needing pyspark itself; importing either would add
seconds of start-up to every task and couple executors to the coordinator's versions.
"""
from __future__ import annotations

import subprocess
import sys


def _loaded_after(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return {name.split(".")[0] for name in out.split()}


def test_task_runtime_loads_neither_pydantic_nor_pyspark() -> None:
    loaded = _loaded_after("rbench.runtime.task")
    assert "pydantic" not in loaded
    assert "pyspark" not in loaded


def test_every_driver_module_loads_without_pydantic() -> None:
    from rbench.drivers.base import DRIVERS

    for path in DRIVERS.values():
        assert "pydantic" not in _loaded_after(path.partition(":")[0]), path
