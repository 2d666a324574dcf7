"""The message check's packed keys (rbench.reduce.row_keys): the dense paths (bincount, bitmap, table look-up) and
the sorted ones give np.unique's and a set's answers, and check_rows counts the same whether the copies' keys are
dense, sparse or too wide to pack in one int64."""
from __future__ import annotations

import numpy as np
import pytest

from rbench.reduce.message_checks import CANDIDATE, CUT, DELIVERY, MessageRows, check_rows
from rbench.reduce.message_rows import producer_codes
from rbench.reduce.row_keys import absent, as_index, key_counts, pack, small_ids


@pytest.mark.parametrize("scale", [1, 1_000_003])           # dense (bincount / bitmap), sparse (sort / search)
def test_counts_and_membership_match_unique_and_sets(scale: int) -> None:
    rng = np.random.default_rng(scale)
    cols = [rng.integers(-3, 4, 5000), rng.integers(0, 900, 5000) * scale, rng.integers(-1, 2, 5000)]
    key = pack(cols)
    assert key is not None
    rows = list(zip(*[c.tolist() for c in cols], strict=True))
    uniq, cnt = key_counts(key.v, key.span)
    want = {}
    for r in rows:
        want[r] = want.get(r, 0) + 1
    assert sorted(want.values()) == sorted(cnt.tolist()) and len(uniq) == len(want)
    assert sorted(key.lead(uniq).tolist()) == sorted(r[0] for r in want)
    seen, probe = np.arange(0, 2500), np.arange(2500, 5000)
    have = set(rows[:2500])
    assert absent(key.v[seen], key.v[probe], key.span).tolist() == [r not in have for r in rows[2500:]]
    ids = cols[1] // max(scale, 1)
    assert all(np.array_equal(a, b) for a, b in zip(small_ids(ids), np.unique(ids, return_counts=True), strict=True))
    prod = cols[0]
    u, inv = producer_codes(prod)
    wu, winv = np.unique(prod, return_inverse=True)
    assert np.array_equal(u, wu) and np.array_equal(inv, winv.reshape(-1))


def test_too_wide_keys_do_not_pack_and_runs_become_slices() -> None:
    assert pack([np.array([0, 1 << 40]), np.array([0, 1 << 30])]) is None
    assert as_index(np.arange(3, 9)) == slice(3, 9)
    assert isinstance(as_index(np.array([1, 2, 4])), np.ndarray)


def _rows(seed: int, seq_scale: int, seq_off: int) -> MessageRows:
    rng = np.random.default_rng(seed)
    n_con, n_pub, n_cut = 600, 400, 50
    n = n_con + n_pub + n_cut
    src = np.concatenate([np.full(n_con, DELIVERY), np.full(n_pub, CANDIDATE), np.full(n_cut, CUT)]).astype(np.int8)
    gt = rng.integers(-1, 4, n)
    return MessageRows(src=src, rc=rng.integers(0, 2, n), prod=rng.integers(-1, 3, n),
                       seq=rng.integers(0, 80, n) * seq_scale + seq_off, qcode=rng.integers(-1, 3, n),
                       t=rng.integers(0, 40, n) * 1_000_000, tnull=rng.random(n) < 0.05, gt=gt,
                       gm=np.where(rng.random(n) < 0.8, gt, -1), fm=rng.integers(0, 4, n), red=rng.random(n) < 0.1,
                       consumer=rng.integers(-1, 3, n))


@pytest.mark.parametrize("seed", range(6))
def test_check_rows_counts_alike_dense_sparse_and_unpacked(seed: int) -> None:
    # an order-preserving one-to-one map of seq changes no figure, only which path counts it
    faulted = frozenset({0, 1}) if seed % 2 else frozenset()
    readers = {0: {"q0": (0, 1)}} if seed % 3 == 2 else None
    dense = check_rows(faulted, _rows(seed, 1, 0), readers, ["q0", "q1", "q2"])
    assert any(c[0] for c in dense.values()) and any(c[3] for c in dense.values()) and any(c[2] for c in dense.values())
    assert check_rows(faulted, _rows(seed, 1_000_003, 7), readers, ["q0", "q1", "q2"]) == dense
    assert check_rows(faulted, _rows(seed, 1 << 52, -(1 << 40)), readers, ["q0", "q1", "q2"]) == dense
