"""One cell against a band (stats/equivalence.py) and the seed's range with its own error
(stats/replication.py): each test can hold and can fail, agrees with statsmodels where
statsmodels has it, and is descriptive where no test fits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm
from statsmodels.stats.weightstats import DescrStatsW

from congestlab.stats import replication
from congestlab.stats.equivalence import mean_band, proportion_band, within
from congestlab.stats.rules import FAILS, HOLDS, INCONCLUSIVE


def test_the_mean_tost_is_statsmodels_ttost_mean():
    values = [95.41, 95.62, 95.50, 95.71, 95.38]
    band = mean_band(values)
    v = within(band, 95.1, 96.2, 0.025, "r")
    p_statsmodels, _, _ = DescrStatsW(np.array(values)).ttost_mean(95.1, 96.2)
    assert v.p_holds == pytest.approx(p_statsmodels, rel=1e-9)
    assert v.verdict == HOLDS


def test_a_mean_band_holds_fails_and_is_inconclusive_when_underpowered():
    assert within(mean_band([94.0, 94.2, 93.9, 94.1]), 93.5, 94.5, 0.025, "r").verdict == HOLDS
    assert within(mean_band([80.0, 80.4, 79.8, 80.1]), 93.5, 94.5, 0.025, "r").verdict == FAILS
    assert within(mean_band([90.0, 98.0, 94.0]), 93.5, 94.5, 0.025, "r").verdict == INCONCLUSIVE


def test_one_repetition_or_a_fixed_value_is_descriptive():
    assert mean_band([94.0]).descriptive and mean_band([94.0]).effect is None
    assert "fixed value" in mean_band([50.0, 50.0, 50.0]).descriptive
    split = proportion_band([500, 500, 500], [1000, 1000, 1000])
    assert split.effect is None and "deterministic" in split.descriptive


def test_the_proportion_is_the_quasi_binomial_glm_intercept():
    k, n = np.array([93.0, 120.0, 81.0, 101.0]), np.array([1000.0, 1000.0, 1000.0, 1000.0])
    band = proportion_band(k, n)
    # proportions with their trials as variance weights: Pearson's dispersion per repetition
    fit = sm.GLM(k / n, np.ones((4, 1)), family=sm.families.Binomial(), var_weights=n).fit(scale="X2")
    assert band.effect.estimate == pytest.approx(float(fit.params[0]), rel=1e-9)
    assert fit.scale > 1  # overdispersed: then our se is the quasi-binomial one
    assert band.effect.se == pytest.approx(float(fit.bse[0]), rel=1e-6)
    assert band.effect.df == 3


def test_a_proportion_band_holds_and_fails_on_the_logit_scale():
    inside = proportion_band([95, 98, 92, 96], [1000] * 4)  # 9.5 %
    assert within(inside, 6.0, 14.0, 0.025, "r").verdict == HOLDS
    assert within(inside, 20.0, 30.0, 0.025, "r").verdict == FAILS


def test_no_event_in_any_repetition_is_tested_by_the_exact_binomial():
    none = proportion_band([0, 0, 0], [2000, 2500, 1800])
    assert none.exact == (0, 6300)
    v = within(none, 0.0, 0.5, 0.025, "r")  # "none of the packets": below 0.5 %
    assert v.verdict == HOLDS and v.p_holds == pytest.approx((1 - 0.005) ** 6300)
    assert within(none, 8.9, 10.1, 0.025, "r").verdict == FAILS  # the seed saw ~10 %
    assert within(proportion_band([0, 0], [50, 40]), 0.0, 0.5, 0.025, "r").verdict == INCONCLUSIVE  # 90 trials


def test_the_seed_error_keeps_a_truth_just_outside_its_range_from_failing():
    # our estimate 2 % below the seed's lower bound, our spread 0.02 on the log scale
    spread = np.array([-1.5, -1.0, -0.5, 0.0, 0.0, 0.5, 1.0, 1.5, -0.2, 0.2]) * 0.02 / 0.9
    values = list(spread + math.log(0.98 * 84))
    band = mean_band(values)
    lo, hi = math.log(84), math.log(86)
    exact = within(band, lo, hi, 0.025, "r")
    seed = within(band, lo, hi, 0.025, "r", seed_n=3)
    assert exact.verdict == FAILS and seed.verdict != FAILS
    far = mean_band([v - 0.2 for v in values])  # 18 % below: beyond both studies' error
    assert within(far, lo, hi, 0.025, "r", seed_n=3).verdict == FAILS
    assert replication.seed_runs("unknown") == 1


def test_the_replication_interval_errs_at_most_alpha_when_both_truths_sit_on_the_range():
    # the seed's truth and ours at the range's end: "does not hold" should come at most ~2.5 %
    rng = np.random.default_rng(11)
    wrong = 0
    for _ in range(2000):
        ours = rng.normal(1.0, 0.1, 5)
        band = mean_band(list(ours))
        wrong += within(band, 1.0, 2.0, 0.025, "r", seed_n=3).verdict == FAILS
    assert wrong / 2000 <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / 2000)
