"""The results CSVs checked when read: they are derived data (`congestlab analyze` writes
them from the repetitions), so a reader trusts no cell of them unchecked. Every column is one
of its table's (results.py), every value fits its column's type and physical range
(rundir/result_columns.py), every row belongs to a planned (point, repetition) with that
point's experiment and axis labels, and no measurement appears twice. A mismatch is one line
naming the file, the line and the column, and how to rebuild the table (RunDirError, exit 7)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from congestlab.errors import RunDirError
from congestlab.results import COMMON_COLUMNS, KIND_COLUMNS, result_path
from congestlab.rundir.result_columns import COLUMN_TYPES, ROW_KEYS, TEXT, ColumnType
from congestlab.stored.rows import norm

if TYPE_CHECKING:
    from congestlab.stored.run import StoredRun

TRUE_FALSE = {"True", "False", "true", "false", "1", "0"}


def check_results(run: "StoredRun", kind: str, header: list[str], numbered: list[tuple[int, dict]]) -> None:
    """RunDirError for the first cell, row or column of `kind`'s table that cannot be right."""
    path = result_path(run.path, kind)

    def fail(line: int, problem: str) -> RunDirError:
        return RunDirError(f"{path}:{line}: {problem}; `congestlab analyze {run.path}` rebuilds the results")

    if not numbered:
        return
    own = KIND_COLUMNS.get(kind, [])
    known = {*COMMON_COLUMNS, *run.axes, *own}
    for column in header:
        if column not in known:
            raise fail(1, f"column {column!r} is not a column of results/{kind}.csv")
    for column in ("point_id", "repetition"):
        if column not in header:
            raise fail(1, f"no column {column!r}")
    types = {c: COLUMN_TYPES.get(c, TEXT) if c in own or c in COMMON_COLUMNS else TEXT for c in known}
    labels_of = [a for a in run.axes if a not in own]  # an axis named like a column is the record's value
    planned = set(run.planned_runs)
    points = {p.id: p for p in run.points}
    key_columns = [c for c in ROW_KEYS.get(kind, ()) if c in header]
    seen: dict[tuple, int] = {}
    for line, row in numbered:
        if None in row or any(v is None for v in row.values()):
            raise fail(line, f"{len(header)} columns in the header, not as many in this row")
        for column, value in row.items():
            problem = value_problem(value, types.get(column, TEXT))
            if problem:
                raise fail(line, f"{column} {str(value)[:40]!r}: {problem}")
        point_id, repetition = row["point_id"], row["repetition"]
        point = points.get(point_id)
        if point is None:
            raise fail(line, f"point {point_id[:60]!r} is not in the manifest")
        if not repetition:
            raise fail(line, "no repetition")
        if (point_id, int(float(repetition))) not in planned:
            raise fail(line, f"repetition {repetition} of point {point_id} was not planned")
        if "experiment" in row and row["experiment"] != point.experiment:
            raise fail(line, f"experiment {row['experiment'][:40]!r} is not point {point_id}'s ({point.experiment})")
        for axis in labels_of:
            if axis in row and norm(row[axis]) != norm(point.labels.get(axis, "")):
                raise fail(line, f"{axis} {row[axis][:40]!r} is not point {point_id}'s "
                                 f"({point.labels.get(axis, '')!r})")
        key = (point_id, norm(repetition), *(norm(row[c]) for c in key_columns))
        if key in seen:
            raise fail(line, f"the same measurement as line {seen[key]} "
                             f"({', '.join(f'{c} {v}' for c, v in zip(['point', 'repetition', *key_columns], key))})")
        seen[key] = line


def value_problem(value: object, column: ColumnType) -> str:
    """Why `value` cannot be a value of the column; "" when it can (an empty cell always can)."""
    text = str(value).strip()
    if not text or column.kind == "text" and not column.choices:
        return ""
    if column.kind == "text":
        return "" if text in column.choices else f"not one of {', '.join(column.choices)}"
    if column.kind == "bool":
        return "" if text in TRUE_FALSE else "not True or False"
    try:
        number = float(text)
    except ValueError:
        return "not a number"
    if not math.isfinite(number):
        return "not a finite number"
    if column.kind == "int" and not number.is_integer():
        return f"not a whole number ({column.what})"
    if column.low is not None and number < column.low:
        return f"below {column.low:g} ({column.what})"
    if column.high is not None and number > column.high:
        return f"beyond {column.high:g} ({column.what})"
    return ""
