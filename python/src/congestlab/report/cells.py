"""Declared tables as data: rows x column groups of cells (mean ± sd, n) with the seed's
value beside ours; rendered to Markdown and HTML by render.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from congestlab.report.data import RunData, Stats, norm
from congestlab.spec.report import MetricSpec, TableSpec


@dataclass
class Cell:
    stats: Stats
    published: float | None
    digits: int
    censored_s: list[float] = field(default_factory=list)  # limits of the samples known only to exceed them
    excluded: dict[str, int] = field(default_factory=dict)  # GETs left out, by outcome (timed_out, invalid)

    def ours(self, show_n: bool) -> str:
        censored = ""
        if self.censored_s:
            count = f" ×{len(self.censored_s)}" if len(self.censored_s) > 1 else ""
            censored = f"> {min(self.censored_s):g} s{count}"
        left_out = "; ".join(f"{n} {outcome.replace('_', ' ')}" for outcome, n in self.excluded.items())
        censored = "; ".join(t for t in (censored, left_out) if t)
        if not self.stats.n:
            return censored or "–"
        text = f"{self.stats.mean:.{self.digits}f}"
        if self.stats.sd is not None:
            text += f" ± {self.stats.sd:.{self.digits}f}"
        text += f" ({self.stats.n})" if show_n or censored else ""
        return text + (f"; {censored}" if censored else "")

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
                cells[(r, g, name)] = Cell(data.stats(metric, sel), pub, metric.digits,
                                           data.censored_limits_s(metric, sel), data.excluded_requests(metric, sel))
    if not spec.row_values:  # a row nothing was measured in is left out (the seed's value alone says nothing here)
        rows = [r for r in rows if any(cells[(r, g, name)].stats.n or cells[(r, g, name)].censored_s
                                        or cells[(r, g, name)].excluded for g in groups for name, _ in metrics)]
    with_seed = {name for name, _ in metrics if any(cells[(r, g, name)].published is not None
                                                   for r in rows for g in groups)}
    ns = {c.stats.n for c in cells.values() if c.stats.n}
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
    measured = any(c.stats.n or c.censored_s for c in cells.values())
    if not ns:
        caption = "not measured in this run" if not measured else "every sample censored"
    elif show_n:
        caption = "mean ± sd over repetitions; (n) = repetitions in the cell"
    else:
        n = ns.pop()
        caption = f"mean ± sd over n = {n} repetition{'s' if n > 1 else ''}" if n > 1 else "one repetition (no sd)"
    if any(c.censored_s for c in cells.values()):
        caption += "; > T s = did not complete within T s (×k: k repetitions), not in the mean"
    if any(c.excluded for c in cells.values()):
        caption += ("; k timed out / k invalid = GETs not in the mean: no answer within the client's limit, or "
                    "failed a cross-check of the capture (docs/data-format.md, request outcomes)")
    if with_seed:
        caption += "; seed = the study's published value"
    if len(metrics) == 1:
        caption = f"{metrics[0][1].title(metrics[0][0])}: " + caption
    return TableView(spec, columns, body, caption, measured)
