"""The shape test (stats/shapes.py), claims over some cells (stats/some_cell.py), "no cell
consistently best" (stats/consistently_best.py) and the smallest attainable p of a design
(stats/decidable.py): each can hold and fail, and errs at most its level where it should not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from congestlab.stats import decidable
from congestlab.stats.consistently_best import no_cell_consistently_best
from congestlab.stats.rules import FAILS, HOLDS, INCONCLUSIVE, Verdict
from congestlab.stats.samples import Cell
from congestlab.stats.shapes import shape_test
from congestlab.stats.some_cell import some_cell

DELAYS = [0, 10, 20, 40, 80]
LOSSES = [0, 0.005, 0.01, 0.02, 0.05]


def _noisy(f, xs, reps, sd, seed=1):
    rng = np.random.default_rng(seed)
    xs = xs * reps
    return xs, [f(x) * math.exp(rng.normal(0, sd)) for x in xs]


@pytest.mark.parametrize("form, f, xs", [
    ("reciprocal", lambda x: 95.6 * 40 / (40 + x), DELAYS),           # window-limited: W / RTT
    ("exponential", lambda x: 95.6 * math.exp(-22 * x), LOSSES),
    ("linear", lambda x: 95.6 - 0.6 * x, DELAYS),
    ("inverse_sqrt", lambda x: 95.6 / math.sqrt(1 + 400 * x), LOSSES),  # Mathis: 1 / sqrt(p)
])
def test_the_true_form_holds_and_the_others_do_not(form, f, xs):
    x, y = _noisy(f, xs, 3, 0.01)
    assert shape_test(x, y, form, increasing=False).p_holds < 0.025
    for other in {"linear", "exponential", "reciprocal", "inverse_sqrt"} - {form}:
        t = shape_test(x, y, other, increasing=False)
        assert t.p_fails < 0.025 and t.p_holds > 0.025, other


def test_a_slope_against_the_claim_counts_only_when_significant():
    x, y = _noisy(lambda x: 50.0, DELAYS, 2, 0.05, seed=4)  # flat: any slope is noise
    t = shape_test(x, y, "linear", increasing=False)
    assert t.p_fails > 0.025 and t.p_holds > 0.025  # neither: inconclusive, whatever the fitted sign
    x, y = _noisy(lambda x: 50.0 + 0.5 * x, DELAYS, 3, 0.01)  # rising, claimed falling
    assert shape_test(x, y, "linear", increasing=False).p_fails < 0.025


def test_too_few_values_of_x_or_samples_have_no_shape_test():
    assert shape_test([0, 80, 0, 80], [95, 60, 96, 61], "linear", False).why_untested
    assert shape_test([0, 20, 80], [95.5, 90.3, 72.9], "linear", False).why_untested  # a, b, power fit 3 points
    assert decidable.shape_min_p(3, 3) == 1.0 and decidable.shape_min_p(3, 6) == 0.0


def test_the_shape_test_errs_at_most_its_level_on_the_true_form():
    wrong = 0
    for seed in range(300):
        x, y = _noisy(lambda x: 95.6 * 40 / (40 + x), DELAYS, 2, 0.05, seed=seed)
        wrong += shape_test(x, y, "reciprocal", False).p_fails < 0.025
    assert wrong / 300 <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / 300)


def _v(p_holds: float, p_fails: float) -> Verdict:
    return Verdict(INCONCLUSIVE, "r", math.nan, (math.nan, math.nan), p_holds, p_fails, 3, 0, 0, 0.025)


def test_some_cell_holds_on_one_cell_after_holm_and_fails_only_when_every_cell_fails():
    assert some_cell([_v(0.001, 0.9), _v(0.9, 0.5), _v(0.9, 0.5)], 0.025).verdict == HOLDS
    assert some_cell([_v(0.01, 0.9), _v(0.9, 0.5), _v(0.9, 0.5)], 0.025).verdict == INCONCLUSIVE  # 0.03 after Holm
    assert some_cell([_v(0.9, 0.001), _v(0.9, 0.01), _v(0.9, 0.02)], 0.025).verdict == FAILS
    assert some_cell([_v(0.9, 0.001), _v(0.9, 0.5)], 0.025).verdict == INCONCLUSIVE


def _levels(means: dict[str, dict[str, float]], rounds: int, sd: float, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for level, cells in means.items():
        block = {r: rng.normal(0, 0.3) for r in range(rounds)}
        out[level] = {c: Cell.of([m * math.exp(block[r] + rng.normal(0, sd)) for r in range(rounds)],
                                 blocks=list(range(rounds))) for c, m in cells.items()}
    return out


def test_no_cell_consistently_best_holds_when_each_is_beaten_somewhere_and_fails_when_one_wins_everywhere():
    names = [f"W{i}/{s}" for i in range(1, 10) for s in ("all", "one", "some")]  # rto's 27 cells
    rng = np.random.default_rng(2)
    shuffled = {lvl: dict(zip(names, rng.permutation(np.linspace(1.0, 3.0, 27)))) for lvl in ("75", "100", "125")}
    changes = no_cell_consistently_best(_levels(shuffled, 3, 0.05), "highest", 0.025)
    assert changes.verdict == HOLDS  # at the preset's 3 repetitions: one pooled sigma per level
    always = {lvl: {n: (4.0 if n == "W1/all" else v) for n, v in cells.items()} for lvl, cells in shuffled.items()}
    assert no_cell_consistently_best(_levels(always, 3, 0.05), "highest", 0.025).verdict == FAILS


def test_a_cell_best_at_every_level_does_not_read_as_no_cell_being_best():
    # the misreading this replaces held whenever any two cells swapped; here one cell leads everywhere
    held = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        means = {lvl: {f"c{i}": float(v) for i, v in enumerate(rng.uniform(1.0, 2.0, 6))} for lvl in ("a", "b", "c")}
        for cells in means.values():
            cells["c0"] = 2.5
        held += no_cell_consistently_best(_levels(means, 3, 0.1, seed), "highest", 0.025).verdict == HOLDS
    assert held == 0


def test_smallest_attainable_p_of_each_design():
    assert decidable.gehan_min_p(3) == 1 / 8 and decidable.gehan_min_p(6) == 1 / 64
    assert decidable.needed(decidable.gehan_min_p, 0.025, 3) == 6
    assert decidable.kendall_min_p(3) == pytest.approx(1 / 6)
    assert decidable.kendall_min_p(4) == pytest.approx(1 / 24)
    assert decidable.kendall_min_p(3, 2) < 0.025
    assert decidable.t_min_p(1) == 1.0 and decidable.t_min_p(2) == 0.0
