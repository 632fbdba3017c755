"""Declared tables as data: rows x column groups of cells with the seed's value beside ours;
rendered to Markdown and HTML by render.py.

A cell of GETs (a request metric over complete GETs, whose timed-out GETs are censored:
report/data.py, RunData.cell) shows the Kaplan–Meier median with its 95 % CI and the count
censored (`> T` when more than half are: the median is only bounded), and beside it the mean
of the completed GETs with its 95 % CI, which is what the seeds published. Other cells show the
mean with its 95 % CI. Invalid samples are counted, never averaged.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from congestlab.report.data import EngineCell, RunData, over_complete_requests
from congestlab.spec.metric import MetricSpec
from congestlab.spec.report import TableSpec
from congestlab.stored import norm
from congestlab.stats.summary import CellSummary, mean_with_ci, summarize


@dataclass
class Cell:
    engine: EngineCell
    published: float | None
    digits: int
    km: bool  # a cell of GETs: Kaplan–Meier median beside the mean of completed ones

    @property
    def n(self) -> int:
        return self.engine.cell.n

    @property
    def measured(self) -> bool:
        return bool(self.engine.cell.n or self.engine.cell.invalid)

    def _ci(self, lo: float, hi: float) -> str:
        d = self.digits

        def f(x: float) -> str:
            return "∞" if x == math.inf else "-∞" if x == -math.inf else "?" if math.isnan(x) else f"{x:.{d}f}"

        return f"[{f(lo)}, {f(hi)}]"

    def ours(self, show_n: bool) -> str:
        cell, d = self.engine.cell, self.digits
        extra = f"; {cell.invalid} invalid" if cell.invalid else ""
        if not cell.n:
            return f"{cell.invalid} invalid" if cell.invalid else "–"
        if self.km and self.engine.positive and not cell.censored:
            # nothing censored: the Kaplan–Meier median is the sample median (lifelines' fit, 0.2 s a
            # cell, is kept for the cells that need it)
            mean, (lo, hi) = mean_with_ci(cell.completed())
            text = f"{statistics.median(cell.completed()):.{d}f}; mean {mean:.{d}f}" + \
                (f" {self._ci(lo, hi)}" if cell.n > 1 else "")
            return text + (f" (n={cell.n})" if show_n else "") + extra
        if self.km and self.engine.positive:
            s: CellSummary = summarize(cell)
            if s.bound is not None:
                median = f"{'>' if s.censoring == 'right' else '<'} {s.bound:.{d}f}"
            else:
                median = f"{s.median:.{d}f} {self._ci(*sorted(s.median_ci))}"
            text = median + (f" ({s.censored}/{s.n} censored)" if s.censored else "")
            if s.completed:
                text += f"; mean {s.mean_completed:.{d}f} {self._ci(*s.mean_ci)}"
            return text + (f" (n={s.n})" if show_n else "") + extra
        mean, (lo, hi) = mean_with_ci(cell.completed())
        text = f"{mean:.{d}f}" + (f" {self._ci(lo, hi)}" if cell.n > 1 else "")
        return text + (f" ({cell.n})" if show_n else "") + extra

    def seed(self) -> str:
        return "–" if self.published is None else f"{self.published:g}"


@dataclass
class Column:
    group: str | None  # the column dimension's value
    metric: str
    label: str
    seed: bool  # True: the seed's value of the column before it


@dataclass
class TableView:
    spec: TableSpec
    columns: list[Column]
    rows: list[tuple[str, list[str]]]  # (row value, cell texts)
    caption: str
    measured: bool

    @property
    def groups(self) -> list[tuple[str, int]]:
        """Column groups in order with their widths (the header's first row)."""
        out: list[list] = []
        for col in self.columns:
            if out and out[-1][0] == col.group:
                out[-1][1] += 1
            else:
                out.append([col.group, 1])
        return [(g, n) for g, n in out]


def _dim_values(data: RunData, dim: str | None, explicit: list, kinds: list[str], where: dict) -> list:
    if not dim:
        return [None]
    if explicit:
        return [norm(v) for v in explicit]
    return data.values(dim, kinds, where)


def build_table(data: RunData, spec: TableSpec) -> TableView:
    metrics: list[tuple[str, MetricSpec]] = [(m, data.report.metrics[m]) for m in spec.metrics]
    kinds = sorted({m.kind for _, m in metrics})
    groups = _dim_values(data, spec.columns, spec.column_values, kinds, spec.where)
    # rows: the values the table's own cells take (its columns included)
    row_where = dict(spec.where)
    if spec.columns and spec.column_values:
        row_where[spec.columns] = list(spec.column_values)
    rows = _dim_values(data, spec.rows, spec.row_values, kinds, row_where)
    cells: dict[tuple, Cell] = {}
    for r in rows:
        for g in groups:
            for name, metric in metrics:
                sel = {**spec.where, spec.rows: r}
                if spec.columns:
                    sel[spec.columns] = g
                pub = data.published_value(name, sel) if spec.published else None
                cells[(r, g, name)] = Cell(data.cell(metric, sel), pub, metric.digits, over_complete_requests(metric))
    if not spec.row_values:  # a row nothing was measured in is left out (the seed's value alone says nothing here)
        rows = [r for r in rows if any(cells[(r, g, name)].measured for g in groups for name, _ in metrics)]
    with_seed = {name for name, _ in metrics if any(cells[(r, g, name)].published is not None
                                                   for r in rows for g in groups)}
    ns = {c.n for c in cells.values() if c.n}
    show_n = len(ns) > 1
    columns: list[Column] = []
    for g in groups:
        for name, metric in metrics:
            columns.append(Column(g, name, metric.title(name) if len(metrics) > 1 else "ours", False))
            if name in with_seed:
                columns.append(Column(g, name, "seed", True))
    body = []
    for r in rows:
        texts = []
        for col in columns:
            cell = cells[(r, col.group, col.metric)]
            texts.append(cell.seed() if col.seed else cell.ours(show_n))
        body.append((r, texts))
    measured = any(c.measured for c in cells.values())
    km = any(c.km for c in cells.values())
    what = ("median of the GETs (Kaplan–Meier, timed-out ones censored at their timeout, with its 95 % CI where "
            "some are; without, the sample median); beside it the mean [95 % CI] of the completed GETs"
            if km else "mean [95 % CI]")
    if not ns:
        caption = "not measured in this run" if not measured else "no valid sample"
    elif show_n:
        caption = f"{what} over repetitions; (n) = repetitions in the cell"
    else:
        n = ns.pop()
        caption = f"{what} over n = {n} repetition{'s' if n > 1 else ''}" if n > 1 else "one repetition (no CI)"
    if any(c.engine.cell.censored for c in cells.values()):
        caption += ("; (k/n censored) = k GETs timed out (a delay beyond the timeout, a throughput below the file "
                    "over the timeout: an upper bound); > T / < T: more than half censored, the median is only "
                    "bounded")
    if any(c.engine.cell.invalid for c in cells.values()):
        caption += ("; k invalid = excluded and counted: failed a cross-check of the capture or the client "
                    "(docs/data-format.md, request outcomes)")
    if with_seed:
        caption += "; seed = the study's published value"
    if len(metrics) == 1:
        caption = f"{metrics[0][1].title(metrics[0][0])}: " + caption
    return TableView(spec, columns, body, caption, measured)
