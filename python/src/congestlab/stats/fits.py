"""Least-squares fits of y against x in two shapes, linear y = a + b x and exponential
y = A e^(b x), and the numbers that compare them: AIC from the residual sum of squares (both
shapes have two parameters) and R² (the `shape` rule, docs/reports.md)."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import curve_fit


def fit_shapes(xs: list[float], ys: list[float]) -> dict[str, tuple[float, float, float]]:
    """{"linear": (a, b, rss), "exponential": (A, b, rss)} for y = a + b x and y = A e^(b x)."""

    x, y = np.asarray(xs, float), np.asarray(ys, float)
    b, a = np.polyfit(x, y, 1)
    out = {"linear": (float(a), float(b), float(np.sum((y - (a + b * x)) ** 2)))}
    positive = np.clip(y, max(float(np.max(y)) * 1e-3, 1e-12), None)
    lb, la = np.polyfit(x, np.log(positive), 1)
    try:
        (A, k), _ = curve_fit(lambda t, A, k: A * np.exp(k * t), x, y, p0=(math.exp(la), lb), maxfev=20000)
    except (RuntimeError, ValueError):
        A, k = math.exp(la), lb
    out["exponential"] = (float(A), float(k), float(np.sum((y - A * np.exp(k * x)) ** 2)))
    return out


def aic(rss: float, n: int, params: int = 2) -> float:
    return n * math.log(max(rss, 1e-300) / n) + 2 * params


def r_squared(rss: float, ys: list[float]) -> float:
    """1 - rss / the sum of squares of ys about their mean."""
    n = len(ys)
    sst = sum((y - sum(ys) / n) ** 2 for y in ys) or 1e-300
    return 1 - rss / sst
