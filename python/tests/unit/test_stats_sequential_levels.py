"""The sequential design's look levels (stats/sequential.py, stats/t_levels.py; docs/statistics.md,
"Repetitions until decisive"): the z-boundaries against published ones and a finer grid, and the
paired t-test's own levels against a fresh simulation and against the error they promise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from congestlab.stats import t_levels
from congestlab.stats.sequential import SequentialDesign, increments, nominal_levels, spent, t_test_levels

ALPHA = 0.025


def test_spending_boundaries_match_published_obrien_fleming_type():
    # Lan–DeMets O'Brien–Fleming-type, one-sided 2.5 %, 5 equally spaced looks (Jennison & Turnbull)
    z = [st.norm.isf(a) for a in nominal_levels((0.2, 0.4, 0.6, 0.8, 1.0), 0.025)]
    assert z == pytest.approx([4.877, 3.357, 2.680, 2.290, 2.031], abs=1e-3)
    assert spent(1.0, 0.025) == pytest.approx(0.025) and spent(0.5, 0.025) < 0.002
    # a single look spends everything
    assert nominal_levels((1.0,), 0.025) == pytest.approx((0.025,))


def test_nominal_levels_by_convolution_equal_the_dense_integration(monkeypatch):
    # the n x m matrix integration the convolution replaced (stats/sequential.py _transition):
    # the same sum, so they agree to rounding; a skipped look (3, 5, 6) included
    from congestlab.stats import sequential

    designs = [(3 / 6, 4 / 6, 5 / 6, 1.0), (3 / 6, 5 / 6, 1.0), tuple(r / 22 for r in range(3, 23))]
    fast = [nominal_levels(f, 0.025) for f in designs]

    def dense(mass, grid, new, d):
        return (mass[None, :] * st.norm.pdf((new[:, None] - grid[None, :]) / d) / d).sum(axis=1)

    monkeypatch.setattr(sequential, "_transition", dense)
    sequential.nominal_levels.cache_clear()
    for f, levels in zip(designs, fast):
        assert sequential.nominal_levels(f, 0.025) == pytest.approx(levels, rel=1e-9)
    # each grid ends on its boundary, so the trapezoid rule is second order: a 10x finer grid
    # moves no level by more than 5e-4 of itself (a grid cut below the boundary was off by up to 3 %)
    monkeypatch.undo()
    monkeypatch.setattr(sequential, "GRID_STEP", 0.001)
    sequential.nominal_levels.cache_clear()
    for f, levels in zip(designs, fast):
        assert sequential.nominal_levels(f, 0.025) == pytest.approx(levels, rel=5e-4)
    sequential.nominal_levels.cache_clear()


def _design_levels(n: int, first: int = 3) -> list[float]:
    design = SequentialDesign(n, first)
    looks = design.looks()
    return [design.level_at(looks[:k + 1]) for k in range(len(looks))]


def test_the_engine_takes_the_t_tests_table_and_simulates_other_designs():
    table = t_levels.table()
    assert sorted(table["levels"]) == list(range(4, 41)) and table["paths"] >= 4_000_000
    assert all(len(v) == n - 2 for n, v in table["levels"].items())
    assert _design_levels(10) == pytest.approx(table["levels"][10], rel=1e-5)  # 6 digits stored
    # the first look of any design is the t-distribution's own: it spends exactly its share
    assert _design_levels(10)[0] == pytest.approx(spent(0.3, ALPHA), rel=1e-4)
    # below the z-boundaries' nominal levels (the t-test needs lower ones), after the first look
    z = nominal_levels(tuple(r / 10 for r in range(3, 11)), ALPHA)
    assert all(t < zz for t, zz in zip(_design_levels(10)[1:], z[1:]))
    # a design off the table (first look after 2 rounds; a skipped look) is simulated, seeded
    two = t_test_levels((2, 3, 4, 5, 6), 6)
    assert two == t_test_levels((2, 3, 4, 5, 6), 6) and two[0] == pytest.approx(spent(2 / 6, ALPHA))
    skipped = t_test_levels((3, 5, 6), 6)
    assert skipped[0] == pytest.approx(table["levels"][6][0], rel=1e-5) and skipped[-1] < ALPHA
    # one look spends all of alpha at once: the plain t-test
    assert t_test_levels((4,), 4) == pytest.approx((ALPHA,))


def test_the_table_agrees_with_a_fresh_simulation():
    """Other paths (200 000, another seed) give the same levels within their Monte Carlo error."""
    rounds = tuple(range(3, 9))
    fresh = t_levels.levels_from_paths(t_levels.paired_t_paths(rounds, 200_000, seed=77), rounds,
                                       increments(tuple(r / 8 for r in rounds), ALPHA))
    assert fresh == pytest.approx(t_levels.table()["levels"][8], rel=0.06)
    assert fresh[-1] == pytest.approx(t_levels.table()["levels"][8][-1], rel=0.03)


@pytest.mark.parametrize("n", [5, 8, 12])
def test_the_paired_t_errs_alpha_per_side_at_its_levels(n):
    """200 000 null paths (Monte Carlo se 0.035 %): within 4 se of 2.5 % at the t-test's levels;
    at the z-boundaries' nominal levels 2.7-2.9 %."""
    rng = np.random.default_rng(n)
    d = rng.standard_normal((200_000, n))
    rounds = np.arange(3, n + 1)
    s, q = np.cumsum(d, 1)[:, rounds - 1], np.cumsum(d * d, 1)[:, rounds - 1]
    t = s / np.sqrt(rounds * (q - s * s / rounds) / (rounds - 1))
    se = math.sqrt(ALPHA * (1 - ALPHA) / len(d))

    def error(levels):
        crossed = t >= st.t.isf(np.array(levels), rounds - 1)
        return crossed.any(axis=1).mean()

    assert abs(error(_design_levels(n)) - ALPHA) < 4 * se
    assert error(nominal_levels(tuple(r / n for r in rounds), ALPHA)) > ALPHA + 6 * se
