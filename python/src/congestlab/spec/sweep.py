"""From a study spec to its points (each a fully resolved spec with a stable id) and the
order they run in (docs/spec.md, "Run order").

A point is one combination of its experiment's axis values (Cartesian product; an axis
that sets several fields moves them together). Its id names the experiment and the axis
labels, e.g. `main.server-apache.level-C1B`, so it stays the same from run to run.

Units: points whose long-lived parts are the same (the servers they run, the background
workloads with lifetime "block") form a unit; a unit's background keeps running across
its points. Points of one experiment that share the background and whose servers can all
run at once (one setting per server, each on its own node and port) form one unit with all
those servers running, so compared servers are measured side by side in time.

Order ("interleaved"): within a unit, repetitions go round-robin over its points, shuffled
per round with the study's seed, never the same point or server set twice in a row where
the unit has a choice. With `passes = 2` (the default) the units of an experiment run in two
passes of half their rounds each, the second pass in the reverse order of the first (a
mirrored, ABBA-like block order: a linear drift of the machine weighs on every unit alike;
the turning unit runs its halves back to back). The experiment's first declared point's unit
opens the first pass and closes the second: its two ends give the drift check
(analysis/drift.py). With `passes = 1` each unit runs all its rounds in one visit, in the
first pass's order: one warm-up per unit, no mirror and no drift check (a --quick of 1 or 2
rounds per pass buys neither). `passes` is read from the points (the study's, an
experiment's `set` or [quick]'s), so it may differ between experiments but not within one.
"sequential" runs each point's repetitions back to back, units in declared order (the
seeds' own order).
"""

from __future__ import annotations

import itertools
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from congestlab.spec.fieldpath import FieldPathError, apply, field_path
from congestlab.spec.models import ExperimentSpec, StudySpec
from congestlab.spec.validation_context import VALUES_CHECKED
from congestlab.spec.request_timeouts import ChosenTimeout

_UNSAFE = re.compile(r"[^A-Za-z0-9_+-]")
# A point's id names its directories (points/<id>/, results/series/<id>/) and files
# (plots/panels/<id>-<server>-<family>-r<N>.png): a file name's 255 bytes (NAME_MAX) less the
# longest of those suffixes (a 16-character server, "-v4", "-r1000", ".png") and some room
POINT_ID_MAX_BYTES = 200


class SweepError(ValueError):
    """A sweep value that does not fit the spec; `where` names the axis or setting."""

    def __init__(self, where: str, problem: str):
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


@dataclass
class Point:
    id: str
    experiment: str
    labels: dict[str, str]  # axis name -> label, in the experiment's axis order
    settings: dict[str, Any]  # every field path this point sets
    study: StudySpec  # the study with the settings applied
    servers: list[str]  # servers running during the point
    workloads: list[str]  # workloads of the point's experiment
    repetitions: int
    unit: int = 0  # points of one unit share their long-lived servers and background
    extra: dict = field(default_factory=dict)
    measured: list[str] = field(default_factory=list)  # the servers its workloads talk to (captured)
    timeouts: list[dict] = field(default_factory=list)  # GET timeouts chosen from published delays (request_timeouts)

    def describe(self) -> dict:
        out = {"id": self.id, "experiment": self.experiment, "axes": self.labels, "settings": self.settings,
               "servers": self.servers, "measured_servers": self.measured, "workloads": self.workloads,
               "repetitions": self.repetitions, "unit": self.unit}
        return out | ({"timeouts": self.timeouts} if self.timeouts else {})


@dataclass(frozen=True)
class PlannedRun:
    """One (point, repetition) in the planned order, with what the analysis can block on:
    `round` (the unit's repetition round: the points measured side by side in time), `block`
    (which visit of the unit: 1 = first pass, 2 = second pass) and `index` (position in the run)."""

    point: Point
    repetition: int
    index: int
    round: str
    block: int

    def describe(self) -> dict:
        return {"run": self.index, "point": self.point.id, "repetition": self.repetition, "unit": self.point.unit,
                "round": self.round, "block": self.block}


def expand(study: StudySpec, quick: bool = False) -> list[Point]:
    """Every point of the study (or of its quick subset), units assigned, in declared order."""
    # paths are checked against the full dump (every field present); the point's spec is
    # built from the fields the user set, so validators that ask "was it set?" still work
    base = (study.model_dump(mode="json"), study.model_dump(mode="json", exclude_unset=True))
    experiments = study.experiments
    if quick and study.quick.experiments:
        experiments = [e for e in experiments if e.name in study.quick.experiments]
    points: list[Point] = []
    for exp in experiments:
        points += _experiment_points(study, base, exp, quick)
    ids = [p.id for p in points]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise SweepError("axes", f"two points get the id {dupes[0]!r}; make the axis labels distinct")
    for point in points:  # (ids are ASCII: characters are bytes)
        if len(point.id) > POINT_ID_MAX_BYTES:
            raise SweepError(f"experiments.{point.experiment}.axes", f"a point's id is {len(point.id)} characters "
                             f"({point.id[:40]}…), more than {POINT_ID_MAX_BYTES}: it names the point's directories; "
                             "give the axes shorter labels")
    _assign_units(points, together=study.order != "sequential")
    experiment_passes(points)  # one number per experiment (raises otherwise)
    return points


def experiment_passes(points: list[Point]) -> dict[str, int]:
    """Each experiment's `passes`, as its points resolve it (the study's, its experiment's
    `set`, [quick]'s `set`); an axis that moves it is refused: a unit's visits follow from it."""
    found: dict[str, set[int]] = {}
    for point in points:
        found.setdefault(point.experiment, set()).add(point.study.passes)
    for experiment, values in found.items():
        if len(values) > 1:
            raise SweepError(f"experiments.{experiment}", f"its points ask for passes {sorted(values)}; set `passes` "
                             "for the study, the experiment or [quick], not on an axis")
    return {experiment: values.pop() for experiment, values in found.items()}


def _experiment_points(study: StudySpec, base: tuple[dict, dict], exp: ExperimentSpec, quick: bool) -> list[Point]:
    axes_values = []
    own = study.quick.per_experiment.get(exp.name)
    for axis in exp.axes:
        labels = axis.point_labels()
        keep = None
        if quick:
            keep = own.axes[axis.name] if own and axis.name in own.axes else study.quick.axes.get(axis.name)
        entries = []
        for i, label in enumerate(labels):
            if keep is not None and label not in keep:
                continue
            if axis.levels:
                settings = dict(study.level(axis.levels[i]).set)
            elif len(axis.fields) == 1:
                settings = {axis.fields[0]: axis.values[i]}
            else:
                settings = dict(zip(axis.fields, axis.values[i]))
            entries.append((axis.name, label, settings))
        axes_values.append(entries)
    repetitions = study.quick.repetitions if quick else (exp.repetitions or study.repetitions)
    points = []
    for combo in itertools.product(*axes_values):
        settings = dict(exp.set)
        if quick:
            settings |= study.quick.set | (own.set if own else {})
        for _, _, values in combo:
            settings |= values
        labels = {name: label for name, label, _ in combo}
        where = f"experiments.{exp.name}" + "".join(f" {n}={lab}" for n, lab in labels.items())
        resolved = _resolve(base, settings, where)
        workloads = exp.workloads or [w.name for w in resolved.workloads]
        timeouts = _chosen_timeouts(resolved, exp, labels, workloads)
        if timeouts:
            settings |= {f"workloads.{t.workload}.timeout_s": t.timeout_s for t in timeouts}
            resolved = _resolve(base, settings, where)
        servers = _servers_of(resolved, exp, workloads)
        point_id = ".".join([exp.name] + [f"{n}-{_UNSAFE.sub('_', lab)}" for n, lab in labels.items()])
        points.append(Point(point_id, exp.name, labels, settings, resolved, servers, workloads, repetitions,
                            measured=list(servers), timeouts=[t.describe() for t in timeouts]))
    return points


def _chosen_timeouts(study: StudySpec, exp: ExperimentSpec, labels: dict[str, str],
                     workloads: list[str]) -> list[ChosenTimeout]:
    """The point's GET timeouts chosen from the published delays (spec/request_timeouts.py)."""
    level_axis = next((a.name for a in exp.axes if a.levels), None)
    level = labels.get(level_axis) if level_axis else None
    return [t for name in workloads if (t := study.workload(name).chosen_timeout(level, study.published)) is not None]


def _resolve(base: tuple[dict, dict], settings: dict[str, Any], where: str) -> StudySpec:
    full, as_set = base
    try:
        apply(full, settings)
        data = apply(as_set, settings, create=True)
    except FieldPathError as err:
        raise SweepError(where, str(err)) from None
    try:
        return StudySpec.model_validate(data, context={VALUES_CHECKED: True})
    except ValidationError as err:
        first = err.errors()[0]
        loc = field_path(first["loc"], data)
        raise SweepError(where, f"{loc}: {first['msg'].removeprefix('Value error, ')}") from None


def _servers_of(study: StudySpec, exp: ExperimentSpec, workloads: list[str]) -> list[str]:
    named = list(exp.servers or [])
    for name in workloads:
        named += study.workload(name).servers_asked()
    return list(dict.fromkeys(named))


def block_backgrounds(point: Point) -> dict:
    """The point's long-lived (`lifetime = "block"`) backgrounds: name -> settings."""
    study = point.study
    return {name: study.workload(name).model_dump(mode="json") for name in point.workloads
            if study.workload(name).long_lived}


def background_key(point: Point) -> str:
    """The point's long-lived background settings: the runner keeps a background running from
    one point to the next while they are equal, also across units (e.g. a lean server's knobs
    changing under one level's load)."""
    return json.dumps(block_backgrounds(point), sort_keys=True)


def unit_key(point: Point) -> str:
    """What must stay the same for long-lived parts to keep running across points."""
    study = point.study
    servers = {name: study.server(name).model_dump(mode="json") for name in point.servers}
    return json.dumps({"experiment": point.experiment, "servers": servers, "background": block_backgrounds(point)},
                      sort_keys=True)


def _assign_units(points: list[Point], together: bool) -> None:
    """`together`: run compared servers side by side (servers_together) where they can."""
    groups: dict[str, list[Point]] = {}
    for point in points:
        key = json.dumps({"experiment": point.experiment, "background": block_backgrounds(point)}, sort_keys=True)
        groups.setdefault(key, []).append(point)
    for members in groups.values():
        running = servers_together(members) if together else None
        if running is not None:
            for point in members:
                point.servers = list(running)
    units: dict[str, int] = {}
    for point in points:
        point.unit = units.setdefault(unit_key(point), len(units))


def servers_together(points: list[Point]) -> list[str] | None:
    """Every server of these points, when they can all run at once: one setting per server
    name and no two on one node and port. None otherwise (e.g. one server whose congestion
    control changes from point to point: those run in blocks)."""
    specs: dict[str, dict] = {}
    for point in points:
        for name in point.servers:
            spec = point.study.server(name).model_dump(mode="json")
            if specs.setdefault(name, spec) != spec:
                return None
    places = [(spec["node"], spec.get("port")) for spec in specs.values()]
    if len(set(places)) != len(places):
        return None
    return list(specs)


def planned_runs(points: list[Point], order: str = "interleaved", seed: int = 1) -> list[PlannedRun]:
    """Every (point, repetition) in the order it runs (module docstring)."""
    by_unit: dict[int, list[Point]] = {}
    for point in points:
        by_unit.setdefault(point.unit, []).append(point)
    visits: list[tuple[int, list[int], int]] = []  # (unit, its rounds in this visit, block)
    if order == "sequential":
        visits = [(unit, [], 1) for unit in by_unit]
    else:
        passes = experiment_passes(points)
        by_experiment: dict[str, list[int]] = {}
        for unit, members in by_unit.items():
            by_experiment.setdefault(members[0].experiment, []).append(unit)
        for experiment, units in by_experiment.items():
            first_pass = _first_pass(units, by_unit, seed, experiment)
            halves = {u: _halves(max(p.repetitions for p in by_unit[u]), passes[experiment]) for u in units}
            visits += [(u, halves[u][0], 1) for u in first_pass]
            visits += [(u, halves[u][1], 2) for u in reversed(first_pass) if halves[u][1]]
    runs: list[PlannedRun] = []
    for unit, rounds, block in visits:
        members = by_unit[unit]
        if order == "sequential":
            runs += [PlannedRun(p, rep, len(runs) + i, f"u{unit}.r{rep}", 1)
                     for i, (p, rep) in enumerate((p, rep) for p in members for rep in range(1, p.repetitions + 1))]
            continue
        for rep in rounds:
            this_round = [p for p in members if p.repetitions >= rep]
            random.Random(f"{seed}-{unit}-{rep}").shuffle(this_round)
            this_round = _spread(this_round, runs[-1].point if runs else None)
            runs += [PlannedRun(p, rep, len(runs) + i, f"u{unit}.r{rep}", block) for i, p in enumerate(this_round)]
    return runs


def _halves(rounds: int, passes: int = 2) -> tuple[list[int], list[int]]:
    """A unit's rounds in its first and second pass (one pass: all in the first)."""
    first = rounds if passes == 1 else (rounds + 1) // 2
    return list(range(1, first + 1)), list(range(first + 1, rounds + 1))


def rounds_per_pass(points: list[Point]) -> dict[str, tuple[int, ...]]:
    """Per experiment, its units' fewest rounds in each pass it runs (interleaved order), e.g.
    (1, 1) for 2 repetitions in two passes: what --dry-run shows beside `passes`."""
    passes = experiment_passes(points)
    rounds: dict[str, list[int]] = {}
    by_unit: dict[int, list[Point]] = {}
    for point in points:
        by_unit.setdefault(point.unit, []).append(point)
    for members in by_unit.values():
        experiment = members[0].experiment
        rounds.setdefault(experiment, []).append(max(p.repetitions for p in members))
    return {experiment: tuple(len(half) for half in _halves(min(r), passes[experiment]) if half)
            for experiment, r in rounds.items()}


def _first_pass(units: list[int], by_unit: dict[int, list[Point]], seed: int, experiment: str) -> list[int]:
    """The experiment's first unit (its first declared point: the drift reference) first; the
    others grouped by their level (an axis of [levels]), the groups and the units within a
    group in a seeded order, so the units of one level (e.g. one server's two congestion
    controls) run next to each other: A B in the first pass, B A in the second."""
    def level_of(unit: int) -> str:
        point = by_unit[unit][0]
        study = point.study
        exp = next((e for e in study.experiments if e.name == point.experiment), None)
        level_axes = [a.name for a in exp.axes if a.levels] if exp else []
        return "|".join(point.labels.get(a, "") for a in level_axes)

    rng = random.Random(f"{seed}-{experiment}-blocks")
    groups: dict[str, list[int]] = {}
    for unit in units:
        groups.setdefault(level_of(unit), []).append(unit)
    reference, *rest = list(groups)
    rng.shuffle(rest)
    ordered: list[int] = []
    for name in [reference] + rest:
        members = groups[name]
        head, tail = (members[:1], members[1:]) if name == reference else ([], members)
        rng.shuffle(tail)
        ordered += head + tail
    return ordered


def _spread(this_round: list[Point], previous: Point | None) -> list[Point]:
    """The shuffled round reordered so consecutive runs measure other servers where it can:
    each step takes, from the server sets other than the last one's, the one with most points
    left (ties: the shuffled order), its next point in the shuffled order; never the previous
    run's point first."""
    left: dict[tuple, list[Point]] = {}
    for point in this_round:
        left.setdefault(tuple(sorted(point.measured)), []).append(point)
    out: list[Point] = []
    last = previous
    while left:
        last_key = tuple(sorted(last.measured)) if last is not None else None
        keys = [k for k in left if k != last_key] or list(left)
        key = max(keys, key=lambda k: len(left[k]))  # max keeps the first of equals: the shuffled order
        group = left[key]
        pick = next((p for p in group if p is not last), group[0])
        group.remove(pick)
        if not group:
            del left[key]
        out.append(pick)
        last = pick
    return out


def run_order(points: list[Point], order: str = "interleaved", seed: int = 1) -> list[tuple[Point, int]]:
    """(point, repetition) pairs in the order they run (planned_runs())."""
    return [(r.point, r.repetition) for r in planned_runs(points, order, seed)]


def longest_streaks(runs: list[tuple[Point, int]]) -> dict[str, int]:
    """The longest run of consecutive runs of one point and of one measured server set."""
    def longest(keys: list) -> int:
        best = current = 0
        for i, key in enumerate(keys):
            current = current + 1 if i and key == keys[i - 1] else 1
            best = max(best, current)
        return best

    return {"point": longest([p.id for p, _ in runs]),
            "server": longest([tuple(sorted(p.measured)) for p, _ in runs])}
