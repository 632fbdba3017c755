"""Which curve y follows against x, tested (the `shape` rule; docs/statistics.md, "Shapes").

Every candidate is a straight line after a power transform of y, the Box-Cox family
g(y) = (y^lam - 1) / lam (log y at lam = 0), each with two parameters (a + b x):

  linear       lam = 1    y = a + b x
  exponential  lam = 0    y = A e^(b x)
  reciprocal   lam = -1   y = 1 / (a + b x): a window-limited TCP's throughput, W / RTT, with
                          the RTT growing linearly in the delay added (x)
  inverse_sqrt lam = -2   y = 1 / sqrt(a + b x): Mathis et al.'s MSS / (RTT sqrt(p)), loss
                          probability p growing linearly in x

Their fits are compared on one likelihood (Box & Cox 1964): g is scaled by the geometric mean
of y to the power lam - 1, which puts the residual sums of squares of every lam on one scale
(the normal likelihood's Jacobian), and the residual sum is profiled over lam on a grid. A
form is rejected when its fit is significantly worse than the best lam's: lam is one parameter
more, so the small-sample form of the likelihood-ratio test, F = (RSS(lam) - RSS(best)) /
(RSS(best) / (N - 3)) against F(1, N - 3) (approximate: lam enters nonlinearly). The slope's
sign is a t-test of b on the form's own scale (g increases with y, so b's sign is y's
direction).

- **holds**: the declared form's slope significantly in the declared direction, and every other
  candidate rejected (an intersection-union: p_holds the largest of those p-values);
- **does not hold**: the declared form rejected, or its slope significantly the other way (a
  union of two tests: Bonferroni, p_fails twice the smaller);
- else inconclusive. Fewer than three values of x cannot tell curves apart (every two-parameter
  curve passes through two points), and with lam free three samples fit exactly: the test needs
  three values of x and four samples (one degree of freedom beyond a, b and lam).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as st

FORMS = {"linear": 1.0, "exponential": 0.0, "reciprocal": -1.0, "inverse_sqrt": -2.0}
LAMBDA_GRID = np.linspace(-3.0, 2.0, 501)
MIN_X_VALUES = 3
MIN_SAMPLES = 4


@dataclass(frozen=True)
class ShapeTest:
    declared: str
    p_holds: float
    p_fails: float
    p_rejected: dict[str, float]   # each form: p of "this form fits as well as the best"
    p_slope: tuple[float, float]   # declared form's slope: (p increasing, p decreasing)
    best_lambda: float
    r_squared: dict[str, float]    # on each form's own scale
    n: int
    why_untested: str = ""


def _transform(y: np.ndarray, lam: float, gmean: float) -> np.ndarray:
    """Box-Cox's g(y), scaled by the geometric mean to the power lam - 1 (one RSS scale for all lam)."""
    if abs(lam) < 1e-9:
        return gmean * np.log(y)
    return (y ** lam - 1) / (lam * gmean ** (lam - 1))


def _fit(x: np.ndarray, y: np.ndarray, lam: float, gmean: float) -> tuple[float, float, float]:
    """(slope, its standard error, rss on the common scale)."""
    z = _transform(y, lam, gmean)
    X = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(X, z, rcond=None)
    rss = float(np.sum((z - X @ coef) ** 2))
    df = len(y) - 2
    sxx = float(np.sum((x - x.mean()) ** 2))
    se = math.sqrt(rss / df / sxx) if df > 0 and sxx > 0 else math.inf
    return float(coef[1]), se, rss


def _grid_rss(x: np.ndarray, y: np.ndarray, gmean: float) -> np.ndarray:
    """The residual sum of squares of every lam of LAMBDA_GRID at once (one projection)."""
    lam = LAMBDA_GRID[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(np.abs(lam) < 1e-9, gmean * np.log(y)[:, None],
                     (y[:, None] ** lam - 1) / (lam * gmean ** (lam - 1)))
    X = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(X, z, rcond=None)
    return np.sum((z - X @ coef) ** 2, axis=0)


def shape_test(xs: Sequence[float], ys: Sequence[float], declared: str, increasing: bool) -> ShapeTest:
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    n = len(y)
    k = len(set(xs))
    if k < MIN_X_VALUES or n < MIN_SAMPLES or np.any(y <= 0):
        why = (f"{k} value(s) of x: every two-parameter curve fits them" if k < MIN_X_VALUES
               else "values <= 0 have no power transform" if np.any(y <= 0)
               else f"{n} samples: a, b and the power fit them exactly")
        return ShapeTest(declared, 1.0, 1.0, {}, (1.0, 1.0), math.nan, {}, n, why)
    gmean = float(np.exp(np.mean(np.log(y))))
    grid = _grid_rss(x, y, gmean)
    fits = {name: _fit(x, y, lam, gmean) for name, lam in FORMS.items()}
    best = max(min(float(np.min(grid)), *(f[2] for f in fits.values())), 1e-300)
    df = n - 3
    p_rejected = {name: float(st.f.sf(max(0.0, f[2] - best) / (best / df), 1, df)) for name, f in fits.items()}
    slope, se, _ = fits[declared]
    if math.isfinite(se) and se > 0:
        p_up, p_down = float(st.t.sf(slope / se, n - 2)), float(st.t.cdf(slope / se, n - 2))
    elif se == 0 and slope != 0:  # an exact fit: the sign is certain
        p_up, p_down = (0.0, 1.0) if slope > 0 else (1.0, 0.0)
    else:
        p_up = p_down = 1.0
    p_dir, p_against = (p_up, p_down) if increasing else (p_down, p_up)
    others = [p for name, p in p_rejected.items() if name != declared]
    p_holds = max([p_dir, *others])
    p_fails = min(1.0, 2 * min(p_rejected[declared], p_against))
    r2 = {}
    for name, lam in FORMS.items():
        z = _transform(y, lam, gmean)
        sst = float(np.sum((z - z.mean()) ** 2)) or 1e-300
        r2[name] = 1 - fits[name][2] / sst
    return ShapeTest(declared, p_holds, p_fails, p_rejected, (p_up, p_down), float(LAMBDA_GRID[int(np.argmin(grid))]),
                     r2, n)
