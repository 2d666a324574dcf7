"""The comparison's statistics: the ratio B/A of a metric over paired rounds, with a confidence interval.

Method: the rounds are pairs (A and B of one round run minutes apart, in ABBA order), so the unit of
analysis is each round's log-ratio d = ln(b / a). The estimate is exp(mean d) -- the ratio of the
geometric means of B and A over the rounds -- and the interval is Student's t interval on the mean
of d with n - 1 degrees of freedom, exponentiated: exp(mean d ± t(0.975, n-1) · sd(d) / √n).

Why this and not a bootstrap: a comparison has few rounds (3 to 10). A percentile bootstrap of 3
pairs has 10 distinct resamples and its interval is too narrow (it never reaches past the extreme
pair), so it would call noise a difference; the t interval is exact when the log-ratios are normal
and stays honest for small n by widening with t. Logs, because a performance change is a factor
(2× and ½× are equally far from 1) and because run-to-run noise is roughly proportional to the
figure. Pairing, because drift shared by neighbours (a warming broker, another tenant on the
machine) then cancels instead of inflating the spread. With 2 rounds there is one degree of
freedom: t = 12.71, so only a large, consistent difference is shown; 4 to 6 rounds is the useful
minimum.

A figure's resolution is added to the interval's half-width (on the log scale): a rate is a count of
messages in a window, so at a fixed target rate the counts of A and B barely vary from round to
round (1,500 or 1,501 messages in 3 s), the spread of d can be near zero, and a difference of one
message per window would be "shown". Widening by the rounds' mean resolution (1/count_a + 1/count_b
for a rate: ±1 message in each window) means no difference smaller than the figures can resolve is
ever called one; for figures without a counting floor (latency percentiles, CPU) it is 0.

Pure Python: scipy is a test dependency only, so the t quantile comes from the closed-form
Student t distribution for whole degrees of freedom (checked against scipy in tests/unit).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95


def t_two_sided_mass(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with ``df`` (a whole number >= 1) degrees of freedom, in closed form
    (Abramowitz & Stegun 26.7.3/26.7.4: a finite series in cos θ, θ = atan(t / √df))."""
    if df < 1:
        raise ValueError(f"degrees of freedom: expected a whole number >= 1, got {df}")
    if t <= 0:
        return 0.0
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    total, term = 1.0, 1.0
    if df % 2 == 1:
        if df == 1:
            return 2.0 * theta / math.pi
        for k in range(1, (df - 3) // 2 + 1):
            term *= (2 * k) / (2 * k + 1) * c2
            total += term
        return 2.0 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    for k in range(1, (df - 2) // 2 + 1):
        term *= (2 * k - 1) / (2 * k) * c2
        total += term
    return math.sin(theta) * total


def t_critical(df: int, confidence: float = CONFIDENCE) -> float:
    """The t with P(|T| <= t) = ``confidence`` (12.706 for df 1 at 95 %), by bisection to 1e-10."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a fraction in (0, 1), got {confidence}")
    lo, hi = 0.0, 2.0
    while t_two_sided_mass(hi, df) < confidence:
        lo, hi = hi, hi * 2
    while hi - lo > 1e-10 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_two_sided_mass(mid, df) < confidence else (lo, mid)
    return (lo + hi) / 2


@dataclass(frozen=True)
class RatioEstimate:
    """B/A over paired rounds: the estimate, its interval, and what it rests on."""

    ratio: float          # exp(mean ln(b/a)) = geometric mean of B ÷ geometric mean of A
    lo: float
    hi: float
    rounds: int
    t: float              # the t quantile used (df = rounds - 1)
    confidence: float = CONFIDENCE
    resolution: float = 0.0   # the log-scale widening for the figures' resolution (module docstring)

    @property
    def shows_difference(self) -> bool:
        """The interval excludes 1: B differs from A at this confidence."""
        return self.lo > 1.0 or self.hi < 1.0

    def contains(self, value: float) -> bool:
        return self.lo <= value <= self.hi


def paired_ratio(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE,
                 resolution: Sequence[float] = ()) -> RatioEstimate:
    """The ratio B/A of paired positive figures (round i's A with round i's B) with its t interval,
    widened by the mean of ``resolution`` (each round's relative resolution of b/a; none: 0).

    ValueError when the sequences differ in length, hold fewer than 2 pairs, or a figure is not a
    positive finite number (a ratio of a zero has no logarithm: the caller says why it is not compared)."""
    if len(a) != len(b):
        raise ValueError(f"paired figures: {len(a)} for A but {len(b)} for B")
    n = len(a)
    if n < 2:
        raise ValueError(f"paired figures: expected at least 2 rounds, got {n}")
    for x in (*a, *b):
        if not (math.isfinite(x) and x > 0):
            raise ValueError(f"paired figures: expected positive numbers, got {x}")
    d = [math.log(y / x) for x, y in zip(a, b)]
    mean = sum(d) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in d) / (n - 1))
    t = t_critical(n - 1, confidence)
    floor = sum(resolution) / len(resolution) if resolution else 0.0
    if floor < 0 or not math.isfinite(floor):
        raise ValueError(f"resolution: expected relative resolutions >= 0, got {list(resolution)}")
    half = t * sd / math.sqrt(n) + floor
    return RatioEstimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, t, confidence, floor)
