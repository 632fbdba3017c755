"""A monotone trend of samples against the values of a swept dimension: Kendall's tau, one-sided
each way (the `monotone` rule, docs/reports.md)."""

from __future__ import annotations

from scipy import stats as st


def kendall_p_values(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(p that y increases with x, p that it decreases), one-sided each; 1.0 each when x or y
    takes fewer than two distinct values (no trend can show)."""
    if len(set(xs)) >= 2 and len(set(ys)) >= 2:
        p_up = float(st.kendalltau(xs, ys, alternative="greater").pvalue)
        p_down = float(st.kendalltau(xs, ys, alternative="less").pvalue)
    else:
        p_up = p_down = 1.0
    return p_up, p_down
