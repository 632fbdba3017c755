"""The censored statistics of congestlab/stats/ on small known cases, checked against lifelines,
scipy and statsmodels directly."""

from __future__ import annotations

import math
import warnings
from functools import partial

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st

from congestlab.errors import StatsInputError
from congestlab.stats import rules
from congestlab.stats.effect import Effect
from congestlab.stats.median_ratio import compare
from congestlab.stats.outcomes import COMPLETE, INVALID, TIMED_OUT
from congestlab.stats.samples import LEFT, Cell
from congestlab.stats.sequential import SequentialDesign, next_step, run_sequential
from congestlab.stats.summary import summarize

C, T, X = COMPLETE, TIMED_OUT, INVALID


def effect(estimate: float, se: float, df: int = 4) -> Effect:
    return Effect(estimate, se, df, (5, 5), (0, 0), (0, 0), 5, se * math.sqrt(5))


# ---------------------------------------------------------------- samples

@pytest.mark.parametrize("kwargs, words", [
    (dict(values=[1.0, 2.0], outcomes=[C, "lost"]), "outcome 'lost'"),
    (dict(values=[1.0, math.nan], outcomes=[C, T]), "needs a positive limit"),
    (dict(values=[1.0, 2.0], outcomes=[C]), "one outcome, block and limit per value"),
    (dict(values=[0.0], outcomes=[C]), "positive finite value"),
    (dict(values=[1.0], censoring="up"), "censoring 'up'"),
])
def test_malformed_cells_say_what_is_wrong(kwargs, words):
    with pytest.raises(StatsInputError, match=words):
        Cell.of(**kwargs)


def test_counts_exclude_invalid_and_count_censored():
    cell = Cell.of([10.0, math.nan, 3.0, math.nan], [C, T, C, X], limits=45.0)
    assert (len(cell), cell.n, cell.censored, cell.invalid) == (4, 3, 1, 1)
    assert cell.valid() == [(10.0, True, None), (45.0, False, None), (3.0, True, None)]


# ---------------------------------------------------------------- cell summaries

def test_km_median_and_its_ci_are_lifelines():
    from lifelines import KaplanMeierFitter
    from lifelines.utils import median_survival_times

    values = [1.2, 2.5, math.nan, 3.1, 4.0, math.nan, 2.2]
    outcomes = [C, C, T, C, C, T, C]
    cell = Cell.of(values, outcomes, limits=5.0)
    s = summarize(cell)
    kmf = KaplanMeierFitter().fit([1.2, 2.5, 5.0, 3.1, 4.0, 5.0, 2.2], [1, 1, 0, 1, 1, 0, 1])
    ci = median_survival_times(kmf.confidence_interval_).iloc[0]
    assert s.median == kmf.median_survival_time_ == 3.1
    assert s.median_ci == (float(ci.iloc[0]), float(ci.iloc[1]))
    assert s.bound is None and (s.n, s.censored) == (7, 2)
    mean, ci_t = st.tmean([1.2, 2.5, 3.1, 4.0, 2.2]), st.ttest_1samp([1.2, 2.5, 3.1, 4.0, 2.2], 0).confidence_interval()
    assert s.mean_completed == pytest.approx(mean) and s.mean_ci == pytest.approx((ci_t.low, ci_t.high))
    assert s.median_text(1).startswith("3.1 [") and "(2/7 censored)" in s.median_text(1)


def test_more_than_half_censored_gives_only_a_bound():
    cell = Cell.of([30.0, math.nan, math.nan, math.nan, 12.0], [C, T, T, T, C], limits=45.0)
    s = summarize(cell)
    assert math.isnan(s.median) and s.bound == 45.0
    assert s.median_text(0) == "> 45 (3/5 censored)"
    assert s.mean_completed == 21.0


def test_left_censored_throughput_median_is_lifelines_left_censoring():
    from lifelines import KaplanMeierFitter

    values = [20.0, 25.0, math.nan, 30.0, 28.0]
    cell = Cell.of(values, [C, C, T, C, C], limits=2.0, censoring=LEFT)
    kmf = KaplanMeierFitter().fit_left_censoring([20.0, 25.0, 2.0, 30.0, 28.0], [1, 1, 0, 1, 1])
    assert summarize(cell).median == kmf.median_survival_time_
    bounded = summarize(Cell.of([20.0, math.nan, math.nan], [C, T, T], limits=2.0, censoring=LEFT))
    assert bounded.bound == 2.0 and bounded.median_text(0).startswith("< 2")


# ---------------------------------------------------------------- the censored model

def _lifelines_fit(a: Cell, b: Cell, formula: str, left: bool = False):
    from lifelines import LogNormalAFTFitter

    rows = [dict(T=v, E=int(c), cell=s, block=str(blk)) for s, cell in ((1, a), (0, b)) for v, c, blk in cell.valid()]
    f = LogNormalAFTFitter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (f.fit_left_censoring if left else f.fit)(pd.DataFrame(rows), "T", "E", formula=formula)
    return f


def _data(seed, n_blocks, per_block, effect_log, limit, censoring="right"):
    rng = np.random.default_rng(seed)
    cells = []
    for shift in (effect_log, 0.0):
        vals, outs, blocks = [], [], []
        for blk in range(n_blocks):
            for _ in range(per_block):
                y = float(np.exp(3 + shift + 0.2 * blk + rng.normal(0, 0.4)))
                cut = y > limit if censoring == "right" else y < limit
                vals.append(math.nan if cut else y)
                outs.append(T if cut else C)
                blocks.append(blk)
        cells.append(Cell.of(vals, outs, blocks, limit, censoring))
    return cells


@pytest.mark.parametrize("censoring, limit", [("right", 28.0), ("left", 19.0)])
def test_unblocked_estimate_is_lifelines_lognormal_aft(censoring, limit):
    a, b = _data(1, 1, 15, 0.3, limit, censoring)
    assert a.censored + b.censored >= 4  # the case is censored
    e = compare(a, b, blocked=False)
    f = _lifelines_fit(a, b, "cell", left=censoring == "left")
    assert e.estimate == pytest.approx(f.params_["mu_"]["cell"], abs=1e-4)
    # lifelines' Wald SE is ours without the small-sample rescaling
    n_done = 30 - a.censored - b.censored
    assert e.se * math.sqrt((n_done - 2) / n_done) == pytest.approx(f.standard_errors_["mu_"]["cell"], rel=2e-3)


def test_blocked_estimate_is_lifelines_with_a_block_covariate():
    a, b = _data(2, 4, 4, -0.25, 25.0)
    assert a.censored + b.censored >= 3
    e = compare(a, b)
    f = _lifelines_fit(a, b, "cell + C(block)")
    assert e.blocks == 4
    assert e.estimate == pytest.approx(f.params_["mu_"]["cell"], abs=1e-4)


def test_uncensored_blocked_compare_is_the_paired_t_test_on_logs():
    a = Cell.of([110.0, 95.0, 130.0, 101.0], blocks=["r1", "r2", "r3", "r4"])
    b = Cell.of([100.0, 90.0, 112.0, 99.0], blocks=["r1", "r2", "r3", "r4"])
    e = compare(a, b)
    ref = st.ttest_rel(np.log(a.values), np.log(b.values), alternative="greater")
    assert e.df == 3 and e.blocks == 4
    assert e.estimate == pytest.approx(np.mean(np.log(a.values) - np.log(b.values)))
    assert e.p_above(0.0) == pytest.approx(ref.pvalue)
    assert e.sd_pair == pytest.approx(np.std(np.log(a.values) - np.log(b.values), ddof=1))


def test_uncensored_unblocked_compare_is_the_pooled_t_test_on_logs():
    a, b = Cell.of([110.0, 95.0, 130.0]), Cell.of([100.0, 90.0, 112.0, 80.0])
    e = compare(a, b)  # no shared blocks: unblocked
    ref = st.ttest_ind(np.log(a.values), np.log(b.values))
    assert e.blocks == 0 and e.df == 5
    assert 2 * min(e.p_above(0), e.p_below(0)) == pytest.approx(ref.pvalue)


def test_all_censored_side_falls_back_to_gehans_permutation_test():
    a = Cell.of([math.nan] * 3, [T] * 3, [0, 1, 2], 45.0)
    b = Cell.of([10.0, 12.0, 11.0], blocks=[0, 1, 2])
    e = compare(a, b)
    assert not e.determined and "a has no completed sample" in e.note
    assert e.p_above(0.0) == pytest.approx(1 / 8)  # 3 blocks: 2^3 arrangements, ours the most extreme
    v = rules.direction(e)
    assert v.verdict == rules.INCONCLUSIVE and v.censored == 3 and "unbounded" in v.text()
    six = compare(Cell.of([math.nan] * 6, [T] * 6, range(6), 45.0), Cell.of([10.0, 12, 11, 9, 13, 10], blocks=range(6)))
    assert six.p_above(0.0) == pytest.approx(1 / 64) and rules.direction(six).verdict == rules.HOLDS
    # a margin shifts a: at +400 % (x5), 45 / 5 = 9 is no longer surely above every b
    assert six.p_above(math.log(5.0)) > 0.025
    unblocked = compare(Cell.of([math.nan] * 5, [T] * 5, limits=45.0), Cell.of([10.0, 12, 11, 9, 13]))
    assert unblocked.p_above(0.0) == pytest.approx(1 / math.comb(10, 5))


def test_gehan_without_censoring_is_the_exact_mann_whitney_test():
    from congestlab.stats import gehan

    a, b = [3.1, 2.2, 5.0, 4.4], [1.0, 2.0, 3.0, 0.5, 2.5]
    ours = gehan.p_values(np.log(a), [True] * 4, np.log(b), [True] * 5, None, None, right=True)
    ref_gt = st.mannwhitneyu(a, b, alternative="greater", method="exact").pvalue
    ref_lt = st.mannwhitneyu(a, b, alternative="less", method="exact").pvalue
    assert ours == pytest.approx((ref_gt, ref_lt))


def test_invalid_samples_are_left_out_and_counted():
    a = Cell.of([110.0, 95.0, 9999.0, 130.0], [C, C, X, C], ["r1", "r2", "r3", "r4"])
    b = Cell.of([100.0, 90.0, 1.0, 112.0], [C, C, X, C], ["r1", "r2", "r3", "r4"])
    e = compare(a, b)
    assert e.invalid == (1, 1) and e.n == (3, 3) and e.blocks == 3


# ---------------------------------------------------------------- rules

def test_direction_decides_both_ways_and_stays_undecided_inside():
    assert rules.direction(effect(0.3, 0.05)).verdict == rules.HOLDS
    assert rules.direction(effect(-0.3, 0.05)).verdict == rules.FAILS
    assert rules.direction(effect(0.05, 0.05)).verdict == rules.INCONCLUSIVE
    assert rules.direction(effect(-0.3, 0.05), greater=False).verdict == rules.HOLDS


def test_equivalence_is_tost_against_the_margin():
    m = math.log1p(0.10)
    assert rules.equivalence(effect(0.0, 0.02), 10).verdict == rules.HOLDS
    assert rules.equivalence(effect(0.0, 0.2), 10).verdict == rules.INCONCLUSIVE  # underpowered: never holds
    assert rules.equivalence(effect(m + 0.3, 0.05), 10).verdict == rules.FAILS
    v = rules.equivalence(effect(0.0, 0.02), 10)
    q = st.t.ppf(0.975, 4)
    assert v.ci_pct == pytest.approx(((math.exp(-q * 0.02) - 1) * 100, (math.exp(q * 0.02) - 1) * 100))
    assert v.p_holds == pytest.approx(st.t.sf((0 + m) / 0.02, 4))


def test_non_inferiority_at_most_and_at_least():
    assert rules.at_most(effect(0.0, 0.03), 10).verdict == rules.HOLDS
    assert rules.at_most(effect(0.5, 0.05), 10).verdict == rules.FAILS
    assert rules.at_least(effect(0.0, 0.03), 10).verdict == rules.HOLDS
    assert rules.at_least(effect(-0.5, 0.05), 10).verdict == rules.FAILS


def test_every_cell_is_intersection_union_with_holm_on_the_failing_side():
    strong = [rules.direction(effect(0.4, 0.05)) for _ in range(3)]
    assert rules.every_cell(strong).verdict == rules.HOLDS
    weak = strong[:2] + [rules.direction(effect(0.05, 0.05))]
    assert rules.every_cell(weak).verdict == rules.INCONCLUSIVE
    # one cell the other way, p just under alpha alone, not after Holm over 6 cells
    p_one = rules.direction(effect(-0.2, 0.2 / st.t.isf(0.02, 4)))
    assert p_one.verdict == rules.FAILS and p_one.p_fails == pytest.approx(0.02)
    combined = rules.every_cell(strong + strong[:2] + [p_one])
    assert combined.verdict == rules.INCONCLUSIVE
    assert combined.cells[-1].p_fails == pytest.approx(6 * 0.02)


def test_holm_is_statsmodels_holm():
    from statsmodels.stats.multitest import multipletests

    for ps in ([0.01, 0.04, 0.03, 0.005], [0.5], [0.02, 0.02, 0.9, 0.001, 0.2]):
        assert rules.holm(ps) == pytest.approx(list(multipletests(ps, method="holm")[1]))


def test_magnitude_holds_when_every_ci_lies_inside_the_range():
    # a wide CI that meets the range but also covers 0 says nothing of the seed's magnitude
    wide = rules.magnitude(effect(math.log1p(0.01), 0.1), 4, 23)
    assert wide.verdict == rules.INCONCLUSIVE
    inside = rules.magnitude(effect(math.log1p(0.10), 0.01), 4, 23)
    outside = rules.magnitude(effect(math.log1p(0.60), 0.03), 4, 23)
    assert inside.verdict == rules.HOLDS and outside.verdict == rules.FAILS
    # a CI just outside, unadjusted: not "holds"; Holm over many cells: not "does not hold" either
    just = rules.magnitude(effect(math.log1p(0.23) + 0.2, 0.2 / st.t.isf(0.02, 4)), 4, 23)
    assert just.verdict == rules.FAILS
    assert rules.every_cell([inside] * 4 + [just]).verdict == rules.INCONCLUSIVE
    assert rules.every_cell([inside] * 4).verdict == rules.HOLDS


def _cells(means: dict, seed: int, n: int = 5):
    rng = np.random.default_rng(seed)
    return {k: Cell.of(np.exp(np.log(m) + rng.normal(0, 0.05, n)), blocks=range(n)) for k, m in means.items()}


def test_best_changes_needs_a_significant_swap():
    swap = {"C1": _cells({"x": 100, "y": 60, "z": 50}, 1), "C2": _cells({"x": 50, "y": 100, "z": 60}, 2)}
    assert rules.best_changes(swap).verdict == rules.HOLDS
    same = {"C1": _cells({"x": 100, "y": 60, "z": 50}, 3), "C2": _cells({"x": 100, "y": 50, "z": 60}, 4)}
    assert rules.best_changes(same).verdict == rules.FAILS
    noise = {"C1": _cells({"x": 100, "y": 99, "z": 98}, 5), "C2": _cells({"x": 98, "y": 100, "z": 99}, 6)}
    assert rules.best_changes(noise).verdict == rules.INCONCLUSIVE


# ---------------------------------------------------------------- sequential design and power

def test_run_sequential_stops_at_the_first_decided_look():
    design = SequentialDesign(6, first_look=3)
    seen = []

    def evaluate(rounds, alpha):
        seen.append((rounds, alpha))
        return rules.direction(effect(0.3 if rounds >= 5 else 0.0, 0.05))

    out = run_sequential(design, evaluate)
    assert out.decided and out.rounds == 5 and out.looks == (3, 4, 5)
    assert [r for r, _ in seen] == [3, 4, 5]
    assert seen[0][1] < seen[1][1] < seen[2][1] < 0.025  # little alpha early
    assert next_step(design, [3, 4], rules.direction(effect(0.0, 0.1))) == "continue"
    assert next_step(design, [3, 4, 5, 6], rules.direction(effect(0.0, 0.1))) == "exhausted"


def test_stats_sits_at_the_bottom_of_the_layers():
    """congestlab/stats/ imports nothing of congestlab but errors and itself."""
    import ast
    import pathlib

    import congestlab.stats

    for path in pathlib.Path(congestlab.stats.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                if name.startswith("congestlab"):
                    assert name == "congestlab.errors" or name.startswith("congestlab.stats"), f"{path.name}: {name}"


def _direction_over_rounds(a: Cell, b: Cell, blocks: list, r: int, alpha: float) -> rules.Verdict:
    """"a is greater" over the first `r` of `blocks`."""
    return rules.direction(compare(a.first_blocks(set(blocks[:r])), b.first_blocks(set(blocks[:r]))), True, alpha)


def test_random_cells_never_raise_and_verdicts_stay_in_range():
    """Seeded fuzz: any well-formed cells (empty, all censored, all invalid, tiny or huge values,
    blocks shared or not) give a verdict, never an exception."""
    rng = np.random.default_rng(7)
    design = SequentialDesign(5, first_look=2)
    for i in range(400):
        side = rng.choice([LEFT, "right"])
        cells = []
        for _ in range(2):
            n = int(rng.integers(0, 7))
            scale = 10.0 ** rng.uniform(-6, 6)
            values = list(scale * np.exp(rng.normal(0, rng.uniform(0.01, 2), n)))
            outcomes = list(rng.choice([C, C, C, T, X], n))
            blocks = list(rng.integers(0, 5, n)) if rng.random() < 0.8 else None
            limits = list(scale * np.exp(rng.normal(0, 1, n)))
            cells.append(Cell.of([v if o == C else math.nan for v, o in zip(values, outcomes)], outcomes, blocks,
                                 limits, side))
        a, b = cells
        e = compare(a, b)
        for v in (rules.direction(e), rules.direction(e, greater=False), rules.equivalence(e, 10),
                  rules.at_most(e, 10), rules.at_least(e, 10), rules.magnitude(e, 4, 23)):
            assert v.verdict in (rules.HOLDS, rules.FAILS, rules.INCONCLUSIVE)
            assert 0 <= v.p_holds <= 1 and 0 <= v.p_fails <= 1
            assert not v.ci_pct[0] > v.ci_pct[1]
            v.text()
        assert rules.every_cell([rules.direction(e), rules.equivalence(e, 5)]).verdict in (
            rules.HOLDS, rules.FAILS, rules.INCONCLUSIVE)
        for cell in cells if i % 8 == 0 else ():  # lifelines' KM takes ~25 ms a fit
            s = summarize(cell)
            s.median_text(), s.mean_text()
        if a.n and b.n:
            blocks = sorted({blk for blk in a.blocks + b.blocks if blk is not None})
            if len(blocks) >= 2:
                out = run_sequential(design, partial(_direction_over_rounds, a, b, blocks),
                                     rounds_available=len(blocks))
                assert out.verdict.verdict in (rules.HOLDS, rules.FAILS, rules.INCONCLUSIVE)


def test_bad_designs_and_mixed_censoring_are_one_line_errors():
    with pytest.raises(StatsInputError, match="first look"):
        SequentialDesign(2, first_look=3)
    with pytest.raises(StatsInputError, match="different sides"):
        compare(Cell.of([1.0]), Cell.of([1.0], censoring=LEFT))
    with pytest.raises(StatsInputError, match="no look"):
        run_sequential(SequentialDesign(6), lambda r, a: rules.direction(effect(0, 1)), rounds_available=2)


def test_gehan_counts_large_permutation_sets_exactly():
    from congestlab.stats import gehan

    rng = np.random.default_rng(3)
    a, b = list(rng.normal(0.3, 1, 9)), list(rng.normal(0, 1, 9))
    done = [True] * 9
    counted = gehan.p_values(a, done, b, done, None, None, right=True)  # C(18, 9) = 48620 arrangements
    ref = st.mannwhitneyu(np.exp(a), np.exp(b), alternative="greater", method="exact").pvalue
    assert counted[0] == pytest.approx(ref, rel=1e-9)
    # a stratum too large to count: the normal approximation, as scipy's asymptotic Mann-Whitney
    big_a, big_b = list(rng.normal(0.3, 1, 150)), list(rng.normal(0, 1, 150))
    approx = gehan.p_values(big_a, [True] * 150, big_b, [True] * 150, None, None, right=True)
    ref = st.mannwhitneyu(big_a, big_b, alternative="greater", method="asymptotic").pvalue
    assert approx[0] == pytest.approx(ref, rel=1e-6)


def test_blocked_gehan_without_censoring_is_a_signed_rank_test():
    """Aligned within each pair, the scores of a +-d/2 pair are +-(2 rank(|d|) - 1): a signed-rank
    test with scores 2r - 1 (Wilcoxon's are r), counted exactly over the 2^n sign flips."""
    from itertools import product

    from congestlab.stats import gehan

    rng = np.random.default_rng(5)
    d = rng.normal(0.4, 1, 7)
    ours = gehan.p_values(list(d), [True] * 7, [0.0] * 7, [True] * 7, range(7), range(7), right=True)
    score = 2 * st.rankdata(np.abs(d)) - 1
    observed = np.sum(score[d > 0])
    flips = [np.sum(score[np.array(signs, bool)]) for signs in product([0, 1], repeat=7)]
    assert ours[0] == pytest.approx(np.mean(np.array(flips) >= observed - 1e-9))
