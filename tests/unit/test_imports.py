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


def test_errors_and_the_uri_reader_form_no_cycle() -> None:
    """rbench.errors is the bottom of every import chain: it imports nothing of rbench, not even
    inside a function, so the URI reader (which raises its errors) can never close a cycle with it."""
    import ast
    from pathlib import Path

    import rbench.errors

    tree = ast.parse(Path(rbench.errors.__file__).read_text())
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    assert [name for name in imported if name.split(".")[0] == "rbench"] == []
