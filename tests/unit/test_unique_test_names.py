"""pytest imports test modules by basename (the test folders are not packages): two test files with one name in
different folders stop the whole collection ("import file mismatch"), so every name must be unique."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []
