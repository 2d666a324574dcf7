"""Where the reduce's passes run: the driver's memory budget (RBENCH_REDUCE_DRIVER_MEMORY) against the largest
cluster's rows (docs/reduce.md, "Where the passes run")."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from rbench.errors import ConfigError
from rbench.reduce import stats


@pytest.mark.parametrize(("text", "expected"), [("0", 0), ("512m", 512 << 20), ("2g", 2 << 30), ("1.5G", 3 << 29),
                                                ("4096", 4096), ("8k", 8192)])
def test_the_budget_reads_bytes_with_a_unit(monkeypatch: pytest.MonkeyPatch, text: str, expected: int) -> None:
    monkeypatch.setenv(stats.DRIVER_MEMORY_ENV, text)
    assert stats.driver_budget() == expected


@pytest.mark.parametrize("text", ["lots", "-1g", "g"])
def test_a_bad_budget_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(stats.DRIVER_MEMORY_ENV, text)
    with pytest.raises(ConfigError, match=stats.DRIVER_MEMORY_ENV):
        stats.driver_budget()


def test_without_the_variable_half_of_the_available_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(stats.DRIVER_MEMORY_ENV, raising=False)
    available = next(int(line.split()[1]) * 1024 for line in open("/proc/meminfo") if line.startswith("MemAvailable:"))
    assert abs(stats.driver_budget() - available // 2) < available // 10     # it moves a little between the reads


def test_the_largest_cluster_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = 1_000_000
    samples = SimpleNamespace(rows=rows + 10, cluster_rows={("r", "big"): rows, ("r", "small"): 10})
    monkeypatch.setenv(stats.DRIVER_MEMORY_ENV, str(rows * stats.DRIVER_BYTES_PER_ROW))
    assert stats.on_driver(samples)
    monkeypatch.setenv(stats.DRIVER_MEMORY_ENV, str(rows * stats.DRIVER_BYTES_PER_ROW - 1))
    assert not stats.on_driver(samples)
    monkeypatch.setenv(stats.DRIVER_MEMORY_ENV, "0")
    assert not stats.on_driver(SimpleNamespace(rows=1, cluster_rows={("r", "c"): 1}))
