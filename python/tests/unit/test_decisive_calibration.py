"""Calibration of `--until-decisive` (docs/statistics.md, "Calibration of --until-decisive").

The run-level sequential procedure (congestlab/decisive/procedure.py) drives simulated runs with a
known truth: a chain of points p0 .. p3 whose claims compare neighbours (c0: p0 vs p1, c1: p1 vs
p2, c2: p2 vs p3), so claims share points. Each round adds one log-normal sample (a round level
shared by every point of the round, as a machine's load is) to the points the procedure asks
for, right-censored at a timeout where the scenario says so. The real engine decides each look
(congestlab/stats: compare, rules) at the level the procedure gives. Per scenario it counts the
wrong decided verdicts and, where the power estimate says the rounds detect the effect, the share
decided correctly; and it checks that a round ran exactly the points feeding an undecided claim.
The wrong verdicts may not exceed 2.5 % plus Monte Carlo error (python/tests/unit/calibration_sim.py
`allowed`), per scenario and pooled; the same runs with every look's level doubled, and with no
alpha spending, must exceed it (negative controls).

    .venv/bin/pytest -q -s -rP python/tests/unit/test_decisive_calibration.py
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np
import pytest
from scipy.stats import norm

from calibration_sim import ALPHA, allowed
from congestlab.decisive.procedure import DECIDED, Procedure
from congestlab.stats import power, rules
from congestlab.stats.median_ratio import compare
from congestlab.stats.outcomes import COMPLETE, TIMED_OUT
from congestlab.stats.samples import Cell

BASE_MS = 100.0
ROUND_SD = 0.3
FIRST_LOOK = 3
POWER_MIN = 0.80
LEVELS = {"design": 1.0, "doubled": 2.0, "no spending": None}  # the look's level x factor; None: ALPHA
MARGIN_PCT = 10.0
POINTS = ("p0", "p1", "p2", "p3")
CLAIMS = {"c0": ("p0", "p1"), "c1": ("p1", "p2"), "c2": ("p2", "p3")}


@dataclass
class Scenario:
    name: str
    studies: int                  # simulated runs; 3 claims each
    effects: tuple[float, ...]    # truth of c0, c1, c2: log(a / b)
    sigma: float                  # within-round sd (log scale)
    limit_log: float | None       # timeout at BASE_MS * e^limit_log
    max_rounds: int
    rule: str                     # direction (a > b) or equivalence (within MARGIN_PCT)
    wrong: str
    correct: str | None = None    # where the power estimate promises >= 80 % of it

    def means(self) -> dict[str, float]:
        mu = [0.0]
        for e in self.effects:
            mu.append(mu[-1] - e)
        return dict(zip(POINTS, mu))


def _verdict(s: Scenario, a: Cell, b: Cell, level: float) -> str:
    e = compare(a, b)
    if s.rule == "direction":
        return rules.direction(e, True, level).verdict
    return rules.equivalence(e, MARGIN_PCT, level).verdict


def _cell(samples: dict[int, float], limit: float) -> Cell:
    """A point's samples by round, right-censored at `limit`."""
    rounds = sorted(samples)
    ys = [samples[r] for r in rounds]
    out = [COMPLETE if y < limit else TIMED_OUT for y in ys]
    return Cell.of([y if y < limit else math.nan for y in ys], out, rounds,
                   limit if math.isfinite(limit) else None)


def _evaluate(s: Scenario, samples: dict[str, dict[int, float]], limit: float, claim: str, level: float) -> str:
    a, b = CLAIMS[claim]
    return _verdict(s, _cell(samples[a], limit), _cell(samples[b], limit), level)


class Control(Procedure):
    """The procedure with every look's level doubled, or at the full ALPHA (no spending)."""

    factor: float | None = 1.0

    def level(self) -> float:
        return ALPHA if self.factor is None else self.factor * super().level()


def simulate(s: Scenario, seed: int, schedule: str = "design") -> dict:
    rng = np.random.default_rng(seed)
    mu = s.means()
    counts = {c: {rules.HOLDS: 0, rules.FAILS: 0, rules.INCONCLUSIVE: 0} for c in CLAIMS}
    runs = 0
    for _ in range(s.studies):
        samples: dict[str, dict[int, float]] = {p: {} for p in POINTS}
        levels: dict[int, float] = {}
        proc = Control(Procedure.new(POINTS, s.max_rounds, first_look=FIRST_LOOK).state)
        proc.factor = LEVELS[schedule]
        limit = BASE_MS * math.exp(s.limit_log) if s.limit_log is not None else math.inf
        evaluate = partial(_evaluate, s, samples, limit)
        while True:
            wanted = proc.runs_wanted()
            if not wanted:
                break
            for p, r in wanted:
                level = levels.setdefault(r, rng.normal(0, ROUND_SD))
                samples[p][r] = BASE_MS * math.exp(mu[p] + level + rng.normal(0, s.sigma))
            runs += len(wanted)
            before = dict(proc.state["decided"])
            proc.look(list(CLAIMS), evaluate, lambda c: set(CLAIMS[c]),
                      {p: len(v) for p, v in samples.items()}, 0.0, runs)
            look = proc.state["looks"][-1]
            undecided = [c for c in CLAIMS if c not in proc.state["decided"]]
            # a round runs exactly the points feeding a claim still undecided; decided verdicts stay
            assert set(look["next_points"]) == ({p for c in undecided for p in CLAIMS[c]}
                                                if not proc.stopped else set())
            assert all(proc.state["decided"][c] == v for c, v in before.items())
        assert proc.stopped and (proc.state["stopped_by"] == DECIDED) == (not undecided)
        for c, v in proc.final_verdicts(list(CLAIMS)).items():
            counts[c][v] += 1
    claims = s.studies * len(CLAIMS)
    total = {v: sum(counts[c][v] for c in CLAIMS) for v in counts["c0"]}
    # no effect, or the truth at the margin: either decision is a side's type I error
    errors, trials = ((total[rules.HOLDS] + total[rules.FAILS], 2 * claims) if not s.correct
                      else (total[s.wrong], claims))
    return {"claims": claims, **total, "wrong": total[s.wrong] / claims, "errors": errors, "trials": trials,
            "correct": total[s.correct] / claims if s.correct else math.nan,
            "runs_per_point": runs / (s.studies * len(POINTS))}


def scenarios() -> list[Scenario]:
    sd_pair = 0.25 * math.sqrt(2)
    detect6 = power.detectable_distance(6, sd_pair, FIRST_LOOK)  # what 6 rounds detect with 80 %
    margin = math.log1p(MARGIN_PCT / 100)
    eq_rounds = power.rounds_needed(0.05 * math.sqrt(2), equivalence=(0.0, margin), first_look=FIRST_LOOK)
    cens_effect, cens_limit = 0.35, 0.6  # ~16 % censored: the rounds the estimate asks at that share
    shares = [norm.sf((cens_limit - m) / math.hypot(0.25, ROUND_SD)) for m in (0.0, -0.35, -0.7, -1.05)]
    cens_rounds = power.rounds_needed(sd_pair, distance=cens_effect, censored_fraction=float(np.mean(shares[:2])),
                                      first_look=FIRST_LOOK)
    return [
        Scenario("direction, no effect", 90, (0.0, 0.0, 0.0), 0.25, None, 8, "direction", rules.HOLDS),
        Scenario("direction, no effect, censored ~10 %", 60, (0.0, 0.0, 0.0), 0.25, 0.4, 8, "direction",
                 rules.HOLDS),
        Scenario("equivalence ±10 %, truth at the margin", 70, (margin,) * 3, 0.05, None, 10, "equivalence",
                 rules.HOLDS),
        Scenario("equivalence, at the margin, censored", 40, (margin,) * 3, 0.05, 0.3, 10, "equivalence",
                 rules.HOLDS),
        Scenario(f"direction, small effect {detect6:.3f} (6 rounds detect it)", 130, (detect6,) * 3, 0.25, None, 6,
                 "direction", rules.FAILS, rules.HOLDS),
        Scenario(f"direction, effect {cens_effect}, censored ({cens_rounds} rounds)", 40, (cens_effect,) * 3, 0.25,
                 cens_limit, cens_rounds, "direction", rules.FAILS, rules.HOLDS),
        Scenario(f"direction, large effect {3 * detect6:.3f}", 40, (3 * detect6,) * 3, 0.25, None, 6, "direction",
                 rules.FAILS, rules.HOLDS),
        Scenario(f"equivalence, no effect ({eq_rounds} rounds)", 40, (0.0,) * 3, 0.05, None, eq_rounds,
                 "equivalence", rules.FAILS, rules.HOLDS),
    ]


@pytest.fixture(scope="module")
def calibration() -> list[tuple[Scenario, dict]]:
    return [(s, simulate(s, seed)) for seed, s in enumerate(scenarios(), start=2811)]


def too_wrong(found: list[tuple[Scenario, dict]]) -> list[str]:
    """Errors beyond 2.5 % per side plus Monte Carlo error: per scenario (Bonferroni over them),
    pooled over those without an effect, and over those of them without censoring (the design
    spends all of its alpha there)."""
    bad = [f"{s.name}: {r['errors']}/{r['trials']}" for s, r in found
           if r["errors"] > allowed(r["trials"], len(found))]
    null = [(s, r) for s, r in found if not s.correct]
    uncensored = [x for x in null if x[0].limit_log is None]
    for what, group in (("without an effect", null), ("without censoring", uncensored)):
        errors, trials = sum(r["errors"] for _, r in group), sum(r["trials"] for _, r in group)
        if errors > allowed(trials):
            bad.append(f"pooled {what}: {errors}/{trials} = {errors / trials:.2%} > {allowed(trials)}")
    return bad


def test_decisive_calibration(calibration, capsys):
    header = "| scenario | claims | holds | does not hold | inconclusive | rounds per point | wrong | correct |"
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    for s, r in calibration:
        correct = "–" if math.isnan(r["correct"]) else f"{r['correct']:.1%}"
        lines.append(f"| {s.name} | {r['claims']} | {r[rules.HOLDS]} | {r[rules.FAILS]} | {r[rules.INCONCLUSIVE]} "
                     f"| {r['runs_per_point']:.2f} | {r['wrong']:.1%} | {correct} |")
    claims = sum(r["claims"] for _, r in calibration)
    wrong = sum(r["wrong"] * r["claims"] for _, r in calibration) / claims
    null = [r for s, r in calibration if not s.correct]
    null_errors, null_trials = sum(r["errors"] for r in null), sum(r["trials"] for r in null)
    promised = [(s, r) for s, r in calibration if s.correct]
    correct = sum(r["correct"] * r["claims"] for _, r in promised) / sum(r["claims"] for _, r in promised)
    lines.append(f"\n{claims} simulated claims; wrong decided verdicts {wrong:.2%}; where the truth is on the "
                 f"boundary {null_errors}/{null_trials} = {null_errors / null_trials:.2%} per side (allowed "
                 f"{allowed(null_trials)}); correct where the power estimate promises 80 %: {correct:.1%}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert claims >= 1000
    assert not too_wrong(calibration), too_wrong(calibration)
    for s, r in calibration:
        assert r[rules.HOLDS] + r[rules.FAILS] > 0, f"{s.name} decides nothing"
        if s.correct:
            assert r["correct"] >= POWER_MIN, f"{s.name}: correct {r['correct']:.1%}"


def test_negative_controls_fail_the_decisive_calibration(capsys):
    """The uncensored null scenarios (where the design spends all of alpha) run again with every
    look's level doubled, and at the full 2.5 % each (no alpha spending): the check the design
    passes must catch both."""
    null = [(seed, s) for seed, s in enumerate(scenarios(), start=2811) if not s.correct and s.limit_log is None]
    for control in ("doubled", "no spending"):
        found = [(s, simulate(s, seed, control)) for seed, s in null]
        rate = sum(r["errors"] for _, r in found) / sum(r["trials"] for _, r in found)
        with capsys.disabled():
            print(f"\n--until-decisive, {control}: {rate:.2%} per side where the truth is on the boundary")
        assert too_wrong(found), f"the calibration passes a broken procedure ({control})"


def test_points_stop_when_their_claims_are_decided():
    """A large effect on c0 only: p0 stops after c0 is decided while p1..p3 go on for c1 and c2,
    whose truth is no effect; a cell whose every sample times out still ends (Gehan)."""
    s = Scenario("mixed", 30, (1.5, 0.0, 0.0), 0.1, None, 8, "direction", rules.HOLDS)
    r = simulate(s, 7)
    assert r["runs_per_point"] < 8


def test_budget_and_resume_state():
    proc = Procedure.new(["x", "y"], 10, budget_s=100.0)
    assert proc.runs_wanted() == [("x", 1), ("x", 2), ("x", 3), ("y", 1), ("y", 2), ("y", 3)]
    nxt = proc.look(["c"], lambda c, a: rules.INCONCLUSIVE, lambda c: {"x"}, {"x": 3, "y": 3}, 60.0, 6,
                    rounds_needed=lambda c: 12)
    assert nxt == ["x"] and proc.runs_wanted() == [("x", 4)]
    again = Procedure.from_manifest({"sequential": proc.state})
    assert again.runs_wanted() == [("x", 4)]
    # 10 s per run so far: one more run fits 100 s at 90 s, not at 95 s
    assert again.look(["c"], lambda c, a: rules.INCONCLUSIVE, lambda c: {"x"}, {"x": 4}, 95.0, 7,
                      rounds_needed=lambda c: 12) == []
    assert again.state["stopped_by"] == "budget" and again.state["rounds_needed"] == {"c": 12}
    levels = [look["level_per_side"] for look in again.state["looks"]]
    assert levels[0] < levels[1] < 0.025
