"""Repetitions until decisive over a whole run (docs/statistics.md, "Repetitions until decisive").

The group-sequential design of congestlab/stats/sequential.py applied to a study's claims: every
point runs the first `first_look` rounds (round = repetition number); after each round every
claim still undecided is looked at, at the nominal level the O'Brien–Fleming spending gives for
the looks taken so far; a decided claim keeps the verdict of the look that decided it; the next
round runs only the points feeding some claim still undecided, so a point stops once every claim
it feeds is decided. The procedure stops when every claim is decided, at `max_rounds`, or when
the next round would not fit the budget.

All undecided claims share one look history (they all start at `first_look` and are looked at
after every round), so one level serves a look. Pure: the evaluation, the claims' points and the
clock come from the caller (congestlab/decisive/driver.py on a testbed,
python/tests/unit/test_decisive_calibration.py on simulated runs); the state is plain JSON kept in
the manifest (`sequential`), so a resumed run carries it on.
"""

from __future__ import annotations

from typing import Callable, Iterable

from congestlab.errors import RunDirError
from congestlab.stats.rules import ALPHA, DESCRIPTIVE, INCONCLUSIVE
from congestlab.stats.sequential import SequentialDesign, spent

FIRST_LOOK = 3
DECIDED = "decided"                 # every claim decided
MAX_REPETITIONS = "max-repetitions"  # the last planned look came and went
BUDGET = "budget"                   # the next round would not fit the time budget


class Procedure:
    """The state of one run's sequential procedure (the manifest's `sequential`)."""

    def __init__(self, state: dict):
        self.state = state

    @classmethod
    def new(cls, point_ids: Iterable[str], max_rounds: int, budget_s: float | None = None,
            first_look: int = FIRST_LOOK, alpha: float = ALPHA) -> "Procedure":
        first = min(first_look, max_rounds)
        SequentialDesign(max_rounds, first, alpha)  # checks the numbers
        points = list(point_ids)
        return cls({"design": "group-sequential, Lan-DeMets O'Brien-Fleming alpha spending per side",
                    "max_rounds": max_rounds, "first_look": first, "alpha_per_side": alpha, "budget_s": budget_s,
                    "points": points, "round": first, "round_points": points, "looks": [], "decided": {},
                    "stopped_by": None, "elapsed_s": 0.0, "runs_done": 0, "rounds_needed": {}})

    @classmethod
    def from_manifest(cls, manifest: dict) -> "Procedure":
        state = manifest.get("sequential")
        if not isinstance(state, dict) or "looks" not in state:
            raise RunDirError("this run did not run with --until-decisive; resume it without that option")
        return cls(state)

    # ------------------------------------------------------------------------------
    @property
    def design(self) -> SequentialDesign:
        s = self.state
        return SequentialDesign(s["max_rounds"], s["first_look"], s["alpha_per_side"])

    @property
    def stopped(self) -> bool:
        return self.state["stopped_by"] is not None

    @property
    def round(self) -> int:
        """The round in progress (or the last one, once stopped)."""
        return self.state["round"]

    def runs_wanted(self) -> list[tuple[str, int]]:
        """(point, repetition) of the round in progress; before the first look, every point's
        first rounds. The caller skips those already complete (a resumed run)."""
        s = self.state
        if self.stopped:
            return []
        if not s["looks"]:
            return [(p, r) for p in s["points"] for r in range(1, s["first_look"] + 1)]
        return [(p, s["round"]) for p in s["round_points"]]

    def level(self) -> float:
        """The nominal one-sided level of the look due after the round in progress."""
        return self.design.level_at([look["round"] for look in self.state["looks"]] + [self.round])

    def look(self, claims: list[str], evaluate: Callable[[str, float], str], points_of: Callable[[str], set],
             n_per_point: dict[str, int], elapsed_s: float, runs_done: int,
             rounds_needed: Callable[[str], int | None] | None = None) -> list[str]:
        """The look after the round in progress: every undecided claim evaluated at this look's
        level (`evaluate(claim, level)` returns its verdict word), recorded; returns the points of
        the next round, [] when the procedure stops (then `rounds_needed(claim)` is asked for
        every claim still inconclusive)."""
        s = self.state
        if self.stopped:
            return []
        k = self.round
        level = self.level()
        verdicts = {}
        for claim in claims:
            if claim in s["decided"]:
                continue
            verdicts[claim] = verdict = evaluate(claim, level)
            # holds, does not hold, or not measured (no data: rounds cannot help); a descriptive
            # claim (no test at this n yet) waits for more rounds like an inconclusive one
            if verdict not in (INCONCLUSIVE, DESCRIPTIVE):
                s["decided"][claim] = {"verdict": verdict, "round": k}
        undecided = [c for c in claims if c not in s["decided"]]
        points = sorted(set().union(*(points_of(c) for c in undecided))) if undecided else []
        s["elapsed_s"], s["runs_done"] = round(elapsed_s, 2), runs_done
        stop = None
        if not undecided or not points:
            stop = DECIDED if not undecided else MAX_REPETITIONS
        elif k >= s["max_rounds"]:
            stop = MAX_REPETITIONS
        elif s["budget_s"] is not None and runs_done and elapsed_s + elapsed_s / runs_done * len(points) > s["budget_s"]:
            stop = BUDGET
        s["looks"].append({"round": k, "level_per_side": level,
                           "alpha_spent_per_side": spent(k / s["max_rounds"], s["alpha_per_side"]),
                           "n": dict(sorted(n_per_point.items())), "verdicts": verdicts,
                           "undecided": undecided, "next_points": [] if stop else points,
                           "elapsed_s": round(elapsed_s, 2)})
        if stop:
            s["stopped_by"] = stop
            s["round_points"] = []
            if rounds_needed is not None:
                s["rounds_needed"] = {c: rounds_needed(c) for c in undecided}
            return []
        s["round"], s["round_points"] = k + 1, points
        return points

    def final_verdicts(self, claims: list[str]) -> dict[str, str]:
        """Each claim's verdict: the deciding look's, else the last look's (inconclusive)."""
        s = self.state
        last = s["looks"][-1]["verdicts"] if s["looks"] else {}
        return {c: s["decided"][c]["verdict"] if c in s["decided"] else last.get(c, INCONCLUSIVE) for c in claims}
