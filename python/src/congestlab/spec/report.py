"""The `[report]` section of a study spec: metrics, tables, plots and claims (docs/reports.md).

A *dimension* is anything a result row can be selected or grouped by: an axis of the study
(a column of every results/<kind>.csv) or a column of the metric's kind (e.g. `family` of
results/request.csv). A *sample* is one point x repetition: the records of a metric's kind
that match a selection in one point and one repetition reduce to one number
(`per_repetition`), and a cell is the mean +- sd of its samples, with n. The metrics and the
selectors are declared in spec/metric.py.

Published values (`StudySpec.published`) are dicts whose keys naming a declared metric are
the seed's numbers and whose other keys are dimension values, e.g. {server = "apache",
level = "C1B", family = "v4", throughput_mbps = 28.6}; an entry applies to every cell whose
coordinates include all its keys.

`ReportSpec.model_validate(spec["report"])` checks the section by itself (every model
forbids unknown keys); `check_references(report, axes)` checks its names against the
study's axes and results/<kind>.csv columns (congestlab/results.py).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from congestlab.errors import SpecError
from congestlab.results import COMMON_COLUMNS, KIND_COLUMNS
from congestlab.spec.metric import MetricSpec, Scalar, Selector

Verdict = Literal["holds", "does not hold", "inconclusive", "not measured", "descriptive"]
VERDICTS: tuple[str, ...] = ("holds", "does not hold", "inconclusive", "not measured", "descriptive")
ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TableSpec(_Strict):
    """Rows x columns of cells (mean +- sd, n), each metric's seed value beside ours."""

    id: str = Field(pattern=ID)
    title: str
    section: str = Field(default="", description="heading the table is shown under; default: Tables")
    note: str = Field(default="", description="a sentence printed under the table")
    metrics: list[str] = Field(min_length=1, description="names of [report.metrics]; one column group each")
    rows: str = Field(description="dimension whose values are the rows")
    columns: str | None = Field(default=None, description="dimension whose values are column groups")
    where: Selector = Field(default_factory=dict)
    row_values: list[Scalar] = Field(default_factory=list, description="rows shown, in order; default: all")
    column_values: list[Scalar] = Field(default_factory=list, description="columns shown, in order; default: all")
    published: bool = Field(default=True, description="show the seed's value beside ours where there is one")


class ReferenceLine(_Strict):
    y: float
    label: str


class PlotSpec(_Strict):
    """A figure from the samples: bar (categories), line (numeric or ordered x), cdf, timeseries."""

    id: str = Field(pattern=ID)
    title: str
    type: Literal["bar", "line", "cdf", "timeseries"]
    section: str = Field(default="", description="heading the figure is shown under; default: Figures")
    note: str = ""
    metrics: list[str] = Field(min_length=1, description="one series per metric (x series values)")
    x: str | None = Field(default=None, description="bar/line: dimension on the x axis; timeseries: a time column")
    series: str | None = Field(default=None, description="dimension: one colour per value")
    facets: str | None = Field(default=None, description="dimension: one panel per value")
    where: Selector = Field(default_factory=dict)
    x_values: list[Scalar] = Field(default_factory=list)
    series_values: list[Scalar] = Field(default_factory=list)
    facet_values: list[Scalar] = Field(default_factory=list)
    x_label: str = ""
    y_label: str = ""
    log_x: bool = False
    log_y: bool = False
    reference: list[ReferenceLine] = Field(default_factory=list, description="horizontal lines, e.g. a stated plateau")
    published: bool = Field(default=True, description="mark the seed's values")

    @model_validator(mode="after")
    def _x(self) -> "PlotSpec":
        if self.type in ("bar", "line", "timeseries") and not self.x:
            raise ValueError(f"plot {self.id!r}: a {self.type} plot needs x")
        if self.type == "cdf" and self.x:
            raise ValueError(f"plot {self.id!r}: a cdf has no x (the metric's values are its x)")
        return self


Relation = Literal[">", "<", ">=", "<=", "~"]
Rule = Literal["compare", "range", "matches", "monotone", "shape", "share", "best"]
Range = tuple[float, float]
_CHECK_FIELDS = ("rule", "metric", "where", "for_each", "a", "b", "relation", "margin_pct", "reason", "range_pct",
                 "range", "alpha", "tolerance_pct", "expected", "along", "direction", "shape", "among", "best", "label",
                 "seed_n", "trials", "factor", "quantifier")
# relations decided against a margin (equivalence / non-inferiority, docs/reports.md)
MARGIN_RELATIONS = ("~", ">=", "<=")


class PartSpec(_Strict):
    """The fields of a check; a claim's part gives some, the claim the rest (its defaults)."""

    label: str = Field(default="", description="names this part in the claim's details")
    rule: Rule | None = None
    metric: str | None = Field(default=None, description="name of a [report.metrics] entry")
    where: Selector = Field(default_factory=dict)
    for_each: list[str] = Field(default_factory=list, description="dimensions: one check per combination of values")
    # compare: cell a <relation> cell b, on the censored log-normal model (congestlab/stats)
    a: Selector = Field(default_factory=dict, description="compare: selection of group a (added to where)")
    b: Selector = Field(default_factory=dict, description="compare: selection of group b")
    relation: Relation = Field(default=">", description="compare: a > b, a < b, a >= b, a <= b, a ~ b")
    margin_pct: float | None = Field(default=None, gt=0, description="~, >=, <=: the equivalence or "
                                     "non-inferiority margin in % of b (below 100 for >=), fixed before any run "
                                     "(needs reason)")
    reason: str = Field(default="", description="why the margin or range is what it is")
    range_pct: Range | None = Field(default=None, description="compare: a/b - 1 lies in [lo, hi] % in every cell "
                                    "(a seed's stated magnitude; needs reason)")
    range: Range | None = Field(default=None, description="compare: a - b lies in [lo, hi] (the metric's unit), "
                                "paired by repetition; rule range: the cell's value lies in [lo, hi]")
    seed_n: Annotated[int, Field(ge=1)] | Literal["unknown"] | None = Field(
        default=None, description="the runs behind the seed's numbers a range, range_pct or expected value is "
        "built from (\"unknown\" when the seed does not say): the seed's own error is allowed for "
        "(stats/replication.py)")
    trials: str | None = Field(default=None, description="range, matches: the metric is a share in % of counted "
                               "events; the column of its kind giving each record's count of trials (\"divide_by\": "
                               "the metric's own denominator): tested as a proportion (stats/equivalence.py)")
    factor: float | None = Field(default=None, gt=1, description="compare with > (<): a is more than factor x b "
                                 "(less than b / factor), e.g. 2 for \"more than double\"")
    quantifier: Literal["every", "some"] = Field(
        default="every", description="how the for_each combinations combine: every one holds (intersection-union) "
        "or some do (\"for some levels\": Holm over them on the holds side)")
    alpha: float = Field(default=0.05, gt=0, lt=1, description="1 - alpha CI decides: each one-sided test at alpha/2")
    tolerance_pct: float = Field(default=10.0, gt=0, description="matches, share, monotone: allowed deviation")
    # matches: every cell within tolerance of a number (or of the seed's published value)
    expected: float | Literal["published"] | None = None
    # monotone / shape: along a dimension
    along: str | None = None
    direction: Literal["increasing", "decreasing"] = "decreasing"
    shape: Literal["linear", "exponential", "reciprocal", "inverse_sqrt"] | None = None
    # best: the cells are the combinations of `among`; with `a`, that cell is the best one;
    # with `along` (and no a), no one cell is the best at every value of `along`
    among: list[str] = Field(default_factory=list, description="best: dimensions whose combinations are the cells")
    best: Literal["highest", "lowest"] = Field(default="highest", description="best: which end is the best")


class CheckSpec(PartSpec):
    """One complete, testable statement over the samples (docs/reports.md, "Verdict rules")."""

    @model_validator(mode="after")
    def _rule_fields(self) -> "CheckSpec":
        if self.rule is None:
            raise ValueError("no rule (compare, range, matches, monotone, shape, share or best)")
        if not self.metric:
            raise ValueError(f"rule {self.rule!r} needs metric")
        if self.rule == "compare" and not (self.a or self.b):
            raise ValueError("rule 'compare' needs a and b (the two selections compared)")
        for name in ("range_pct", "range"):
            bounds = getattr(self, name)
            if bounds is not None and not bounds[0] < bounds[1]:
                raise ValueError(f"{name} = {list(bounds)}: the lower bound must be below the upper")
        if self.rule == "compare" and self.range_pct is not None and self.range is not None:
            raise ValueError("give range_pct (a/b - 1) or range (a - b), not both")
        if self.rule == "range" and self.trials is not None:
            if self.range is None or self.range[0] < 0 or self.range[1] > 100:
                raise ValueError("rule 'range' of a proportion (trials) needs range = [lo, hi] within 0..100 %")
        elif self.rule == "range" and (self.range is None or self.range[0] <= 0):
            raise ValueError("rule 'range' needs range = [lo, hi] with lo > 0 (the cell's value lies in it)")
        if self.trials is not None and self.rule not in ("range", "matches"):
            raise ValueError("trials goes with rule 'range' or 'matches' (a proportion of counted events)")
        if self.factor is not None and (self.rule != "compare" or self.relation not in (">", "<")
                                        or self.range_pct is not None or self.range is not None):
            raise ValueError("factor goes with a compare whose relation is > or < (a > factor x b, a < b / factor)")
        magnitude = self.range_pct is not None or self.range is not None
        if self.rule == "compare" and not magnitude and self.relation in MARGIN_RELATIONS and self.margin_pct is None:
            raise ValueError(f"relation {self.relation!r} is an equivalence / non-inferiority test: it needs "
                             "margin_pct (and its reason)")
        if self.relation == ">=" and self.margin_pct is not None and self.margin_pct >= 100:
            raise ValueError("relation '>=' with margin_pct >= 100 % allows a of nothing: give it below 100")
        if (self.margin_pct is not None or magnitude) and self.rule in ("compare", "range") and not self.reason.strip():
            raise ValueError("a margin or range needs its reason (reason = \"...\")")
        if self.rule == "matches" and self.expected is None:
            raise ValueError("rule 'matches' needs expected (a number or \"published\")")
        if self.rule in ("matches", "share") and not self.reason.strip():
            raise ValueError(f"rule {self.rule!r}: its tolerance_pct is a margin and needs its reason (reason = \"...\")")
        if self.rule in ("monotone", "shape") and not self.along:
            raise ValueError(f"rule {self.rule!r} needs along (the dimension swept)")
        if self.rule == "shape" and not self.shape:
            raise ValueError("rule 'shape' needs shape (\"linear\", \"exponential\", \"reciprocal\" or "
                             "\"inverse_sqrt\")")
        if self.rule == "best" and (not self.among or bool(self.a) == bool(self.along)):
            raise ValueError("rule 'best' needs among (the cells' dimensions) and either a (the claimed best cell) "
                             "or along (no one cell best at every value of it)")
        return self


class ClaimSpec(PartSpec):
    """`[[report.claims]]`: a finding of the seed, with its words, tested by one check or by
    several `[[report.claims.parts]]` (the claim holds when all hold; docs/reports.md, "Verdict
    rules"). Check fields given on the claim are the parts' defaults. A `~`, `>=` or `<=` compare
    needs `margin_pct` and a margin or range its `reason`, written before any run."""

    id: str = Field(pattern=ID)
    title: str = Field(description="the claim in a line")
    seed: str = Field(description="the seed's words (quote) and where they are")
    seed_numbers: str = Field(default="", description="the seed's numbers for it, as text")
    property: bool = Field(default=False, description="a property of the tool: `report --check` fails when it fails")
    parts: list[PartSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _complete(self) -> "ClaimSpec":
        try:
            self.checks()
        except ValidationError as err:
            raise ValueError(f"claim {self.id!r}: " + err.errors()[0]["msg"].removeprefix("Value error, ")) from None
        return self

    def checks(self) -> list[CheckSpec]:
        """The parts with the claim's fields as defaults (or the claim itself as the one check)."""
        base = {k: getattr(self, k) for k in _CHECK_FIELDS if k in self.model_fields_set}
        if not self.parts:
            return [CheckSpec(**base)]
        out = []
        for part in self.parts:
            merged = dict(base)
            merged.update({k: getattr(part, k) for k in _CHECK_FIELDS if k in part.model_fields_set})
            out.append(CheckSpec(**merged))
        return out


class ReportSpec(_Strict):
    title: str = Field(default="", description="default: the study's title")
    intro: str = Field(default="", description="a paragraph under the title")
    metrics: dict[str, MetricSpec] = Field(default_factory=dict)
    tables: list[TableSpec] = Field(default_factory=list)
    plots: list[PlotSpec] = Field(default_factory=list)
    claims: list[ClaimSpec] = Field(default_factory=list)

    @field_validator("metrics")
    @classmethod
    def _metric_names(cls, value: dict[str, MetricSpec]) -> dict[str, MetricSpec]:

        for name in value:
            if not re.match(r"^[a-z][a-z0-9_]{0,39}$", name):
                raise ValueError(f"metric name {name!r}: lower-case letters, digits and _")
        return value

    @model_validator(mode="after")
    def _names(self) -> "ReportSpec":
        for what, items in (("table", self.tables), ("plot", self.plots), ("claim", self.claims)):
            ids = [i.id for i in items]
            dup = {i for i in ids if ids.count(i) > 1}
            if dup:
                raise ValueError(f"{what} id {sorted(dup)[0]!r} is used twice")
        for table in self.tables:
            self._known(f"table {table.id!r}", table.metrics)
        for plot in self.plots:
            self._known(f"plot {plot.id!r}", plot.metrics)
        for claim in self.claims:
            for check in claim.checks():
                self._known(f"claim {claim.id!r}", [check.metric])
        return self

    def _known(self, where: str, names: list[str | None]) -> None:
        for name in names:
            if name not in self.metrics:
                raise ValueError(f"{where}: unknown metric {name!r}; declared: {', '.join(self.metrics) or 'none'}")


def check_references(report: ReportSpec, axes: list[str], published: list[dict] | None = None) -> None:
    """Every dimension a declaration names is an axis or a column of the metric's kind, and
    every published entry names a declared metric. Raises ValueError naming the field."""

    def dims(metric: str) -> set[str]:
        return set(axes) | set(COMMON_COLUMNS) | set(KIND_COLUMNS[report.metrics[metric].kind])

    def check(where: str, metric: str, names) -> None:
        known = dims(metric)
        for name in names:
            if name and name not in known:
                raise ValueError(f"{where}: {name!r} is neither an axis ({', '.join(axes) or 'none'}) nor a column "
                                 f"of results/{report.metrics[metric].kind}.csv")

    for name, metric in report.metrics.items():
        check(f"metrics.{name}.where", name, list(metric.where) + list(metric.operand()[1]))
    for table in report.tables:
        for metric in table.metrics:
            check(f"table {table.id!r}", metric, [table.rows, table.columns, *table.where])
    for plot in report.plots:
        for metric in plot.metrics:
            check(f"plot {plot.id!r}", metric, [plot.x, plot.series, plot.facets, *plot.where])
    for claim in report.claims:
        for c in claim.checks():
            check(f"claim {claim.id!r}", c.metric, [c.along, *c.where, *c.for_each, *c.a, *c.b, *c.among,
                                                    c.trials if c.trials != "divide_by" else None])
    check_published(report, published)


def check_published(report: ReportSpec, published: list[dict] | None) -> None:
    """Every published entry names a declared metric and gives it a number (or nothing)."""
    for i, entry in enumerate(published or []):
        if not any(k in report.metrics for k in entry):
            raise ValueError(f"published[{i}] names no declared metric: {entry}")
        for key, value in entry.items():
            if key in report.metrics and value is not None and not _finite_number(value):
                raise ValueError(f"published[{i}].{key}: {value!r} is not a finite number")


def _finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def load_report_spec(spec: dict) -> ReportSpec:
    """The `[report]` section of a resolved spec, validated; a declaration error becomes a
    SpecError naming the field. A run's stored spec comes through congestlab.stored, which
    upgrades what older runs stored (rundir/upgrade.py)."""
    try:
        section = spec.get("report") or {}
        return ReportSpec.model_validate(section)
    except ValidationError as err:
        first = err.errors()[0]
        where = "report." + ".".join(str(p) for p in first["loc"]) if first["loc"] else "report"
        raise SpecError(where, first["msg"].removeprefix("Value error, ")) from None


def validate_report(report: dict, axes: list[str], published: list[dict] | None = None) -> ReportSpec:
    """For the spec loader: a study's `[report]` section and `published` values, checked by
    themselves and against the study's axes; a SpecError naming the field otherwise."""
    spec = load_report_spec({"report": report})
    try:
        check_references(spec, axes, published)
    except ValueError as err:
        raise SpecError("report", str(err)) from None
    return spec
