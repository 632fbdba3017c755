"""The order a cluster run submits its tasks in: longest first (LPT, Graham 1969: within 4/3
of the optimal makespan; docs/cluster-planning.md). A task's length is its time in a
previous run of the study when one is given (`--order-from`: the planner's unit times,
planner/unit_times.py), else its planned number of repetitions. No Ray here: the driver
(cluster/driver.py) submits in this order, each task after the one before it."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ATTEMPT = re.compile(r"a\d+$")  # a cluster run's task names: u3a1, u3r2a1
_ROUND = re.compile(r"r\d+$")  # placement "repetition": u3r2 is round 2 of unit u3


@dataclass(frozen=True)
class Submission:
    task: str  # u<unit>, or u<unit>r<round> with placement "repetition"
    estimate: float  # seconds (from a previous run) or repetitions (planned)
    basis: str  # "previous run", "previous run, share of its unit", "previous run, mean per repetition", "planned"


def previous_times(tasks: list[tuple[str, float]]) -> dict[str, float]:
    """A finished run's unit times by task key (a cluster run's attempts of one task summed)."""
    out: dict[str, float] = {}
    for name, seconds in tasks:
        key = _ATTEMPT.sub("", name)
        out[key] = out.get(key, 0.0) + seconds
    return out


def submission_order(units: dict[str, list[tuple[str, int]]],
                     previous_s: dict[str, float] | None = None) -> list[Submission]:
    """The tasks longest first; equal ones keep the study's order (a stable sort). With
    `previous_s`: a task takes its own previous time, else its share (by repetitions) of its
    unit's, else the previous run's mean time per repetition times its repetitions."""
    estimates: dict[str, Submission] = {}
    if previous_s:
        unit_reps: dict[str, int] = {}
        for key, runs in units.items():
            unit_reps[_ROUND.sub("", key)] = unit_reps.get(_ROUND.sub("", key), 0) + len(runs)
        for key, runs in units.items():
            unit = _ROUND.sub("", key)
            if key in previous_s:
                estimates[key] = Submission(key, previous_s[key], "previous run")
            elif unit in previous_s:
                estimates[key] = Submission(key, previous_s[unit] * len(runs) / unit_reps[unit],
                                            "previous run, share of its unit")
        known = [(s.estimate, len(units[k])) for k, s in estimates.items()]
        per_rep = sum(e for e, _ in known) / sum(n for _, n in known) if known else None
        for key, runs in units.items():
            if key not in estimates and per_rep is not None:
                estimates[key] = Submission(key, per_rep * len(runs), "previous run, mean per repetition")
    for key, runs in units.items():
        estimates.setdefault(key, Submission(key, float(len(runs)), "planned"))
    return sorted((estimates[k] for k in units), key=lambda s: -s.estimate)
