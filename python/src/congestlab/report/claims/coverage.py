"""What a claim declares against what the run measured (docs/reports.md, "Coverage").

A check runs once per combination of its `for_each` dimensions. The combinations are those the
claim declares, not only those the run happens to have: a dimension listed in the check's
selection takes the listed values; an axis (or `experiment`) not listed takes every value the
study's points have, the full study's (not --quick's) where the spec can be expanded; any other
dimension (a column such as `family`) takes the values in the run's rows. Of their Cartesian
product only the combinations some planned point can give are kept (a product of two axes may
name cells no experiment has). A declared combination the run has no samples of is a check
"not measured", listed, and it makes "holds" impossible (report/claims/evaluate.py).

Planned repetitions that did not run are a second kind of gap: `missing_repetitions` is where
they come in (one function; see its docstring).
"""

from __future__ import annotations

import itertools

from congestlab.report.data import RunData
from congestlab.spec.metric import MetricSpec
from congestlab.spec.report import CheckSpec
from congestlab.stored import norm, number_of
from congestlab.report.claims.check import without_outcome

EXPERIMENT = "experiment"


def _values(want) -> set[str]:
    return {norm(w) for w in (want if isinstance(want, list) else [want])}


def _point_allows(point: tuple[str, dict[str, str]], selection: dict) -> bool:
    """Can this planned point (experiment, axis labels) give samples of the selection? Keys
    that are neither its experiment nor one of its axes are not known before a run: allowed."""
    experiment, labels = point
    for key, want in selection.items():
        if key == EXPERIMENT and experiment not in _values(want):
            return False
        if key in labels and labels[key] not in _values(want):
            return False
    return True


def declared_combinations(data: RunData, metric: MetricSpec, check: CheckSpec) -> list[dict]:
    """The check's for_each combinations as the claim declares them (module docstring)."""
    if not check.for_each:
        return [{}]
    planned = data.planned_points
    axes = {k for _, labels in planned for k in labels} | {EXPERIMENT}
    where = {**metric.where, **check.where}
    sides = [check.a, check.b] if check.rule == "compare" else [{}]
    lists = []
    for dim in check.for_each:
        if dim in where:
            values = [norm(v) for v in (where[dim] if isinstance(where[dim], list) else [where[dim]])]
        elif dim in axes:
            reachable = [p for p in planned if any(_point_allows(p, {**where, **side}) for side in sides)]
            found = [p[0] if dim == EXPERIMENT else p[1].get(dim) for p in reachable]
            values = list(dict.fromkeys(v for v in found if v is not None))  # the study's order
            if values and all(number_of(v) is not None for v in values):
                values.sort(key=lambda v: float(v))
        else:
            values = data.values(dim, [metric.kind], without_outcome(metric, where))
        lists.append(values)
    combos = [dict(zip(check.for_each, vals)) for vals in itertools.product(*lists)]
    return [c for c in combos if all(any(_point_allows(p, {**where, **c, **side}) for p in planned)
                                     for side in sides)]


def missing_repetitions(data: RunData, points: frozenset[str]) -> list[str]:
    """The planned (point, repetition)s of these points without data, each with why: the hook
    for the run reader's found-against-planned (StoredRun.missing(), which the reader is about
    to gain); until it is there, none are known here and only unmeasured cells count as gaps.
    A claim with one of these cannot read "holds" (report/claims/evaluate.py)."""
    del data, points
    return []
