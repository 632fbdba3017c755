"""Calibration of the statistics engine (docs/statistics.md, "Calibration"): a check that can fail.

Simulated claims with a known truth go through the real engine at every look of the sequential
design (python/tests/unit/calibration_sim.py): cells of log-normal delays with a per-round level
shared by both cells, and cells resampled from stored runs' GETs (python/tests/unit/calibration_data.py:
heavy tails, unequal spread, a run's drift), right-censored at a timeout where a scenario says so.
Errors are counted per side and must stay within ALPHA plus Monte Carlo error, per scenario and
pooled; the same claims decided with every look's level doubled, and with no alpha spending at all,
must fail that check (negative controls). Where the power estimate (congestlab/stats/power.py)
promises 80 %, at least 80 % must decide correctly. Seeded: the numbers are the same on every run.
The table prints with `-s` and as the report section "calibration" with `-rP`; a larger run:
python/benchmarks/calibration.py.

    .venv/bin/pytest -q -s -rP python/tests/unit/test_stats_calibration.py
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest
from scipy.stats import norm

from calibration_sim import (BASE_MS, BLOCK_SD, FIRST_LOOK, POWER_MIN, SCHEDULES, Scenario, check, decide, looks,
                             outcome, p_paths, schedule, table)
from congestlab.stats import power, rules
from congestlab.stats.samples import Cell
from congestlab.stats.sequential import SequentialDesign, run_sequential


def censored_fraction(effects: list[float], sigma: float, limit_log: float) -> float:
    """The expected share of timed-out samples over both cells of every pair."""
    sd = math.hypot(sigma, BLOCK_SD)
    shares = [norm.sf((limit_log - shift) / sd) for e in effects for shift in (e, 0.0)]
    return sum(shares) / len(shares)


def _direction(effects, alpha):
    return rules.direction(effects[0], True, alpha)


def _equivalence(effects, alpha):
    return rules.equivalence(effects[0], 10.0, alpha)


def _at_most(effects, alpha):
    return rules.at_most(effects[0], 10.0, alpha)


def _every_cell(effects, alpha):
    return rules.every_cell([rules.direction(e, True, alpha) for e in effects])


def _magnitude(effects, alpha):
    return rules.every_cell([rules.magnitude(e, 4.0, 23.0, alpha) for e in effects])


def _magnitude_one(effects, alpha):
    return rules.magnitude(effects[0], 4.0, 23.0, alpha)


def scenarios(scale: float = 1.0) -> list[Scenario]:
    def n(claims: int) -> int:
        return max(1, round(claims * scale))

    sd_pair = 0.25 * math.sqrt(2)
    small = power.detectable_distance(6, sd_pair, FIRST_LOOK)     # what 6 rounds detect with 80 %
    cens_effect, cens_limit = 0.35, 0.6
    cf = censored_fraction([cens_effect], 0.25, cens_limit)
    cens_rounds = power.rounds_needed(sd_pair, distance=cens_effect, censored_fraction=cf, first_look=FIRST_LOOK)
    eq_sd_pair = 0.05 * math.sqrt(2)
    eq_rounds = power.rounds_needed(eq_sd_pair, equivalence=(0.0, math.log1p(0.10)), first_look=FIRST_LOOK)
    margin = math.log1p(0.10)
    lo, hi = math.log1p(0.04), math.log1p(0.23)
    range_mid = (lo + hi) / 2
    range_rounds = power.rounds_needed(eq_sd_pair, interval=(range_mid, lo, hi), first_look=FIRST_LOOK)
    holding = power.UndecidedCell(rules.HOLDS, sd_pair, distance=small)
    every3_rounds = power.claim_rounds_needed(power.UndecidedClaim(rules.HOLDS, (holding,) * 3, 3), FIRST_LOOK)
    failing = power.UndecidedCell(rules.FAILS, sd_pair, distance=small)
    holm4_rounds = power.claim_rounds_needed(power.UndecidedClaim(rules.FAILS, (failing,), 4), FIRST_LOOK)
    both = dict(both_sides=True)
    return [
        # the truth on a boundary: every decision is a side's type I error
        Scenario("direction, no effect", n(400), [0.0], 0.25, None, 8, _direction, rules.HOLDS, tight=True, **both),
        Scenario("equivalence ±10 %, truth at the margin", n(300), [margin], 0.05, None, 10, _equivalence,
                 rules.HOLDS, tight=True, **both),
        Scenario("at most +10 %, truth at the margin", n(300), [margin], 0.05, None, 10, _at_most, rules.HOLDS,
                 tight=True, **both),
        Scenario("magnitude 4..23 %, truth at the edge +23 %", n(300), [hi], 0.05, None, 10, _magnitude_one,
                 rules.HOLDS, tight=True, **both),
        Scenario("direction, no effect, censored ~10 % (rank test)", n(150), [0.0], 0.25, 0.3, 8, _direction,
                 rules.HOLDS, **both),
        Scenario("equivalence, at the margin, censored", n(100), [margin], 0.05, 0.3, 10, _equivalence, rules.HOLDS,
                 **both),
        Scenario("direction, no effect, half censored", n(150), [0.0], 0.25, 0.0, 10, _direction, rules.HOLDS,
                 **both),
        Scenario("in every cell, one of 3 without effect", n(150), [0.0, 0.8, 0.8], 0.25, None, 8, _every_cell,
                 rules.HOLDS),
        # resampled from stored runs' GETs
        Scenario("stored GETs, heavy tails, no effect", n(300), [0.0], 0.0, None, 8, _direction, rules.HOLDS,
                 data="heavy tails", **both),
        Scenario("stored GETs, unequal spread (cubic-compound vs ipv6), no effect", n(300), [0.0], 0.0, None, 8,
                 _direction, rules.HOLDS, data="unequal spread", **both),
        Scenario("stored GETs, a run's drift and back-to-back steps, no effect", n(300), [0.0], 0.0, None, 8,
                 _direction, rules.HOLDS, data="drift", **both),
        Scenario("stored GETs, heavy tails, no effect, censored ~15 %", n(100), [0.0], 0.0, 0.45, 8, _direction,
                 rules.HOLDS, data="heavy tails", **both),
        Scenario("stored GETs, equivalence ±10 % at the margin, unequal spread", n(150), [margin], 0.0, None, 10,
                 _equivalence, rules.HOLDS, data="unequal spread", **both),
        # an effect: the verdict the truth calls for, as often as the power estimate promises
        Scenario(f"direction, small effect {small:.3f} (6 rounds)", n(1000), [small], 0.25, None, 6, _direction,
                 rules.FAILS, rules.HOLDS),
        Scenario(f"direction, effect {cens_effect} censored {cf:.0%} ({cens_rounds} rounds)", n(100), [cens_effect],
                 0.25, cens_limit, cens_rounds, _direction, rules.FAILS, rules.HOLDS),
        Scenario(f"direction, large effect {3 * small:.3f}", n(100), [3 * small], 0.25, None, 6, _direction,
                 rules.FAILS, rules.HOLDS),
        Scenario(f"equivalence, no effect ({eq_rounds} rounds)", n(150), [0.0], 0.05, None, eq_rounds, _equivalence,
                 rules.FAILS, rules.HOLDS),
        Scenario("direction, a's GETs nearly all time out (effect 1.5)", n(100), [1.5], 0.25, 0.5, 10, _direction,
                 rules.FAILS, rules.HOLDS, promised=False),
        Scenario(f"magnitude 4..23 %, truth in the middle +{math.expm1(range_mid):.1%} ({range_rounds} rounds)",
                 n(150), [range_mid], 0.05, None, range_rounds, _magnitude_one, rules.FAILS, rules.HOLDS),
        Scenario(f"magnitude 4..23 % in 3 cells, truth in the middle ({range_rounds + 4} rounds)", n(60),
                 [range_mid] * 3, 0.05, None, range_rounds + 4, _magnitude, rules.FAILS, rules.HOLDS, promised=False),
        Scenario(f"every cell of 3 at +{small:.3f}, 6 rounds (one cell's need)", n(100), [small] * 3, 0.25, None, 6,
                 _every_cell, rules.FAILS, rules.HOLDS, promised=False),
        Scenario(f"every cell of 3 at +{small:.3f}, {every3_rounds} rounds (claim's estimate)", n(400),
                 [small] * 3, 0.25, None, every3_rounds, _every_cell, rules.FAILS, rules.HOLDS),
        Scenario(f"1 of 4 cells at -{small:.3f}, 6 rounds (one cell, no Holm)", n(100), [-small] + [3 * small] * 3,
                 0.25, None, 6, _every_cell, rules.HOLDS, rules.FAILS, promised=False),
        Scenario(f"1 of 4 cells at -{small:.3f}, {holm4_rounds} rounds (claim's, Holm)", n(200),
                 [-small] + [3 * small] * 3, 0.25, None, holm4_rounds, _every_cell, rules.HOLDS, rules.FAILS),
        Scenario(f"stored GETs, heavy tails, effect {small:.3f} (6 rounds)", n(150), [small], 0.0, None, 6,
                 _direction, rules.FAILS, rules.HOLDS, promised=False, data="heavy tails"),
        BestScenario("best changes with the level: the same cell best at both", n(100), [], 0.1, None, 8, None,
                     rules.HOLDS, rules.FAILS, promised=False, means=SAME_BEST),
        BestScenario("best changes with the level: x, then y (0.3 apart)", n(100), [], 0.1, None, 8, None,
                     rules.FAILS, rules.HOLDS, promised=False, means=SWAPPED),
    ]


SAME_BEST = {"C1": {"x": 0.2, "y": 0.1, "z": 0.0}, "C2": {"x": 0.2, "y": 0.1, "z": 0.0}}
SWAPPED = {"C1": {"x": 0.4, "y": 0.1, "z": 0.0}, "C2": {"x": 0.0, "y": 0.4, "z": 0.1}}


@dataclass
class BestScenario(Scenario):
    """"The best changes with the level" over 3 cells x 2 levels, log-means per level and cell."""

    means: dict = None

    def cells(self, rng: np.random.Generator) -> dict:
        n = self.max_rounds
        levels = {}
        for level, cells in self.means.items():
            shared = rng.normal(0, BLOCK_SD, n)
            levels[level] = {name: Cell.of(BASE_MS * np.exp(mu + shared + rng.normal(0, self.sigma, n)),
                                           blocks=range(n))
                             for name, mu in cells.items()}
        return levels

    def evaluate(self, levels: dict, rounds: int, alpha: float = rules.ALPHA) -> rules.Verdict:
        keep = set(range(rounds))
        return rules.best_changes({lv: {k: c.first_blocks(keep) for k, c in cells.items()}
                                   for lv, cells in levels.items()}, "highest", alpha)


def run_calibration(scale: float = 1.0) -> tuple[list[Scenario], dict]:
    found = scenarios(scale)
    paths = [p_paths(s, seed) for seed, s in enumerate(found, start=2026)]
    per_schedule = {k: [outcome(s, p, schedule(k, s.max_rounds)) for s, p in zip(found, paths)] for k in SCHEDULES}
    return found, per_schedule


@pytest.fixture(scope="module")
def calibration():
    return run_calibration()


def test_calibration_errs_within_alpha_decides_and_keeps_its_power(calibration, request):
    found, per_schedule = calibration
    text = table(found, per_schedule)
    print("\n" + text)
    request.node.add_report_section("call", "calibration", text)
    design = per_schedule["design"]
    assert not check(found, design), f"{check(found, design)}\n{text}"
    silent = [s.name for s, o in zip(found, design) if not o.counts[rules.HOLDS] + o.counts[rules.FAILS]]
    assert not silent, f"scenarios that decide nothing (their 0 % wrong says nothing): {silent}"
    weak = [f"{s.name}: {o.counts[s.correct] / s.claims:.1%}" for s, o in zip(found, design)
            if s.correct and s.promised and o.counts[s.correct] / s.claims < POWER_MIN]
    assert not weak, f"decided correctly below {POWER_MIN:.0%} where the power estimate promises it: {weak}\n{text}"


def test_negative_controls_fail_the_calibration(calibration):
    """The same claims with every look's level doubled, and with each look at the full 2.5 %
    (no alpha spending): both must fail the check the design passes."""
    found, per_schedule = calibration
    for control in ("doubled", "no spending"):
        assert check(found, per_schedule[control]), f"the calibration passes a broken procedure ({control})"


def test_decide_is_run_sequential():
    """`decide` on recorded p-values gives run_sequential's verdicts and rounds."""
    s = scenarios(0.1)[0]
    paths = p_paths(s, 5)
    verdicts, rounds = decide(paths, schedule("design", s.max_rounds))
    rng = np.random.default_rng(5)
    design = SequentialDesign(s.max_rounds, FIRST_LOOK)
    for i in range(s.claims):
        out = run_sequential(design, partial(s.evaluate, s.cells(rng)))
        assert (out.verdict.verdict, out.rounds) == (verdicts[i], rounds[i])
    assert len(looks(s.max_rounds)) == paths.shape[1]
