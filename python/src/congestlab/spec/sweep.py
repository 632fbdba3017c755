"""From a study spec to its points (each a fully resolved spec with a stable id) and the
order they run in.

A point is one combination of its experiment's axis values (Cartesian product; an axis
that sets several fields moves them together). Its id names the experiment and the axis
labels, e.g. `main.server-apache.level-C1B`, so it stays the same from run to run.

Order: points whose long-lived parts are the same (the servers they run, the background
workloads with lifetime "block") form a unit; a unit's background keeps running across
its points. Within a unit, repetitions go round-robin over the points, shuffled per round
with the study's seed ("interleaved"), so a slow drift of the machine does not line up
with one axis; "sequential" runs each point's repetitions back to back.
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
from congestlab.spec.workloads import BACKGROUND_KINDS

_UNSAFE = re.compile(r"[^A-Za-z0-9_+-]")


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

    def describe(self) -> dict:
        return {"id": self.id, "experiment": self.experiment, "axes": self.labels, "settings": self.settings,
                "servers": self.servers, "workloads": self.workloads, "repetitions": self.repetitions,
                "unit": self.unit}


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
    _assign_units(points)
    return points


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
        servers = _servers_of(resolved, exp, workloads)
        point_id = ".".join([exp.name] + [f"{n}-{_UNSAFE.sub('_', lab)}" for n, lab in labels.items()])
        points.append(Point(point_id, exp.name, labels, settings, resolved, servers, workloads, repetitions))
    return points


def _resolve(base: tuple[dict, dict], settings: dict[str, Any], where: str) -> StudySpec:
    full, as_set = base
    try:
        apply(full, settings)
        data = apply(as_set, settings, create=True)
    except FieldPathError as err:
        raise SweepError(where, str(err)) from None
    try:
        return StudySpec.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = field_path(first["loc"], data)
        raise SweepError(where, f"{loc}: {first['msg'].removeprefix('Value error, ')}") from None


def _servers_of(study: StudySpec, exp: ExperimentSpec, workloads: list[str]) -> list[str]:
    named = list(exp.servers or [])
    for name in workloads:
        w = study.workload(name)
        if w.kind == "get":
            named += [r.server for r in w.requests]
        elif w.kind in ("http_load", "anma"):
            if not (w.kind == "http_load" and _load_is_off(w)):
                named.append(w.server)
    return list(dict.fromkeys(named))


def _load_is_off(w) -> bool:
    return w.rate_mbps == 0


def block_backgrounds(point: Point) -> dict:
    """The point's long-lived (`lifetime = "block"`) backgrounds: name -> settings."""
    study = point.study
    return {name: study.workload(name).model_dump(mode="json") for name in point.workloads
            if study.workload(name).kind in BACKGROUND_KINDS and study.workload(name).lifetime == "block"}


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


def _assign_units(points: list[Point]) -> None:
    units: dict[str, int] = {}
    for point in points:
        point.unit = units.setdefault(unit_key(point), len(units))


def run_order(points: list[Point], order: str = "interleaved", seed: int = 1) -> list[tuple[Point, int]]:
    """(point, repetition) pairs in the order they run; units in order of first appearance."""
    by_unit: dict[int, list[Point]] = {}
    for point in points:
        by_unit.setdefault(point.unit, []).append(point)
    runs: list[tuple[Point, int]] = []
    for unit, members in by_unit.items():
        if order == "sequential":
            runs += [(p, rep) for p in members for rep in range(1, p.repetitions + 1)]
            continue
        rounds = max(p.repetitions for p in members)
        for rep in range(1, rounds + 1):
            this_round = [p for p in members if p.repetitions >= rep]
            random.Random(f"{seed}-{unit}-{rep}").shuffle(this_round)
            runs += [(p, rep) for p in this_round]
    return runs
