"""The units of a study's full run, estimated from a finished --quick run of it (no full run
needed): each full unit = its fixed cost (server starts and warm-up, as the quick run's
unit holding the same points paid) + for each of its points, its repetitions x the time of
one repetition of that point in the quick run, with the part that waited for timeouts
scaled by the full run's GET timeout over the quick one's (e.g. 120 s over 45 s in rto).

A point the quick run did not measure takes the mean of its experiment's measured points
(else the study's). This is an extrapolation: it assumes a repetition costs the same in the
full run as in the quick one (docs/cluster-planning.md says what it leaves out)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from congestlab.errors import RunDirError
from congestlab.planner.makespan import Task
from congestlab.rundir import read_manifest
from congestlab.spec.models import StudySpec
from congestlab.spec.sweep import Point, expand


@dataclass
class UnitCost:
    fixed_s: float  # server (re)starts and warm-up, once per unit
    rep_s: float  # one repetition, timeouts included
    timeout_rep_s: float  # of which waits for timeouts


def _get_timeout_s(point: Point) -> float | None:
    times = [point.study.workload(n).timeout_s for n in point.workloads
             if getattr(point.study.workload(n), "kind", "") == "get"]
    return max(times) if times else None


def quick_costs(run_dir, spec: StudySpec) -> dict[str, UnitCost]:
    """Point id -> the cost the quick run measured for it (its unit's, shared by its points)."""
    m = read_manifest(run_dir)
    if not m.get("quick"):
        raise RunDirError(f"{run_dir}: not a --quick run; a full estimate starts from one")
    units = (m.get("time_budget") or {}).get("units") or {}
    if not units:
        raise RunDirError(f"{run_dir}: has no time budget per unit (recorded before it)")
    out = {}
    for point in m.get("points") or []:
        per = units.get(f"u{point.get('unit', 0)}")
        if not per or not per.get("runs"):
            continue
        fixed = per.get("server_restart", 0.0) + per.get("warmup", 0.0)
        out[point["id"]] = UnitCost(fixed, (per["wall_s"] - fixed) / per["runs"], per.get("timeout_wait", 0.0) / per["runs"])
    return out


def _mean(costs: list[UnitCost]) -> UnitCost:
    return UnitCost(statistics.fmean(c.fixed_s for c in costs), statistics.fmean(c.rep_s for c in costs),
                    statistics.fmean(c.timeout_rep_s for c in costs))


def full_units(run_dir, spec: StudySpec) -> list[Task]:
    costs = quick_costs(run_dir, spec)
    if not costs:
        raise RunDirError(f"{run_dir}: no unit of the quick run has a measured time")
    quick_points = {p.id: p for p in expand(spec, quick=True)}
    study_mean = _mean(list(costs.values()))
    by_experiment: dict[str, list[UnitCost]] = {}
    for pid, cost in costs.items():
        if pid in quick_points:
            by_experiment.setdefault(quick_points[pid].experiment, []).append(cost)
    units: dict[int, float] = {}
    fixed_of: dict[int, float] = {}
    for point in expand(spec, quick=False):
        cost = costs.get(point.id) or (_mean(by_experiment[point.experiment]) if point.experiment in by_experiment
                                       else study_mean)
        rep_s = cost.rep_s
        full_t, quick_p = _get_timeout_s(point), quick_points.get(point.id)
        quick_t = _get_timeout_s(quick_p) if quick_p else None
        if cost.timeout_rep_s and full_t and quick_t:
            rep_s += cost.timeout_rep_s * (full_t / quick_t - 1)
        units[point.unit] = units.get(point.unit, 0.0) + point.repetitions * rep_s
        fixed_of[point.unit] = max(fixed_of.get(point.unit, 0.0), cost.fixed_s)
    return [Task(f"u{u}", s + fixed_of[u]) for u, s in units.items()]
