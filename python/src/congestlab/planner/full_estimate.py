"""The units of a study's full run, estimated from a finished --quick run of it (no full run
needed). From the quick run's time budget per unit (its points share it): the server
starts, the warm-ups, and per repetition the measuring, the waits for timeouts and the rest.
A full unit = its server starts + its warm-ups + for each of its points, its repetitions x
(the rest + measuring + timeout waits), each part scaled by what --quick changes:

- server starts and warm-ups per visit of the unit (its stretches of consecutive runs in the
  order: the quick's recorded `run_order`, the full run's planned one), so a quick run in one
  pass prices a full run in two mirrored passes (docs/spec.md, "Order") with each unit's
  starts and warm-ups twice; a quick run recorded without `run_order` counts as visiting its
  units as often as the full run does;
- warm-ups by the full `warmup_s` over the quick one (cubic-compound: 60 s over 20 s); a
  unit whose quick run waited a warm-up every repetition (a background per point) pays it
  every repetition, else once per visit;
- measuring plus the longest workload `duration_s` of the point, full minus quick (tcp-lab's
  iperf: 30 or 60 s instead of 2 s; its start and stop stay as measured); GETs have none
  and stay as measured;
- timeout waits: the quick run's waits over its point's GET timeout are the GETs per
  repetition that ran into it; each costs the full point's own timeout (rto: chosen per level
  from the published delays, spec/request_timeouts.py, longer than the quick's).

A point the quick run did not measure takes the mean of the measured points at its level (its
label on the axis of [levels]: the congestion condition, which decides whether GETs time
out), of its experiment where it has some there, else of the study; a level the quick run
leaves out takes its experiment's mean (else the study's). This is an extrapolation: a point
whose GETs time out only at levels the quick run leaves out (rto at 125 Mbit/s) is
underestimated (docs/cluster-planning.md). `caveats` names what it rests on that the
quick run did not measure: points priced from other points, and GETs measured after a shorter warm-up than the
full run's (open-loop loads pile up open fetches for as long as they run, so a GET after a
longer warm-up shares the link with more of them and takes longer: docs/cluster-planning.md,
"Why the GETs after a longer warm-up take longer").
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from congestlab.errors import RunDirError
from congestlab.planner.makespan import Task
from congestlab.rundir import read_manifest
from congestlab.spec.models import StudySpec
from congestlab.spec.sweep import Point, expand, planned_runs


@dataclass
class UnitCost:
    restart_s: float  # server (re)starts, per visit of the unit (per unit without a recorded order)
    warmup_s: float  # warm-up waits: per visit (as restart_s), or per repetition when `warmup_per_rep`
    warmup_per_rep: bool
    measure_rep_s: float  # per repetition: measuring workloads
    timeouts_per_rep: float  # per repetition: GETs that ran into their timeout (waits / the quick GET timeout)
    timeout_rep_s: float  # per repetition: waits for timeouts of a point without a GET timeout (kept as seconds)
    other_rep_s: float  # per repetition: the rest (captures, bookkeeping)

    def rep_s(self, get_timeout_s: float | None, warmup_s: float) -> float:
        """One repetition: the rest, measuring, its timeout waits at `get_timeout_s`, and
        `warmup_s` when it waits one every repetition."""
        return (self.other_rep_s + self.measure_rep_s + self.timeouts_per_rep * (get_timeout_s or 0.0)
                + self.timeout_rep_s + (warmup_s if self.warmup_per_rep else 0.0))


def get_timeout_s(point: Point | None) -> float | None:
    if point is None:
        return None
    times = [w.timeout_s for n in point.workloads if (w := point.study.workload(n)).measures_gets]
    return max(times) if times else None


def _duration_s(point: Point | None) -> float | None:
    if point is None:
        return None
    times = [d for n in point.workloads if (d := getattr(point.study.workload(n), "duration_s", None))]
    return max(times) if times else None


def _level(point: Point) -> str | None:
    """The point's label on its experiment's axis of [levels], None without one."""
    exp = next((e for e in point.study.experiments if e.name == point.experiment), None)
    axis = next((a.name for a in exp.axes if a.levels), None) if exp else None
    return point.labels.get(axis) if axis else None


# [quick] settings the estimate scales (the warm-up, durations, GET timeouts) or plans (passes)
_MODELLED_QUICK_SETTINGS = ("warmup_s", "passes")
_MODELLED_QUICK_SUFFIXES = (".duration_s", ".timeout_s")


def _unmodelled_quick_settings(spec: StudySpec) -> list[str]:
    """The fields --quick changes that the estimate does not scale back (a workload's size)."""
    keys = [*spec.quick.set, *(k for e in spec.quick.per_experiment.values() for k in e.set)]
    return sorted({k for k in keys if k not in _MODELLED_QUICK_SETTINGS and not k.endswith(_MODELLED_QUICK_SUFFIXES)})


def _ratio(full: float | None, quick: float | None) -> float:
    return full / quick if full and quick else 1.0


def unit_visits(units_in_order: list[int]) -> dict[int, int]:
    """How often each unit is visited in a run order: its stretches of consecutive runs (each
    starts the unit's servers, and its background where that is not kept from the unit before)."""
    visits: dict[int, int] = {}
    for i, unit in enumerate(units_in_order):
        if not i or units_in_order[i - 1] != unit:
            visits[unit] = visits.get(unit, 0) + 1
    return visits


def recorded_costs(m: dict, points: dict[str, Point], visits: dict[int, int]) -> dict[str, UnitCost]:
    """Point id -> the costs a run's manifest recorded for it (its unit's, shared by its
    points), for the points in `points` (the run's own, by id); `visits`: how often the
    recorded runs visited each unit (per visit costs), empty when the order is unknown."""
    units = (m.get("time_budget") or {}).get("units") or {}
    out = {}
    for point in m.get("points") or []:
        per = units.get(f"u{point.get('unit', 0)}")
        if not per or not per.get("runs"):
            continue
        runs = per["runs"]
        warm, restart = per.get("warmup", 0.0), per.get("server_restart", 0.0)
        seen = visits.get(point.get("unit", 0), 0)
        if seen:  # per visit (below, a per-repetition warm-up is told apart on the whole)
            restart, fixed_warm = restart / seen, warm / seen
        else:
            fixed_warm = warm
        measure, waited = per.get("measure", 0.0), per.get("timeout_wait", 0.0)
        rp = points.get(point["id"])
        warm_each = rp.study.warmup_s if rp is not None else 0.0
        # a warm-up every repetition (a background per point), told apart from one per visit:
        # a unit visited once per repetition (two passes of one round) pays one per visit
        per_rep = bool(warm_each) and runs > max(1, seen) and warm >= 0.9 * runs * warm_each
        timeout_s = get_timeout_s(rp)
        counted = waited / runs / timeout_s if timeout_s else 0.0
        out[point["id"]] = UnitCost(restart, warm / runs if per_rep else fixed_warm, per_rep, measure / runs, counted,
                                    0.0 if timeout_s else waited / runs,
                                    (per["wall_s"] - warm - restart - measure - waited) / runs)
    return out


def quick_costs(run_dir, spec: StudySpec) -> dict[str, UnitCost]:
    """Point id -> the costs the quick run measured for it (its unit's, shared by its points)."""
    m = read_manifest(run_dir)
    if not m.get("quick"):
        raise RunDirError(f"{run_dir}: not a --quick run; a full estimate starts from one")
    if not (m.get("time_budget") or {}).get("units"):
        raise RunDirError(f"{run_dir}: has no time budget per unit (recorded before it)")
    return recorded_costs(m, {p.id: p for p in expand(spec, quick=True)},
                          unit_visits([run["unit"] for run in m.get("run_order") or []]))


def _mean(costs: list[UnitCost]) -> UnitCost:
    return UnitCost(statistics.fmean(c.restart_s for c in costs), statistics.fmean(c.warmup_s for c in costs),
                    statistics.fmean(c.warmup_per_rep for c in costs) >= 0.5,
                    statistics.fmean(c.measure_rep_s for c in costs),
                    statistics.fmean(c.timeouts_per_rep for c in costs), statistics.fmean(c.timeout_rep_s for c in costs),
                    statistics.fmean(c.other_rep_s for c in costs))


@dataclass
class Peers:
    """Measured costs grouped for pricing a point that has none: by its level (its label on
    the axis of [levels]) in its experiment, else at that level anywhere, else by its experiment."""
    by_level: dict[tuple[str | None, str], list[UnitCost]]  # (experiment or None: any, level)
    by_experiment: dict[str, list[UnitCost]]
    study_mean: UnitCost

    @classmethod
    def of(cls, costs: dict[str, UnitCost], points: dict[str, Point]) -> "Peers":
        by_level: dict[tuple[str | None, str], list[UnitCost]] = {}
        by_experiment: dict[str, list[UnitCost]] = {}
        for pid, cost in costs.items():
            if (point := points.get(pid)) is not None:
                by_experiment.setdefault(point.experiment, []).append(cost)
                if (level := _level(point)) is not None:
                    by_level.setdefault((point.experiment, level), []).append(cost)
                    by_level.setdefault((None, level), []).append(cost)
        return cls(by_level, by_experiment, _mean(list(costs.values())))

    def like(self, point: Point) -> UnitCost:
        level = _level(point)
        similar = (self.by_level.get((point.experiment, level)) or self.by_level.get((None, level))
                   or self.by_experiment.get(point.experiment))
        return _mean(similar) if similar else self.study_mean


@dataclass
class FullUnits:
    tasks: list[Task]
    caveats: list[str]  # what the estimate rests on that was not measured, with the seconds concerned


def full_units(run_dir, spec: StudySpec) -> list[Task]:
    return full_estimate(run_dir, spec).tasks


def full_estimate(run_dir, spec: StudySpec) -> FullUnits:
    costs = quick_costs(run_dir, spec)
    if not costs:
        raise RunDirError(f"{run_dir}: no unit of the quick run has a measured time")
    full_points = expand(spec, quick=False)
    # a quick run recorded with its order gives costs per visit: the full run pays them per visit
    per_visit = bool(read_manifest(run_dir).get("run_order"))
    full_visits = unit_visits([r.point.unit for r in planned_runs(full_points, spec.order, spec.seed)])
    quick_points = {p.id: p for p in expand(spec, quick=True)}
    quick_by_experiment: dict[str, Point] = {}
    for p in quick_points.values():
        quick_by_experiment.setdefault(p.experiment, p)
    peers = Peers.of(costs, quick_points)
    units: dict[int, float] = {}
    fixed_of: dict[int, float] = {}
    borrowed_s: list[float] = []  # per point priced from others: its seconds
    warmed_longer_s: list[float] = []  # per GET point warmed up longer than in the quick run: its measuring
    warmups_s = (0.0, 0.0)  # (quick, full) warm-up of those
    for point in full_points:
        cost = costs.get(point.id) or peers.like(point)
        # the quick point it is scaled from: the same one, else one of its experiment
        qp = quick_points.get(point.id) or quick_by_experiment.get(point.experiment)
        warm = cost.warmup_s * _ratio(point.study.warmup_s, qp.study.warmup_s if qp else None)
        full_d, quick_d = _duration_s(point), _duration_s(qp)
        rep_s = cost.rep_s(get_timeout_s(point), warm) + (full_d - quick_d if full_d and quick_d else 0.0)
        units[point.unit] = units.get(point.unit, 0.0) + point.repetitions * rep_s
        if point.id not in costs:
            borrowed_s.append(point.repetitions * rep_s)
        if qp is not None and get_timeout_s(point) is not None and point.study.warmup_s > qp.study.warmup_s:
            warmed_longer_s.append(point.repetitions * cost.measure_rep_s)
            warmups_s = (qp.study.warmup_s, point.study.warmup_s)
        fixed = cost.restart_s + (0.0 if cost.warmup_per_rep else warm)
        fixed *= full_visits[point.unit] if per_visit else 1
        fixed_of[point.unit] = max(fixed_of.get(point.unit, 0.0), fixed)
    caveats = []
    if borrowed_s:
        caveats.append(f"{len(borrowed_s)} of {len(full_points)} points ({sum(borrowed_s):.0f} s) are priced from the quick "
                       "run's points at their level or experiment, not measured")
    if warmed_longer_s:
        quick_w, full_w = warmups_s
        caveats.append(f"{len(warmed_longer_s)} points' GETs ({sum(warmed_longer_s):.0f} s of measuring) are priced as the "
                       f"quick run measured them after a {quick_w:g} s warm-up, a lower bound: after the full {full_w:g} s "
                       "they can take several times longer (open-loop loads pile up fetches while they run: "
                       "docs/cluster-planning.md)")
    if unmodelled := _unmodelled_quick_settings(spec):
        caveats.append(f"--quick also sets {', '.join(unmodelled)}: the estimate keeps the quick run's time for "
                       "that work as measured")
    return FullUnits([Task(f"u{u}", s + fixed_of[u]) for u, s in units.items()], caveats)
