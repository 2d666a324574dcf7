"""False-alarm and detection rates of `rbench regress` on synthetic nightly histories (docs/history.md).

Prints a table: each figure is a fraction of seeded synthetic histories, with its binomial
standard error. Run: make bench-regress (or python bench/regress_rates.py [seeds]).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from rbench.history.detect import gate
from rbench.history.regress import Finding, Thresholds, judge


def verdict(values: np.ndarray, metric: str, t: Thresholds) -> bool:
    f = Finding("c", 0, metric, [str(i) for i in range(values.size)], list(values), [{}] * values.size, None)
    return judge(f, t).status == "regression"


def main() -> None:
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    t = Thresholds()
    rows = []
    start = time.perf_counter()

    def rate(name: str, hits: int, n: int) -> None:
        p = hits / n
        rows.append((name, p, np.sqrt(p * (1 - p) / n), n))

    rng = np.random.default_rng(1)
    rate("gate alone, throughput, flat 60 nights, normal noise CV 5 %",
         sum(bool(gate(2e4 * (1 + 0.05 * rng.standard_normal(60)), -1, t.alpha, log=False).flagged) for _ in range(seeds)), seeds)
    rate("gate alone, throughput, flat 60 nights, log-normal noise CV 5 %",
         sum(bool(gate(2e4 * np.exp(0.05 * rng.standard_normal(60)), -1, t.alpha, log=False).flagged) for _ in range(seeds)), seeds)
    rate("gate alone, latency, flat 60 nights, log-normal noise (sd 0.2)",
         sum(bool(gate(12 * np.exp(0.2 * rng.standard_normal(60)), +1, t.alpha).flagged) for _ in range(seeds)), seeds)
    rate("gate alone, latency, flat 60 nights, normal noise CV 20 %",
         sum(bool(gate(12 * (1 + 0.2 * rng.standard_normal(60)), +1, t.alpha).flagged) for _ in range(seeds)), seeds)
    n = seeds // 4
    rate("verdict (gate + change points + 3 % minimum), throughput, flat 60 nights",
         sum(verdict(2e4 * (1 + 0.05 * rng.standard_normal(60)), "consume_rate", t) for _ in range(n)), n)
    for within in (1, 2, 3):
        hits = 0
        for s in range(n):
            r = np.random.default_rng(10_000 + s)
            v = 2e4 * (1 + 0.05 * r.standard_normal(30))
            v[24:] *= 0.9
            hits += any(verdict(v[: i + 1], "consume_rate", t) for i in range(24, 24 + within))
        rate(f"10 % drop at night 25 of 30, CV 5 %: flagged within {within} night(s)", hits, n)
    for alpha in (0.001, 0.05):
        ta = Thresholds(alpha=alpha, change_point_alpha=alpha)
        hits = 0
        for s in range(n):
            r = np.random.default_rng(10_000 + s)
            v = 2e4 * (1 + 0.05 * r.standard_normal(30))
            v[24:] *= 0.9
            hits += any(verdict(v[: i + 1], "consume_rate", ta) for i in range(24, 27))
        rate(f"  same, alpha = change-point alpha = {alpha}: flagged within 3 nights", hits, n)
    print(f"rbench regress, defaults (alpha {t.alpha}, change-point alpha {t.change_point_alpha}, "
          f"baseline {t.baseline_nights}, recent {t.recent_nights}); fraction of seeded synthetic histories")
    print(f"{'case':<78} {'rate':>7} {'± s.e.':>7} {'histories':>9}")
    for name, p, se, count in rows:
        print(f"{name:<78} {p:7.4f} {se:7.4f} {count:9d}")
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
