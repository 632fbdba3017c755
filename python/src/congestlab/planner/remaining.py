"""What an unfinished run (interrupted, failed, or still running) has left, priced from its
own recorded time budget (docs/cluster-planning.md): how long its `--resume` takes, and the
run's whole time projected, so a study measured across sessions can be planned before it
completes.

Each point's repetitions still to run cost what its unit's recorded repetitions did
(planner/full_estimate.py `recorded_costs`: per repetition the rest, measuring and timeout
waits; per visit of the unit its server starts and warm-up, visits counted in the rest of
the planned order). A point whose unit has not run yet is priced from the measured points
at its level, else of its experiment (`Peers`), and counted in `borrowed`. The attempt in
progress (or one killed) counts up to its last finished repetition (`recorded_budget`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from congestlab.errors import CongestlabError, RunDirError
from congestlab.planner.full_estimate import Peers, get_timeout_s, recorded_costs, unit_visits
from congestlab.planner.makespan import Task
from congestlab.planner.unit_times import RunTimes, run_times
from congestlab.rundir import completed_repetitions, planned_repetitions, read_manifest
from congestlab.runner.time_budget import IN_PROGRESS
from congestlab.runner.time_budget import merge as merge_budgets
from congestlab.spec import load_preset, preset_names
from congestlab.spec.models import StudySpec
from congestlab.spec.sweep import expand
from congestlab.stored import StoredRun


@dataclass
class Remainder:
    status: str
    done: int  # repetitions with results
    planned: int
    budget: dict  # the time budget recorded so far (`recorded_budget`)
    left: list[Task]  # per unit: the seconds its repetitions still to run take
    borrowed: int  # points still to run that are priced from others

    @property
    def recorded_s(self) -> float:
        return float(self.budget.get("wall_s") or 0.0)

    @property
    def left_s(self) -> float:
        return sum(t.seconds for t in self.left)


def remainder(run_dir: Path, m: dict | None = None) -> Remainder:
    """RunDirError (exit 7) for a complete run, or one with no recorded time per unit. `m`:
    its manifest when the caller has read it."""
    run_dir = Path(run_dir)
    m = read_manifest(run_dir, require_complete=False) if m is None else m
    if m.get("status") == "complete":
        raise RunDirError(f"{run_dir}: the run is complete; nothing is left to run")
    budget = recorded_budget(m)
    if not budget.get("units"):
        raise RunDirError(f"{run_dir}: no repetition of it recorded its time yet; nothing to price the rest from")
    spec = _own_spec(run_dir, m)
    points = {p.id: p for p in expand(spec, quick=bool(m.get("quick")))}
    done = {(pid, rep) for pid, rep, _ in completed_repetitions(run_dir)}
    order = m.get("run_order") or []
    ran = [(r["point"], r["repetition"]) in done for r in order]
    todo = [r for r, was in zip(order, ran) if not was]
    # per visit of a unit as the runs done so far visited it (a resume that splits a visit
    # pays its start twice: the estimate is then a little high)
    visits_done = unit_visits([r["unit"] for r, was in zip(order, ran) if was])
    costs = recorded_costs(m | {"time_budget": budget}, points, visits_done)
    peers = Peers.of(costs, points)
    visits_left = unit_visits([r["unit"] for r in todo])
    seconds: dict[int, float] = {}
    fixed: dict[int, float] = {}
    borrowed = 0
    for pid, n in Counter(r["point"] for r in todo).items():
        point = points.get(pid)
        if point is None:
            raise RunDirError(f"{run_dir}: its run order names point {pid!r}, which its spec does not have")
        cost = costs.get(pid)
        if cost is None:
            cost, borrowed = peers.like(point), borrowed + 1
        seconds[point.unit] = seconds.get(point.unit, 0.0) + n * cost.rep_s(get_timeout_s(point), cost.warmup_s)
        per_visit = cost.restart_s + (0.0 if cost.warmup_per_rep else cost.warmup_s)
        fixed[point.unit] = max(fixed.get(point.unit, 0.0), per_visit * visits_left[point.unit])
    return Remainder(m.get("status", "?"), len(done), planned_repetitions(m), budget,
                     [Task(f"u{u}", s + fixed[u]) for u, s in seconds.items()], borrowed)


def left_s(run_dir: Path) -> float | None:
    """What an unfinished run's --resume has left, in seconds; None when it cannot be priced."""
    try:
        return remainder(run_dir).left_s
    except CongestlabError:
        return None


def _own_spec(run_dir: Path, m: dict) -> StudySpec:
    """The run's spec: its preset as this revision has it, when that is the spec it ran (as
    `--resume` requires: rundir/upgrade.py `same_run_spec`). A suite's sub-run recorded before suites
    named their presets is found by its study's name, under the same check."""
    name = m.get("preset") or m.get("study")
    if name not in preset_names():
        raise RunDirError(f"{run_dir}: not a run of a preset; the rest of a run is priced only for presets")
    spec = load_preset(name)
    if not StoredRun(run_dir, require_complete=False, manifest=m).ran(spec, bool(m.get("quick"))):
        raise RunDirError(f"{run_dir}: ran another spec than preset {name!r} as this revision has it (as --resume "
                          "would refuse it); price its rest with the revision it ran")
    return spec


def projected_times(run_dir: Path) -> RunTimes:
    """The run's times as the planner takes a complete run's (planner/unit_times.py): a
    complete run's own, else each unit's recorded time plus what it has left."""
    m = read_manifest(run_dir, require_complete=False)
    if m.get("status") == "complete":
        return run_times(run_dir)
    rest = remainder(run_dir, m)
    budget = rest.budget
    cats = budget.get("categories_s") or {}
    units = {name: float(per.get("wall_s") or 0.0) for name, per in budget["units"].items()}
    for task in rest.left:
        units[task.name] = units.get(task.name, 0.0) + task.seconds
    times = RunTimes(Path(run_dir), m.get("study", "?"), "time budget + projected rest",
                     [Task(name, s) for name, s in units.items()],
                     float(cats.get("setup", 0.0) + cats.get("teardown", 0.0)), float(cats.get("analysis") or 0.0),
                     rest.recorded_s + rest.left_s, False, complete=False)
    times.notes.append(f"{rest.status}: {rest.done} of {rest.planned} repetitions done; the rest ({rest.left_s:.0f} s) "
                       "priced from its recorded units" + (f", {rest.borrowed} points from others at their level"
                                                           if rest.borrowed else ""))
    if not cats.get("analysis"):
        times.notes.append("its analysis has not run: not counted")
    return times


def recorded_budget(m: dict) -> dict:
    """The time budget of every attempt so far: the stopped attempts' and the one in progress
    (or killed) up to its last finished repetition (runner/time_budget.py IN_PROGRESS)."""
    budget = m.get("time_budget") or {}
    return merge_budgets([budget, m[IN_PROGRESS]]) if m.get(IN_PROGRESS) else budget

