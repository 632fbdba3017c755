"""What the testbed did behind each table cell: the FIFO drops at the shaped egresses and the
machine's CPU busy share, over the repetitions whose samples make the cell (rep.json's
`bottleneck_drops` and `cpu_busy_pct`, docs/data-format.md).

Kept apart from report/cells.py (which builds the cells and their verdict inputs): this only
appends columns to a built TableView. When every column group of a row comes from the same
repetitions (e.g. v4 and v6 GETs of one point), the two columns appear once per row, under
the group "testbed"; otherwise once per group.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from congestlab.report.cells import Column, TableView
from congestlab.report.data import RunData
from congestlab.rundir.layout import POINTS_DIR, REP_INFO

DROPS, CPU = "fifo_drops", "cpu_busy_pct"
TESTBED_GROUP = "testbed"
CAPTION = ("; FIFO drops: packets the shaped egresses' queues dropped per repetition (rep.json bottleneck_drops, "
           "every egress summed), CPU busy: the machine's share during the repetition; both mean ± sd over "
           "the repetitions behind the cell")


class RepInfo:
    """rep.json's drops and CPU per (point, repetition), read once per report."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._cache: dict[tuple[str, str], tuple[float | None, float | None]] = {}

    def get(self, point_id: str, repetition: str) -> tuple[float | None, float | None]:
        key = (point_id, repetition)
        if key not in self._cache:
            self._cache[key] = self._read(point_id, repetition)
        return self._cache[key]

    def _read(self, point_id: str, repetition: str) -> tuple[float | None, float | None]:
        try:
            rep = str(int(float(repetition)))
            info = json.loads((self.run_dir / POINTS_DIR / point_id / f"r{rep}" / REP_INFO).read_text())
        except (OSError, ValueError):
            return None, None
        if not isinstance(info, dict):
            return None, None
        drops = info.get("bottleneck_drops")
        total = (math.fsum(v for v in drops.values() if _number(v)) if isinstance(drops, dict) and drops
                 and any(_number(v) for v in drops.values()) else None)
        cpu = info.get("cpu_busy_pct")
        return total, float(cpu) if _number(cpu) else None


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _text(values: list[float]) -> str:
    if not values:
        return "–"
    text = f"{statistics.fmean(values):.0f}"
    return text + (f" ± {statistics.stdev(values):.0f}" if len(values) > 1 else "")


def add_testbed_columns(data: RunData, view: TableView, reps: RepInfo) -> TableView:
    """The view with FIFO drops and CPU busy columns; unchanged when no repetition behind its
    cells recorded them (a hand-made run, a run from before rep.json had them)."""
    spec = view.spec
    if not spec.metrics or not view.rows:
        return view
    metric = data.report.metrics[spec.metrics[0]]
    groups = list(dict.fromkeys(c.group for c in view.columns))
    behind: dict[tuple[str, object], list[tuple[str, str]]] = {}
    for r, _ in view.rows:
        for g in groups:
            sel = {**spec.where, spec.rows: r}
            if spec.columns:
                sel[spec.columns] = g
            behind[(r, g)] = sorted({(s.point_id, s.repetition) for s in data.samples(metric, sel)})
    if not any(v != (None, None) for keys in behind.values() for v in map(lambda k: reps.get(*k), keys)):
        return view
    shared = all(len({tuple(behind[(r, g)]) for g in groups}) == 1 for r, _ in view.rows)

    def cells(keys: list[tuple[str, str]]) -> list[str]:
        got = [reps.get(*k) for k in keys]
        return [_text([d for d, _ in got if d is not None]), _text([c for _, c in got if c is not None])]

    columns: list[Column] = []
    if shared:
        columns = list(view.columns) + [Column(TESTBED_GROUP, DROPS, "FIFO drops", False),
                                        Column(TESTBED_GROUP, CPU, "CPU busy %", False)]
    else:
        for g in groups:
            columns += [c for c in view.columns if c.group == g]
            columns += [Column(g, DROPS, "FIFO drops", False), Column(g, CPU, "CPU busy %", False)]
    rows = []
    for r, texts in view.rows:
        by_group: dict[object, list[str]] = {}
        for col, text in zip(view.columns, texts):
            by_group.setdefault(col.group, []).append(text)
        if shared:
            new = texts + cells(behind[(r, groups[0])])
        else:
            new = []
            for g in groups:
                new += by_group.get(g, []) + cells(behind[(r, g)])
        rows.append((r, new))
    return TableView(spec, columns, rows, view.caption + CAPTION, view.measured)
