"""Log-log slopes with confidence intervals: does a cost grow linearly with the population?

A least-squares line through (log q, log cost): slope 1 means linear growth of the per-operation
cost with the number of queues (so quadratic total work), 0 means constant. The 95% interval
uses Student's t with n - 2 degrees of freedom (a table: rbench does not depend on scipy).
A slope whose whole interval lies above 1 is flagged as worse than linear.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

# two-sided 95% quantiles of Student's t, df = 1..30; beyond that the normal 1.96 is within 2%
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    if df < 1:
        return math.nan
    return _T975[df - 1] if df <= len(_T975) else 1.96 + 2.4 / df   # 1.96 + 2.4/df tracks the table's tail


@dataclass(frozen=True)
class Slope:
    series: str
    points: int
    slope: float
    low: float                  # 95% confidence interval (nan with fewer than 3 points)
    high: float

    @property
    def worse_than_linear(self) -> bool:
        return not math.isnan(self.low) and self.low > 1.0

    def text(self) -> str:
        if math.isnan(self.slope):
            return "–"
        if math.isnan(self.low):
            return f"{self.slope:.2f}"
        return f"{self.slope:.2f} [{self.low:.2f}, {self.high:.2f}]" + (" ⚠ worse than linear" if self.worse_than_linear else "")


def loglog_slope(series: str, xs: list[float], ys: list[float]) -> Slope:
    """Fit log y = a + b log x over the positive points; b with its 95% interval."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0 and math.isfinite(y)]
    n = len(pts)
    if n < 2:
        return Slope(series, n, math.nan, math.nan, math.nan)
    mx = sum(p[0] for p in pts) / n
    my = sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return Slope(series, n, math.nan, math.nan, math.nan)
    b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
    if n < 3:
        return Slope(series, n, b, math.nan, math.nan)
    a = my - b * mx
    resid = sum((p[1] - a - b * p[0]) ** 2 for p in pts)
    se = math.sqrt(resid / (n - 2) / sxx)
    half = t975(n - 2) * se
    return Slope(series, n, b, b - half, b + half)


def pooled_slope(series: str, groups: list[tuple[list[float], list[float]]]) -> Slope:
    """One slope shared by several series, each with its own intercept (within-series least squares).

    The sweep's headline per phase: every bindings count gets its own level, the growth with the
    number of queues is assumed common. Degrees of freedom: points - series - 1."""
    centred: list[tuple[float, float]] = []
    n_groups = 0
    for xs, ys in groups:
        pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0 and math.isfinite(y)]
        if len(pts) < 2:
            continue
        n_groups += 1
        mx = sum(p[0] for p in pts) / len(pts)
        my = sum(p[1] for p in pts) / len(pts)
        centred += [(p[0] - mx, p[1] - my) for p in pts]
    n = len(centred)
    sxx = sum(p[0] ** 2 for p in centred)
    if n_groups == 0 or sxx == 0:
        return Slope(series, n, math.nan, math.nan, math.nan)
    b = sum(p[0] * p[1] for p in centred) / sxx
    df = n - n_groups - 1
    if df < 1:
        return Slope(series, n, b, math.nan, math.nan)
    resid = sum((p[1] - b * p[0]) ** 2 for p in centred)
    half = t975(df) * math.sqrt(resid / df / sxx)
    return Slope(series, n, b, b - half, b + half)
