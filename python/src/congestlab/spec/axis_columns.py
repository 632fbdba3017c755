"""Axes named like a results column (results.py columns: an axis of that name is that column).

A column a record fills with its own measurement or outcome (`delay_ms`, `outcome`,
`client_port`, ...) would overwrite the axis's label in every row: no axis may be named like
one. A column that echoes a setting the record ran with (`server`, `family`, `file_kib`, ...:
results.py DESCRIPTIVE_COLUMNS) may be an axis's name only when the axis sets a field of that
name (e.g. `server` setting `workloads.get.requests.0.server`; paired fields beside it may set
others): then the record's value is the axis's value where the field is the record's, and the
analysis flags a record where it is not (analysis/record_checks.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from congestlab.results import DESCRIPTIVE_COLUMNS, measured_columns
from congestlab.spec.fieldpath import FieldPathError, get_field

if TYPE_CHECKING:
    from congestlab.spec.models import AxisSpec, StudySpec


def sets_column(path: str, column: str) -> bool:
    """Whether a field path sets `column`'s field: its last part is the column's name or its
    plural (`workloads.get.requests.0.families` sets `family`)."""
    last = path.rsplit(".", 1)[-1]
    plurals = {column + "s", column + "es", column[:-1] + "ies" if column.endswith("y") else ""}
    return last == column or last in plurals


def axis_paths(axis: "AxisSpec", study: "StudySpec") -> list[str]:
    """The field paths an axis sets: its fields, or every field its levels set."""
    if axis.fields:
        return list(axis.fields)
    paths: list[str] = []
    for name in axis.levels:
        try:
            paths += [p for p in study.level(name).set if p not in paths]
        except KeyError:  # an unknown level: check_references names it
            continue
    return paths


def axis_sets_its_column(axis: "AxisSpec", study: "StudySpec") -> bool:
    """Whether the axis sets a field named like itself (with others beside it: paired fields)."""
    return any(sets_column(p, axis.name) for p in axis_paths(axis, study))


def check_axis_names(study: "StudySpec") -> None:
    """ValueError listing every axis named like a measured column, and every one named like a
    descriptive column that sets no such field (one whose fields do not all exist is left to
    the sweep, which names the one missing: spec/sweep.py)."""
    measured = set(measured_columns())
    overwritten, elsewhere = [], []
    for exp in study.experiments:
        for axis in exp.axes:
            where = f"experiments.{exp.name}.axes.{axis.name}"
            if axis.name in measured:
                overwritten.append(where)
            elif (axis.name in DESCRIPTIVE_COLUMNS and not axis_sets_its_column(axis, study)
                  and _all_exist(axis_paths(axis, study), study)):
                elsewhere.append(f"{where} (sets {', '.join(axis_paths(axis, study)) or 'nothing'})")
    problems = []
    if overwritten:
        problems.append(f"{', '.join(overwritten)}: named like a column the records fill with their own "
                        "measurement or outcome, which would overwrite the axis; rename it")
    if elsewhere:
        problems.append(f"{', '.join(elsewhere)}: named like a column the records fill with a setting they ran "
                        "with, so the axis must set that field (or be renamed)")
    if problems:
        raise ValueError("; ".join(problems))


def _all_exist(paths: list[str], study: "StudySpec") -> bool:
    data = study.model_dump(mode="json")
    try:
        for path in paths:
            get_field(data, path)
    except FieldPathError:
        return False
    return True
