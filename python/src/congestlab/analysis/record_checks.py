"""A repetition's records checked before they become rows: a measurement recorded twice is
never two samples, and a record whose own value of an axis-named column is not the axis's
value never lands in that axis's cell (docs/data-format.md, "Request outcomes")."""

from __future__ import annotations

from dataclasses import dataclass, field

from congestlab.results import KIND_COLUMNS
from congestlab.rundir.records import GetRecord, Record, key_text, record_key
from congestlab.spec.axis_columns import axis_sets_its_column, sets_column
from congestlab.stored import StoredPoint, norm


@dataclass
class Deduplicated:
    records: list[Record]  # each key once, in the file's order
    invalid: dict[int, str] = field(default_factory=dict)  # id() of a kept GET -> why it is not measured
    problems: list[str] = field(default_factory=list)


def deduplicated(numbered: list[tuple[int, Record]], where: str) -> Deduplicated:
    """Records with one key (rundir/records.py record_key) written more than once: the same
    record again is kept once; different records under one key are one measurement whose value
    is unknown: a GET is kept as invalid, a passed-through row is left out. Each is a problem
    naming the file's lines."""
    lines: dict[tuple, list[tuple[int, Record]]] = {}
    for number, record in numbered:
        lines.setdefault(record_key(record), []).append((number, record))
    out = Deduplicated([])
    for number, record in numbered:
        group = lines[record_key(record)]
        if len(group) == 1:
            out.records.append(record)
            continue
        if group[0][0] != number:
            continue  # the group is handled at its first line
        at = ", ".join(str(n) for n, _ in group)
        if all(r == record for _, r in group):
            out.records.append(record)
            out.problems.append(f"{where}: lines {at} hold the same record ({key_text(record)}): counted once")
        elif isinstance(record, GetRecord):
            out.records.append(record)
            why = f"{where}: lines {at} record one GET ({key_text(record)}) differently"
            out.invalid[id(record)] = why
            out.problems.append(f"{why}: invalid")
        else:
            out.problems.append(f"{where}: lines {at} record one measurement ({key_text(record)}) "
                                "differently: left out")
    return out


def axis_mismatch(record: Record, point: StoredPoint, axes: list[str]) -> str:
    """Why the record's own value of an axis-named column is not the point's value of that
    axis; "" when it is, or when the axis does not set that record's field (another request of
    the workload, another workload). An axis that does not set its column's field at all (a run
    stored before spec/axis_columns.py refused it) is held to its label."""
    kind = "request" if isinstance(record, GetRecord) else record.kind
    for axis in axes:
        if axis not in KIND_COLUMNS[kind] or axis not in point.labels:
            continue
        own = getattr(record, axis, None) if isinstance(record, GetRecord) else record.row.get(axis)
        if own is None:
            continue
        wanted = _axis_values(point, axis, record)
        if wanted is not None and norm(own) not in wanted:
            return (f"the record's {axis} is {own!r} but the point's axis {axis} is {point.labels[axis]!r}"
                    f"{'' if wanted == {norm(point.labels[axis])} else ' (' + ', '.join(sorted(wanted)) + ')'}")
    return ""


def _axis_values(point: StoredPoint, axis: str, record: Record) -> set[str] | None:
    """The values the point's axis gives the record's field (one, or a list's), None when it
    does not address this record."""
    try:
        spec = next((a for a in point.run.study.experiment(point.experiment).axes if a.name == axis), None)
    except KeyError:
        spec = None
    if spec is None or not axis_sets_its_column(spec, point.run.study):
        return {norm(point.labels[axis])}
    values: set[str] = set()
    for path, value in point.settings.items():
        if sets_column(path, axis) and _addresses(path, record):
            values |= {norm(v) for v in (value if isinstance(value, list) else [value])}
    return values or None


def _addresses(path: str, record: Record) -> bool:
    """Whether a field path (`workloads.<name>...[.requests.<i>...]`) sets a field of the
    workload that wrote the record (and of its request, for a GET)."""
    parts = path.split(".")
    workload = record.workload if isinstance(record, GetRecord) else record.row.get("workload")
    if len(parts) < 3 or parts[0] != "workloads" or parts[1] != workload:
        return False
    if isinstance(record, GetRecord) and "requests" in parts[2:-1]:
        index = parts[parts.index("requests", 2) + 1]
        return index == str(record.request)
    return True
