"""Two regression tests over one series of nightly values (docs/history.md).

*Gate* (same morning): are the last k nights (k = 1..K, all ending tonight) worse than the
W nights before them? Each k gives a two-sample t statistic (see Scale below); the gate's
statistic is the largest of the K, oriented so that "worse" is positive. Under the null
(independent, identically distributed normal nights on the chosen scale) its distribution
does not depend on the level or the spread of the series, so the critical value for
(W, K, alpha) is read from a seeded Monte-Carlo sample of that null once per process: the
false-alarm rate is alpha per series per night by construction, up to the Monte-Carlo error.

*Change points* (the whole series): binary segmentation with a standardised CUSUM of the
mean; each split is kept only if a permutation test (shuffling the segment's
nights) gives p <= alpha, so a series of exchangeable nights has a false change point with
probability <= alpha. Each change point names the first night of the new level.

Scale: latencies are judged on log values (their noise is multiplicative and right-skewed),
rates on their own values. Each choice leans the skew of the other noise model away from
alarms: normal noise read on a log scale has a light upper tail (latency alarms fire less),
log-normal noise read on a linear scale a light lower tail (throughput alarms fire no more
often): bench/regress_rates.py measures both.
"""
from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

NULL_SAMPLES = 200_000        # Monte-Carlo draws of the gate's null distribution per (W, K)
NULL_SEED = 20240519


@dataclass(frozen=True)
class GateResult:
    statistic: float          # max over k of the oriented t statistic ("worse" is positive)
    critical: float           # the null's 1 - alpha quantile for this (W, K)
    p_value: float            # Monte-Carlo p-value of the statistic
    recent: int               # the k (nights ending tonight) that gave the statistic
    baseline_nights: int      # W
    baseline_mean: float      # mean of the baseline nights (geometric on a log scale)
    recent_mean: float        # mean of the k recent nights (likewise)
    flagged: bool

    @property
    def change(self) -> float:
        """Relative change of the recent nights against the baseline (-0.1 = 10 % lower)."""
        return self.recent_mean / self.baseline_mean - 1.0


@dataclass(frozen=True)
class ChangePoint:
    index: int                # first night of the new level
    p_value: float
    before: float             # mean of the segment's nights before the change (geometric on a log scale)
    after: float              # ... and from it on

    @property
    def change(self) -> float:
        return self.after / self.before - 1.0


def _t_stats(y: np.ndarray, w: int, k_max: int) -> np.ndarray:
    """Oriented t statistics for k = 1..k_max; y rows are series whose last w + k_max values are used.

    For each k the baseline is the w values before the last k (so the baseline never holds
    the recent nights); pooled-free: the baseline's own standard deviation, w - 1 degrees of freedom."""
    out = np.empty((y.shape[0], k_max))
    n = y.shape[1]
    for k in range(1, k_max + 1):
        base = y[:, n - k - w: n - k]
        recent = y[:, n - k:]
        s = base.std(axis=1, ddof=1)
        out[:, k - 1] = (recent.mean(axis=1) - base.mean(axis=1)) / (s * np.sqrt(1.0 / k + 1.0 / w))
    return out


@functools.lru_cache(maxsize=64)
def null_distribution(w: int, k_max: int) -> np.ndarray:
    """Sorted draws of the gate statistic under the null (iid normal log values), seeded."""
    rng = np.random.default_rng(NULL_SEED + 1000 * w + k_max)
    draws = []
    chunk = 50_000
    for _ in range(NULL_SAMPLES // chunk):
        y = rng.standard_normal((chunk, w + k_max))
        draws.append(_t_stats(y, w, k_max).max(axis=1))
    return np.sort(np.concatenate(draws))


def critical_value(w: int, k_max: int, alpha: float) -> float:
    """The null's 1 - alpha quantile: a statistic above it happens with probability alpha."""
    null = null_distribution(w, k_max)
    return float(null[min(null.size - 1, int(np.ceil((1.0 - alpha) * null.size)) - 1)])


def _scale(values: np.ndarray, log: bool) -> tuple[np.ndarray, Any]:
    v = np.asarray(values, dtype=float)
    return (np.log(v), np.exp) if log else (v, lambda m: m)


MIN_BASELINE_NIGHTS = 5       # the gate judges no night against fewer baseline nights than this


def gate(values: np.ndarray, worse: int, alpha: float, baseline_nights: int = 30, recent: int = 3,
         min_baseline: int = MIN_BASELINE_NIGHTS, log: bool = True) -> GateResult | None:
    """Tonight (the last value) and the k-1 nights before it against the nights before those.

    worse = -1 when lower is worse (throughput), +1 when higher is worse (latency). Returns None
    when there are fewer than ``min_baseline`` baseline nights. Values must be > 0 on a log scale."""
    y, back = _scale(values, log)
    n = y.size
    k_max = min(recent, n - min_baseline)
    if k_max < 1:
        return None
    w = min(baseline_nights, n - k_max)
    if w < min_baseline:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        t = worse * _t_stats(y[None, -(w + k_max):], w, k_max)[0]
    if not np.all(np.isfinite(t)):           # a constant baseline: no spread to judge by
        t = np.where(np.isnan(t), 0.0, t)
    best = int(np.argmax(t))
    stat = float(t[best])
    null = null_distribution(w, k_max)
    crit = critical_value(w, k_max, alpha)
    p = float((null.size - np.searchsorted(null, stat, side="left") + 1) / (null.size + 1))
    k = best + 1
    base = y[n - k - w: n - k]
    return GateResult(stat, crit, p, k, w, float(back(base.mean())), float(back(y[n - k:].mean())), stat > crit)


def _max_cusum(y: np.ndarray, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of y: the largest standardised mean difference over splits, and where it is."""
    n = y.shape[-1]
    taus = np.arange(min_size, n - min_size + 1)
    c = np.cumsum(y, axis=-1)
    total = c[..., -1:]
    left = c[..., taus - 1]
    stat = np.abs(left / taus - (total - left) / (n - taus)) * np.sqrt(taus * (n - taus) / n)
    arg = np.argmax(stat, axis=-1)
    return np.take_along_axis(stat, arg[..., None], axis=-1)[..., 0], taus[arg]


def change_points(values: np.ndarray, alpha: float, min_size: int = 2, permutations: int = 999,
                  seed: int | str = 0, log: bool = True) -> list[ChangePoint]:
    """Binary segmentation of the mean (of log values when `log`), each split kept when its permutation p <= alpha."""
    y, back = _scale(values, log)
    s = zlib.crc32(seed.encode()) if isinstance(seed, str) else int(seed)
    rng = np.random.default_rng(s)
    found: list[ChangePoint] = []
    todo = [(0, y.size)]
    while todo:
        lo, hi = todo.pop()
        seg = y[lo:hi]
        if seg.size < 2 * min_size or np.ptp(seg) == 0:
            continue
        obs, tau = _max_cusum(seg, min_size)
        perms = rng.permuted(np.broadcast_to(seg, (permutations, seg.size)), axis=1)
        null, _ = _max_cusum(perms, min_size)
        p = float((np.sum(null >= obs - 1e-12) + 1) / (permutations + 1))
        if p > alpha:
            continue
        cut = lo + int(tau)
        found.append(ChangePoint(cut, p, float(back(y[lo:cut].mean())), float(back(y[cut:hi].mean()))))
        todo += [(lo, cut), (cut, hi)]
    return sorted(found, key=lambda c: c.index)
