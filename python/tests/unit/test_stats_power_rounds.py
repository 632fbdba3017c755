"""Power and the rounds a verdict needs (congestlab/stats/power.py), checked against
statsmodels and against the tests themselves simulated (split from test_stats_censored.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from congestlab.stats import power, rules
from congestlab.stats.effect import Effect
from congestlab.stats.median_ratio import compare
from congestlab.stats.samples import Cell


def decided_effect(estimate: float, se: float) -> Effect:
    """An effect far from its threshold: a decided verdict."""
    return Effect(estimate, se, 4, (5, 5), (0, 0), (0, 0), 5, se * math.sqrt(5))


def test_power_is_statsmodels_paired_t_power_at_the_final_level():
    from statsmodels.stats.power import TTestPower

    level = power.final_level(8)
    ours = power.power_one_sided(8, 0.3, 0.25, level)
    ref = TTestPower().power(effect_size=0.3 / 0.25, nobs=8, alpha=level, alternative="larger")
    assert ours == pytest.approx(ref, rel=1e-6)
    n = power.rounds_needed(0.25, distance=0.3)
    assert power.power_one_sided(n, 0.3, 0.25, power.final_level(n)) >= 0.8
    assert power.power_one_sided(n - 1, 0.3, 0.25, power.final_level(n - 1)) < 0.8
    assert power.rounds_needed(0.25, distance=0.3, censored_fraction=0.5) == 2 * n
    d = power.detectable_distance(n, 0.25)
    assert d <= 0.3 and power.rounds_needed(0.25, distance=d * 1.001) == n


def test_an_inconclusive_verdict_says_the_rounds_it_needs():
    a = Cell.of([110.0, 95.0, 130.0], blocks=[1, 2, 3])
    b = Cell.of([100.0, 90.0, 125.0], blocks=[1, 2, 3])
    e = compare(a, b)
    v = rules.direction(e)
    assert v.verdict == rules.INCONCLUSIVE
    need = power.rounds_needed_for_verdict(v)
    assert need == power.rounds_needed(e.sd_pair, distance=e.estimate) and need > 3
    eq = rules.equivalence(e, 10)
    assert power.rounds_needed_for_verdict(eq) == power.rounds_needed(e.sd_pair, equivalence=(e.estimate, math.log1p(.1)))
    # both within reach of "holds": the claim needs both to hold at once (Boole's bound,
    # test_stats_power_cells.py), here where the direction's power is already ~1
    both = rules.every_cell([v, eq])
    need_both = power.rounds_needed_for_verdict(both)
    assert need_both >= max(need, power.rounds_needed_for_verdict(eq))
    assert power.power_one_sided(need_both, e.estimate, e.sd_pair, power.final_level(need_both)) > 0.999
    assert power.rounds_needed_for_verdict(rules.direction(decided_effect(0.5, 0.05))) is None  # decided


def test_an_inconclusive_magnitude_range_says_the_rounds_it_needs():
    a = Cell.of([118.0, 95.0, 135.0], blocks=[1, 2, 3])
    b = Cell.of([100.0, 90.0, 125.0], blocks=[1, 2, 3])
    e = compare(a, b)
    lo, hi = math.log1p(0.04), math.log1p(0.23)
    inside = rules.magnitude(e, 4.0, 23.0)
    assert inside.verdict == rules.INCONCLUSIVE and lo < e.estimate < hi
    need = power.rounds_needed_for_verdict(inside)
    assert need == power.rounds_needed(e.sd_pair, interval=(e.estimate, lo, hi)) and need > 3
    # the estimate outside the range: "does not hold" is within reach, a one-sided test beyond hi
    above = rules.magnitude(e, 1.0, 5.0)
    assert above.verdict == rules.INCONCLUSIVE and e.estimate > math.log1p(0.05)
    assert power.rounds_needed_for_verdict(above) == power.rounds_needed(
        e.sd_pair, distance=e.estimate - math.log1p(0.05))
    # over cells, one cell within reach of "does not hold" decides the claim: its one-sided test
    # at Holm's first level, level / 2 over the 2 cells
    assert power.rounds_needed_for_verdict(rules.every_cell([inside, above])) == power.rounds_needed(
        e.sd_pair, distance=e.estimate - math.log1p(0.05), tests=2)
    # the equivalence band is the symmetric interval
    assert power.power_equivalence(8, 0.02, 0.1, 0.07, 0.01) == power.power_interval(8, 0.02, -0.1, 0.1, 0.07, 0.01)


def test_interval_power_matches_simulated_tost():
    """power_interval against the TOST itself on simulated paired log differences (sigma known)."""
    rng = np.random.default_rng(11)
    lo, hi, sd, level = math.log1p(0.04), math.log1p(0.23), 0.05 * math.sqrt(2), 0.0125
    mid = (lo + hi) / 2
    for rounds, truth in ((6, mid), (11, mid), (16, lo + 0.3 * (hi - lo)), (30, lo + 0.3 * (hi - lo))):
        d = rng.normal(truth, sd, (20000, rounds))
        se = d.std(axis=1, ddof=1) / math.sqrt(rounds)
        tc = st.t.isf(level, rounds - 1)
        holds = ((d.mean(axis=1) - lo) / se > tc) & ((d.mean(axis=1) - hi) / se < -tc)
        stated = power.power_interval(rounds, truth, lo, hi, sd, level)
        assert holds.mean() >= stated - 0.01, (rounds, truth, holds.mean(), stated)  # a lower bound
        if stated >= 0.6:  # where a need is decided (80 %) the bound is tight; far below it, loose
            assert holds.mean() <= stated + 0.05, (rounds, truth, holds.mean(), stated)
    need = power.rounds_needed(sd, interval=(mid, lo, hi))
    d = rng.normal(mid, sd, (20000, need))
    level = power.final_level(need)
    se = d.std(axis=1, ddof=1) / math.sqrt(need)
    tc = st.t.isf(level, need - 1)
    holds = ((d.mean(axis=1) - lo) / se > tc) & ((d.mean(axis=1) - hi) / se < -tc)
    assert holds.mean() >= power.POWER
