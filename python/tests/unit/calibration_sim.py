"""The calibration's machinery (docs/statistics.md, "Calibration"): simulated claims with a known
truth through the real engine, every look of the sequential design, and the error each side makes.

Each claim is evaluated at every look (rounds FIRST_LOOK .. max_rounds) with the engine's rule;
its (p(holds), p(does not hold)) there do not depend on the level (a rule compares them with it),
so one simulation decides under several schedules of look levels: the design's
(stats/sequential.py) and two negative controls, every look's level doubled and no spending at all
(each look at the full 2.5 %). `decide` is run_sequential's decision on those p's (a test checks
they agree).

Errors are counted per side: where the truth sits on a test's boundary (no effect for a
direction, the margin of an equivalence or a non-inferiority, a range's edge) a decision that way
is that test's type I error, at most ALPHA at the design. The check allows ALPHA plus Monte Carlo
error: the count may not exceed the (1 - FALSE_ALARM) quantile of Binomial(n, ALPHA).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy.stats import binom

import calibration_data
from congestlab.stats import rules
from congestlab.stats.median_ratio import compare
from congestlab.stats.outcomes import COMPLETE, TIMED_OUT
from congestlab.stats.samples import Cell
from congestlab.stats.sequential import SequentialDesign

BASE_MS = 100.0
BLOCK_SD = 0.3          # a round's level, shared by the cells of the round (log scale)
FIRST_LOOK = 3
ALPHA = rules.ALPHA
FALSE_ALARM = 0.01      # the chance that a correct design fails a check (Bonferroni over scenarios)
POWER_MIN = 0.80
SCHEDULES = ("design", "doubled", "no spending")


@dataclass
class Scenario:
    name: str
    claims: int
    effects: list[float]                  # per compared pair: log(a / b), the truth
    sigma: float                          # within-round sd on the log scale (model data)
    limit_log: float | None               # timeout at BASE_MS * e^limit_log, None: no censoring
    max_rounds: int
    rule: Callable[[list, float], rules.Verdict]
    wrong: str                            # the verdict that is wrong for this truth
    correct: str | None = None            # the verdict that is right, where the truth is an effect
    promised: bool = True                 # the power estimate promises >= 80 % of it (else only shown)
    both_sides: bool = False              # the truth on both tests' boundaries: either decision is a side's error
    tight: bool = False                   # the design spends all its alpha here: where a broken procedure shows
    data: str = "model"                   # model | heavy tails | unequal spread | drift (stored runs)
    extra: dict = field(default_factory=dict)

    def log_values(self, rng: np.random.Generator, effect: float) -> tuple[np.ndarray, np.ndarray]:
        """(log a, log b) per round, around log BASE_MS."""
        n = self.max_rounds
        if self.data == "model":
            level = rng.normal(0, BLOCK_SD, n)
            return effect + level + rng.normal(0, self.sigma, n), level + rng.normal(0, self.sigma, n)
        wide, narrow = calibration_data.residuals("cubic-compound"), calibration_data.residuals("ipv6")
        if self.data == "heavy tails":
            pool_a = pool_b = np.concatenate([wide, narrow])
        else:
            pool_a, pool_b = (wide, narrow) if self.data == "unequal spread" else (narrow, narrow)
        ra, rb = rng.choice(pool_a, n), rng.choice(pool_b, n)
        if self.data == "drift":  # the run's own drift as the rounds' levels; a round's two GETs
            series = calibration_data.run_drift()  # drift apart by a real step, in random order
            start = int(rng.integers(0, len(series) - n + 1))
            level = series[start:start + n] * self.extra.get("drift_scale", 1.0)
            step = rng.choice(calibration_data.pair_steps(), n)
            a_second = rng.random(n) < 0.5
            ra, rb = ra + np.where(a_second, step, 0.0), rb + np.where(a_second, 0.0, step)
        else:
            level = rng.normal(0, BLOCK_SD, n)
        return effect + level + ra, level + rb

    def cells(self, rng: np.random.Generator) -> list[tuple[Cell, Cell]]:
        n = self.max_rounds
        pairs = []
        for eff in self.effects:
            made = []
            for y in (np.exp(x) * BASE_MS for x in self.log_values(rng, eff)):
                if self.limit_log is None:
                    made.append(Cell.of(y, blocks=range(n)))
                else:
                    limit = BASE_MS * math.exp(self.limit_log)
                    out = [COMPLETE if v < limit else TIMED_OUT for v in y]
                    made.append(Cell.of([v if v < limit else math.nan for v in y], out, range(n), limit))
            pairs.append(tuple(made))
        return pairs

    def evaluate(self, pairs, rounds: int, alpha: float = ALPHA) -> rules.Verdict:
        """The rule on the first `rounds` rounds, its tests at `alpha`."""
        keep = set(range(rounds))
        return self.rule([compare(a.first_blocks(keep), b.first_blocks(keep)) for a, b in pairs], alpha)


def looks(max_rounds: int) -> list[int]:
    return SequentialDesign(max_rounds, FIRST_LOOK).looks()


def p_paths(s: Scenario, seed: int) -> np.ndarray:
    """(claims x looks x 2): each claim's p(holds), p(does not hold) at every look."""
    rng = np.random.default_rng(seed)
    out = np.empty((s.claims, len(looks(s.max_rounds)), 2))
    for i in range(s.claims):
        data = s.cells(rng)
        for k, r in enumerate(looks(s.max_rounds)):
            v = s.evaluate(data, r)
            out[i, k] = v.p_holds, v.p_fails
    return out


def schedule(name: str, max_rounds: int) -> list[float]:
    """The look levels of the design, or of a negative control."""
    design = SequentialDesign(max_rounds, FIRST_LOOK)
    taken = design.looks()
    levels = [design.level_at(taken[:k + 1]) for k in range(len(taken))]
    return {"design": levels, "doubled": [2 * x for x in levels], "no spending": [ALPHA] * len(levels)}[name]


def decide(paths: np.ndarray, levels: list[float]) -> tuple[list[str], np.ndarray]:
    """Each claim's verdict and the rounds it used: the first look where a side's p lies below
    the look's level (does not hold first, as stats.rules decides), else inconclusive."""
    lv = np.array(levels)[None, :]
    fails, holds = paths[:, :, 1] < lv, paths[:, :, 0] < lv
    decided = fails | holds
    first = np.where(decided.any(axis=1), decided.argmax(axis=1), paths.shape[1] - 1)
    rows = np.arange(len(paths))
    verdicts = np.where(~decided.any(axis=1), rules.INCONCLUSIVE,
                        np.where(fails[rows, first], rules.FAILS, rules.HOLDS))
    return list(verdicts), first + FIRST_LOOK


@dataclass
class Outcome:
    counts: dict[str, int]
    errors: int            # decisions that are a side's type I error
    trials: int            # claims x sides counted
    mean_rounds: float

    @property
    def rate(self) -> float:
        return self.errors / self.trials


def outcome(s: Scenario, paths: np.ndarray, levels: list[float]) -> Outcome:
    verdicts, rounds = decide(paths, levels)
    counts = {v: verdicts.count(v) for v in (rules.HOLDS, rules.FAILS, rules.INCONCLUSIVE)}
    if s.both_sides:
        errors, trials = counts[rules.HOLDS] + counts[rules.FAILS], 2 * s.claims
    else:
        errors, trials = counts[s.wrong], s.claims
    return Outcome(counts, errors, trials, float(np.mean(rounds)))


def allowed(trials: int, tests: int = 1) -> int:
    """The most errors a design at ALPHA makes in `trials` but with chance FALSE_ALARM / tests."""
    return int(binom.ppf(1 - FALSE_ALARM / tests, trials, ALPHA))


def check(scenarios: list[Scenario], outcomes: list[Outcome]) -> list[str]:
    """What fails the calibration: a scenario beyond its allowance (Bonferroni over the scenarios),
    or the pooled errors of the scenarios whose truth is on a boundary, all and the tight ones."""
    counted = list(zip(scenarios, outcomes))
    bad = [f"{s.name}: {o.errors}/{o.trials} > {allowed(o.trials, len(counted))}" for s, o in counted
           if o.errors > allowed(o.trials, len(counted))]
    null = [(s, o) for s, o in counted if s.correct is None]
    for what, group in (("all", null), ("tight", [(s, o) for s, o in null if s.tight])):
        errors, trials = sum(o.errors for _, o in group), sum(o.trials for _, o in group)
        if trials and errors > allowed(trials):
            bad.append(f"pooled over {what} ({len(group)}): {errors}/{trials} = {errors / trials:.2%} > "
                       f"{allowed(trials)}")
    return bad


def table(scenarios: list[Scenario], per_schedule: dict[str, list[Outcome]]) -> str:
    lines = [f"{'scenario':62} {'claims':>6} {'holds':>5} {'fails':>5} {'incon':>5} {'rounds':>6} {'error':>6} "
             f"{'x2 lvl':>6} {'no spd':>6} {'correct':>7}"]
    for i, s in enumerate(scenarios):
        o = per_schedule["design"][i]
        correct = f"{o.counts[s.correct] / s.claims:.1%}" if s.correct else "–"
        rates = [per_schedule[k][i].rate for k in SCHEDULES]
        lines.append(f"{s.name[:62]:62} {s.claims:6d} {o.counts[rules.HOLDS]:5d} {o.counts[rules.FAILS]:5d} "
                     f"{o.counts[rules.INCONCLUSIVE]:5d} {o.mean_rounds:6.2f} "
                     + " ".join(f"{r:6.1%}" for r in rates) + f" {correct:>7}")
    for k in SCHEDULES:
        group = [(s, o) for s, o in zip(scenarios, per_schedule[k]) if s.correct is None]
        tight = [(s, o) for s, o in group if s.tight]
        lines.append(f"{k}: errors per side where the truth is on a boundary {_pool(group)}; tight scenarios "
                     f"{_pool(tight)}")
    return "\n".join(lines)


def _pool(group) -> str:
    errors, trials = sum(o.errors for _, o in group), sum(o.trials for _, o in group)
    return f"{errors}/{trials} = {errors / trials:.2%} (allowed {allowed(trials)})" if trials else "–"
