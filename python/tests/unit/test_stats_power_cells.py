"""The power estimate of a claim over cells (stats/power.py, UndecidedClaim; docs/statistics.md,
"Power"): the claim decides as a whole, "holds" when every cell holds (unadjusted), "does not
hold" when one cell fails after Holm's adjustment (stats/rules.py, every_cell)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from congestlab.stats import power, rules
from congestlab.stats.effect import Effect

SD_PAIR = 0.25 * math.sqrt(2)


def undecided_direction(estimate: float) -> rules.Verdict:
    """An inconclusive "a > b" (3 rounds, a wide CI) whose estimate is `estimate` (log scale)."""
    v = rules.direction(Effect(estimate, 0.5, 2, (3, 3), (0, 0), (0, 0), 3, SD_PAIR))
    assert v.verdict == rules.INCONCLUSIVE
    return v


def decided_holds() -> rules.Verdict:
    v = rules.direction(Effect(2.0, 0.05, 8, (9, 9), (0, 0), (0, 0), 9, SD_PAIR))
    assert v.verdict == rules.HOLDS
    return v


def no_estimate() -> rules.Verdict:
    v = rules.direction(Effect(math.nan, math.nan, 0, (3, 0), (3, 0), (0, 0), 0, math.nan))
    assert v.verdict == rules.INCONCLUSIVE
    return v


def test_every_cell_holding_needs_more_than_one_cell():
    """k cells within reach of "holds" must all hold: by Boole's bound each at power 1 - 0.2/k."""
    cell = undecided_direction(0.3)
    one = power.rounds_needed_for_verdict(cell)
    assert one == power.rounds_needed(SD_PAIR, distance=0.3)
    needs = [power.rounds_needed_for_verdict(rules.every_cell([cell] * k)) for k in (1, 2, 3, 5)]
    assert needs[0] == one and needs == sorted(needs) and needs[2] > one
    for k, need in zip((1, 2, 3, 5), needs):
        assert need == power.rounds_needed(SD_PAIR, distance=0.3, power=1 - (1 - power.POWER) / k)


def test_decided_cells_do_not_add_to_holds_but_count_in_holms_k():
    cell = undecided_direction(0.3)
    # "holds" is not adjusted: decided cells beside one undecided cell leave its need as it is
    assert power.rounds_needed_for_verdict(rules.every_cell([cell, decided_holds(), decided_holds()])) == \
        power.rounds_needed_for_verdict(cell)


@pytest.mark.parametrize("ks", [(1, 2, 4, 8)])
def test_does_not_hold_among_k_cells_is_powered_at_holms_first_level(ks):
    """One cell whose estimate says "does not hold" among k: Holm rejects anything only when the
    smallest p lies below level / k, so its need grows with k."""
    failing = undecided_direction(-0.3)
    needs = []
    for k in ks:
        claim = rules.every_cell([failing] + [decided_holds()] * (k - 1))
        assert claim.verdict == rules.INCONCLUSIVE
        needs.append(power.rounds_needed_for_verdict(claim))
        assert needs[-1] == power.rounds_needed(SD_PAIR, distance=0.3, tests=k)
    assert needs[0] == power.rounds_needed_for_verdict(failing)
    assert all(a < b for a, b in zip(needs, needs[1:])), needs
    # a check of a claim (report/claims/) says its own need at the level its claim decides it
    assert power.rounds_needed_for_verdict(failing, tests=4) == needs[2]
    # "holds" is never adjusted: a check within reach of it needs the same at any k
    holding = undecided_direction(0.3)
    assert power.rounds_needed_for_verdict(holding, tests=4) == power.rounds_needed_for_verdict(holding)


def test_one_failing_cell_suffices_so_the_smallest_need_counts():
    near, far = undecided_direction(-0.3), undecided_direction(-0.6)
    need = power.rounds_needed_for_verdict(rules.every_cell([near, far]))
    assert need == power.rounds_needed(SD_PAIR, distance=0.6, tests=2)
    assert need < power.rounds_needed(SD_PAIR, distance=0.3, tests=2)
    # a cell within reach of "holds" beside it does not delay "does not hold"
    assert power.rounds_needed_for_verdict(rules.every_cell([undecided_direction(0.3), far])) == need


def test_a_cell_without_estimate_blocks_holds_but_not_does_not_hold():
    assert power.rounds_needed_for_verdict(rules.every_cell([undecided_direction(0.3), no_estimate()])) is None
    far = undecided_direction(-0.6)
    assert power.rounds_needed_for_verdict(rules.every_cell([far, no_estimate()])) == power.rounds_needed(
        SD_PAIR, distance=0.6, tests=2)


def test_a_nested_claim_divides_its_level_again():
    """A `best` check is itself a claim over cells; inside a claim of 3 checks its failing cell
    (one of 2) is powered at level / 6."""
    inner = rules.every_cell([undecided_direction(-0.4), decided_holds()])
    outer = rules.every_cell([inner, decided_holds(), decided_holds()])
    assert power.rounds_needed_for_verdict(outer) == power.rounds_needed(SD_PAIR, distance=0.4, tests=6)


def simulated_decisions(rounds: int, truths: list[float], draws: int, rng: np.random.Generator) -> dict[str, float]:
    """The share of every_cell verdicts over paired t-tests (sigma known to the estimate, not to
    the test) at the last look's level of a `rounds`-round design, the truth per cell given."""
    level = power.final_level(rounds)
    d = rng.normal(np.asarray(truths)[None, :, None], SD_PAIR, (draws, len(truths), rounds))
    tstat = d.mean(axis=2) / (d.std(axis=2, ddof=1) / math.sqrt(rounds))
    p_holds, p_fails = st.t.sf(tstat, rounds - 1), st.t.cdf(tstat, rounds - 1)
    counts = {rules.HOLDS: 0, rules.FAILS: 0, rules.INCONCLUSIVE: 0}
    for ph, pf in zip(p_holds, p_fails):
        cells = [rules.Verdict(rules.INCONCLUSIVE, "a > b", math.nan, (math.nan, math.nan), float(h), float(f),
                               rounds, 0, 0, level) for h, f in zip(ph, pf)]
        counts[rules.every_cell(cells, alpha=level).verdict] += 1
    return {k: v / draws for k, v in counts.items()}


def test_at_the_estimated_rounds_the_claim_decides_with_the_promised_power():
    """Monte Carlo through rules.every_cell: at the claim's estimate >= 80 % decide (less a
    simulation tolerance); at what one cell needs (the old estimate) clearly fewer."""
    rng = np.random.default_rng(2026)
    draws, tolerance = 3000, 0.02   # sd of a share near 0.8 over 3000 draws: 0.007
    # three cells within reach of "holds"
    cell = undecided_direction(0.3)
    need = power.rounds_needed_for_verdict(rules.every_cell([cell] * 3))
    one = power.rounds_needed_for_verdict(cell)
    assert simulated_decisions(need, [0.3] * 3, draws, rng)[rules.HOLDS] >= power.POWER - tolerance
    assert simulated_decisions(one, [0.3] * 3, draws, rng)[rules.HOLDS] < power.POWER - 2 * tolerance
    # one of four cells within reach of "does not hold", the other three clearly holding
    claim = rules.every_cell([undecided_direction(-0.3)] + [decided_holds()] * 3)
    need = power.rounds_needed_for_verdict(claim)
    one = power.rounds_needed(SD_PAIR, distance=0.3)
    truths = [-0.3, 2.0, 2.0, 2.0]
    assert simulated_decisions(need, truths, draws, rng)[rules.FAILS] >= power.POWER - tolerance
    assert simulated_decisions(one, truths, draws, rng)[rules.FAILS] < power.POWER - 2 * tolerance


@pytest.mark.parametrize("rounds, first_look, alpha", [(5, 3, 0.0041), (10, 4, 0.0041), (8, 4, 0.025), (6, 2, 0.025)])
def test_a_design_outside_the_table_is_estimated_near_and_below_its_exact_level(rounds, first_look, alpha):
    """A sequential look asks at its own level (decisive/claims.py): the estimate stays within
    5 % below the simulated level (the power, if anything, underestimated)."""
    from congestlab.stats.sequential import SequentialDesign
    exact = SequentialDesign(rounds, first_look, alpha).final_level()
    assert 0.95 * exact <= power.final_level(rounds, first_look, alpha) <= exact


def test_a_power_estimate_at_a_looks_level_simulates_no_design(monkeypatch):
    """Up to CAP_ROUNDS candidate designs: none simulated (minutes), every level from the table
    or the z-test's."""
    from congestlab.stats import t_levels

    def refuse(*args, **kwargs):
        raise AssertionError("a design was simulated")

    monkeypatch.setattr(t_levels, "simulated_levels", refuse)
    need = power.rounds_needed(0.3, distance=0.0001, first_look=4, alpha=0.0041)
    assert need is None  # no effect worth the name: beyond CAP_ROUNDS, found without a simulation
    assert power.rounds_needed(0.3, distance=0.5, first_look=4, alpha=0.0041) >= 4
