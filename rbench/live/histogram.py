"""Log-bucketed latency histograms for live progress (exact percentiles come from the reduce).

Buckets are 20 per decade from 1 µs to 1000 s, so any percentile read from a merged
histogram is within ±6 % (half a bucket, 10**(1/40)) of the true value. Histograms
from many tasks merge by adding counts, which quantiles cannot.
"""
from __future__ import annotations

import numpy as np

PER_DECADE = 20
LOW_NS = 1_000                      # 1 µs
DECADES = 9                         # up to 1000 s
EDGES_NS = LOW_NS * 10 ** (np.arange(PER_DECADE * DECADES + 1) / PER_DECADE)
N_BUCKETS = len(EDGES_NS) + 1       # + underflow (0) and overflow (last)
RELATIVE_ERROR = 10 ** (1 / (2 * PER_DECADE)) - 1


def bucket_counts(latencies_ns: np.ndarray) -> dict[int, int]:
    """Sparse {bucket: count} of latencies, suitable for JSON."""
    if latencies_ns.size == 0:
        return {}
    counts = np.bincount(np.searchsorted(EDGES_NS, latencies_ns, side="right"))   # no sort, unlike np.unique
    buckets = np.flatnonzero(counts)
    return dict(zip(buckets.tolist(), counts[buckets].tolist()))


def merge(into: dict[int, int], other: dict[int, int] | dict[str, int]) -> None:
    for b, c in other.items():
        into[int(b)] = into.get(int(b), 0) + int(c)


def quantile_ns(hist: dict[int, int], q: float) -> float | None:
    """Geometric middle of the bucket holding quantile q; None for an empty histogram."""
    total = sum(hist.values())
    if total == 0:
        return None
    rank = q * (total - 1)
    seen = 0
    for b in sorted(hist):
        seen += hist[b]
        if seen > rank:
            if b == 0:
                return float(EDGES_NS[0])
            if b >= len(EDGES_NS):
                return float(EDGES_NS[-1])
            return float(np.sqrt(EDGES_NS[b - 1] * EDGES_NS[b]))
    return float(EDGES_NS[-1])
