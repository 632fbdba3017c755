"""A stored run directory as the report engine sees it (read through congestlab.stored): the
manifest, the results in long form (congestlab/results.py), and samples of declared metrics.

A sample is one point x repetition: the metric's records in that point and repetition that
match a selection, reduced to one number (spec/metric.py, MetricSpec.per_repetition).
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from congestlab.errors import CongestlabError, RunDirError
from congestlab.report.defaults import default_report
from congestlab.results import KIND_COLUMNS
from congestlab.spec.metric import MetricSpec, Selector
from congestlab.spec.report import ReportSpec, check_published
from congestlab.spec.sweep import expand
from congestlab.stats import samples as engine
from congestlab.stats.outcomes import COMPLETE, INVALID, TIMED_OUT
from congestlab.stored import ResultRow, StoredRun, norm, number_of

# request columns a timed-out GET bounds (its value is only known to lie beyond the bound):
# delays are longer than the timeout (right-censored); throughputs are below what the whole
# file would have given in the timeout (left-censored); counts the GET was still adding to when
# it timed out are at least what it had counted (right-censored at its own value, the analysis
# writes it: analysis/request_rows.py lower_bounds). Other columns leave a timed-out GET out,
# counted as invalid.
RIGHT_CENSORED_MS = ("delay_ms", "syn_to_last_ack_ms", "curl_time_ms")
LEFT_CENSORED_MBPS = ("goodput_mbps", "nrt_throughput_mbps")
LOWER_BOUND_COUNTS = ("retransmissions",)
# NRT bytes over payload when no completed GET of the run gives the factor (an upper bound:
# 1514-byte frames carrying 1448 bytes are 1.046, plus handshake and ACKs)
NRT_OVERHEAD_FALLBACK = 1.10


@dataclass
class Stats:
    """Mean, sample standard deviation and count of a cell's samples."""

    values: list[float]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def sd(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) >= 2 else None


@dataclass
class Sample:
    point_id: str
    repetition: str
    value: float
    coords: dict[str, str] = field(default_factory=dict)
    time: float | None = None


def _check_stored_published(run_dir: Path, report, published) -> None:
    """The stored published values as the spec loader checked them, so a damaged manifest is
    one line here rather than a traceback in a table (the engine checks the declaration's
    dimensions against every experiment's axes itself)."""
    try:
        check_published(report, published)
    except ValueError as err:
        raise RunDirError(f"{run_dir}/manifest.json: damaged spec: {err}") from None


class RunData:
    """One run directory, read once (congestlab.stored); rows are kept as strings (as the CSV
    has them, in one spelling) with their numbers parsed once."""

    def __init__(self, run_dir: Path, report: ReportSpec | None = None, require_complete: bool = True):
        self.run_dir = Path(run_dir)
        # the run's format_version must be one this congestlab reads, and its status complete
        # (docs/data-format.md: `congestlab report` refuses a run that did not finish; the
        # looks of `--until-decisive` read a run in progress: congestlab/decisive/driver.py)
        self.stored = StoredRun(self.run_dir, require_complete=require_complete)
        self.manifest = self.stored.manifest
        self.spec: dict = self.stored.spec_data
        self.axes: list[str] = self.stored.axes
        if report is None:
            if self.stored.report is not None:
                report = self.stored.report
                _check_stored_published(self.run_dir, report, self.spec.get("published"))
            else:
                report = default_report(self.run_dir, self.axes)
        self.report = report
        self.points: list[dict] = list(self.manifest.get("points") or [])
        self.published: list[dict] = list(self.spec.get("published") or [])

    @property
    def name(self) -> str:
        return self.run_dir.name

    def rows(self, kind: str) -> list[ResultRow]:
        return self.stored.results(kind)

    @cached_property
    def planned_points(self) -> list[tuple[str, dict[str, str]]]:
        """(experiment, axis labels) of every point the full study declares (not only this run's,
        which --quick may have cut); what a claim's coverage is counted against
        (report/claims/coverage.py). From the stored spec expanded as the runner would; where the
        current models refuse it (a spec from an older congestlab), from its experiments' axes as
        declared; failing both (a spec written by hand), the run's own points."""
        try:
            return [(p.experiment, {k: norm(v) for k, v in p.labels.items()}) for p in expand(self.stored.study)]
        except (CongestlabError, ValidationError, ValueError, KeyError, TypeError):
            pass
        declared = _declared_points(self.spec)
        if declared:
            return declared
        return [(norm(p.get("experiment", "")), {k: norm(v) for k, v in (p.get("axes") or {}).items()})
                for p in self.points]

    def kinds_present(self) -> list[str]:
        return [k for k in KIND_COLUMNS if (self.run_dir / "results" / f"{k}.csv").exists()]

    # --- dimensions --------------------------------------------------------------------
    def values(self, dim: str, kinds: list[str], where: Selector | None = None) -> list[str]:
        """The values a dimension takes (in the rows matching `where`), ordered: numbers
        numerically, other axis labels as the manifest lists the points, the rest as first seen."""
        seen: dict[str, None] = {}
        for kind in kinds:
            for row in self.rows(kind):
                if dim in row and row[dim] != "" and matches(row, where or {}):
                    seen.setdefault(row[dim], None)
        found = list(seen)
        if found and all(number_of(v) is not None for v in found):
            return sorted(found, key=lambda v: float(v))
        if dim in self.axes:
            order = {}
            for p in self.points:
                label = (p.get("axes") or {}).get(dim)
                if label is not None:
                    order.setdefault(norm(label), len(order))
            if all(v in order for v in found):
                return sorted(found, key=order.__getitem__)
        return found

    # --- samples -----------------------------------------------------------------------
    def samples(self, metric: MetricSpec, selection: Selector, time_column: str | None = None) -> list[Sample]:
        """One sample per point x repetition among the records matching the metric's and the
        selection's keys (the selection wins where both name a key)."""
        where = {**metric.where, **selection}
        groups: dict[tuple[str, str], list[dict]] = {}
        for row in self.rows(metric.kind):
            if matches(row, where):
                groups.setdefault((row.get("point_id", ""), row.get("repetition", "")), []).append(row)
        operand_column, operand_where = metric.operand()
        operands: dict[tuple[str, str], list[dict]] = {}
        if operand_column:
            other_where = {**where, **operand_where}
            for row in self.rows(metric.kind):
                if matches(row, other_where):
                    operands.setdefault((row.get("point_id", ""), row.get("repetition", "")), []).append(row)
        out = []
        for key, rows in groups.items():
            value = reduce_rows(rows, metric.column, metric.per_repetition)
            if value is None:
                continue
            if operand_column:
                other = reduce_rows(operands.get(key, []), operand_column, metric.per_repetition)
                if other is None or (metric.divide_by and not other):
                    continue
                value = value / other if metric.divide_by else value - other
            if metric.absolute:
                value = abs(value)
            coords = {k: rows[0].get(k, "") for k in [*self.axes, *where]}
            t = None
            if time_column:
                times = [x for x in (r.number(time_column) for r in rows) if x is not None]
                t = min(times) if times else None
            out.append(Sample(key[0], key[1], value * metric.scale, coords, t))
        return out

    def stats(self, metric: MetricSpec, selection: Selector) -> Stats:
        return Stats([s.value for s in self.samples(metric, selection)])

    def cell(self, metric: MetricSpec, selection: Selector) -> "EngineCell":
        """The selection's samples for the statistics engine (congestlab/stats): one per point x
        repetition with its outcome and its block (the repetition). A metric over complete GETs
        (where outcome = complete) gets the point x repetitions whose GETs timed out as censored
        samples (RIGHT_CENSORED_MS, LEFT_CENSORED_MBPS) and those whose GETs were all invalid
        as invalid ones; other metrics have complete samples only."""
        done = self.samples(metric, selection)
        values = [s.value for s in done]
        outcomes = [COMPLETE] * len(done)
        blocks = [s.repetition for s in done]
        limits = [math.nan] * len(done)
        points = {s.point_id for s in done}
        side = engine.LEFT if metric.column in LEFT_CENSORED_MBPS else engine.RIGHT
        if over_complete_requests(metric):
            seen = {(s.point_id, s.repetition) for s in done}
            base = {k: v for k, v in {**metric.where, **selection}.items() if k not in ("outcome", "ok")}
            groups: dict[tuple[str, str], list[dict]] = {}
            for row in self.rows("request"):
                if matches(row, base) and row.get("outcome") in (TIMED_OUT, INVALID):
                    key = (row.get("point_id", ""), row.get("repetition", ""))
                    if key not in seen:
                        groups.setdefault(key, []).append(row)
            for (point, rep), rows in groups.items():
                points.add(point)
                blocks.append(rep)
                values.append(math.nan)
                timed_out = [r for r in rows if r["outcome"] == TIMED_OUT]
                limit = self._censoring_limit(metric, timed_out)
                outcomes.append(TIMED_OUT if limit is not None else INVALID)
                limits.append(limit if limit is not None else math.nan)
        # a censored bound of 0 (a count) leaves no ratio: such cells are compared by rank
        positive = all(v > 0 for v, o in zip(values, outcomes) if o == COMPLETE) and \
            all(lim > 0 for lim, o in zip(limits, outcomes) if o == TIMED_OUT)
        if positive:
            cell = engine.Cell.of(values, outcomes, blocks, limits, side)
        else:  # no ratio: the claims compare such cells by rank (report/claims/)
            cell = engine.Cell(tuple(values), tuple(outcomes), tuple(blocks), tuple(limits), side)
        return EngineCell(cell, frozenset(points), positive)

    def _censoring_limit(self, metric: MetricSpec, timed_out: list[dict]) -> float | None:
        """The bound a point x repetition's timed-out GETs put on its sample (each GET at its
        own bound, reduced as the metric reduces): None when the metric has no such bound."""
        if not timed_out or metric.per_repetition == "count" or metric.scale <= 0:
            return None
        bounds = []
        for row in timed_out:
            if metric.column in LOWER_BOUND_COUNTS:
                seen = row.number(metric.column)
                if seen is None:
                    return None
                bounds.append(seen)
                continue
            timeout_s = row.number("timeout_s")
            if not timeout_s or timeout_s <= 0:
                return None
            if metric.column in RIGHT_CENSORED_MS:
                bounds.append(timeout_s * 1000.0)
            elif metric.column in LEFT_CENSORED_MBPS:
                size_kib = row.number("file_kib")
                if not size_kib:
                    return None
                factor = self._nrt_overhead() if metric.column == "nrt_throughput_mbps" else 1.0
                bounds.append(size_kib * 1024 * 8 * factor / timeout_s / 1e6)
            else:
                return None
        value = reduce_values(bounds, metric.per_repetition)
        return None if value is None else value * metric.scale

    def _nrt_overhead(self) -> float:
        """NRT bytes over payload bytes, the most any completed GET of the run had."""
        if not hasattr(self, "_overhead"):
            ratios = [b / p for b, p in ((r.number("bytes_nrt"), r.number("payload_bytes"))
                                         for r in self.rows("request") if r.get("outcome") == COMPLETE)
                      if b and p]
            self._overhead = max(ratios) if ratios else NRT_OVERHEAD_FALLBACK
        return self._overhead

    def published_value(self, metric_name: str, coords: dict) -> float | None:
        """The seed's value for a cell: the most specific published entry whose keys (other
        than metric names) all match the cell's coordinates."""
        best, best_keys = None, -1
        ncoords = {k: norm(v) for k, v in coords.items() if not isinstance(v, list)}
        for entry in self.published:
            if metric_name not in entry or entry[metric_name] is None:
                continue
            keys = {k: v for k, v in entry.items() if k not in self.report.metrics}
            if all(k in ncoords and ncoords[k] == norm(v) for k, v in keys.items()) and len(keys) > best_keys:
                best, best_keys = float(entry[metric_name]), len(keys)
        return best


def _declared_points(spec: dict) -> list[tuple[str, dict[str, str]]]:
    """Every combination of each experiment's axes as its labels (or levels, or scalar values)
    are declared, without resolving a point: [] when some axis cannot be read that way."""
    out = []
    for exp in spec.get("experiments") or []:
        names, lists = [], []
        for axis in exp.get("axes") or []:
            labels = axis.get("labels") or axis.get("levels") or axis.get("values") or []
            if not labels or any(isinstance(v, (list, dict)) for v in labels):
                return []
            names.append(axis.get("name"))
            lists.append([norm(v) for v in labels])
        out += [(norm(exp.get("name", "")), dict(zip(names, combo))) for combo in itertools.product(*lists)]
    return out


@dataclass(frozen=True)
class EngineCell:
    cell: engine.Cell
    points: frozenset[str]
    positive: bool  # every completed value > 0: a ratio (log scale) is defined


def over_complete_requests(metric: MetricSpec) -> bool:
    """A metric of complete GETs, with no operand: the kind whose timed-out GETs are censored."""
    return (metric.kind == "request" and not metric.operand()[0]
            and (metric.where.get("outcome") == COMPLETE or metric.where.get("ok") is True))


TRUE, FALSE = {"True", "true", "1"}, {"False", "false", "0", ""}


def matches(row: dict, where: Selector) -> bool:
    for key, want in where.items():
        if key not in row:
            return False
        if isinstance(want, bool):
            if row[key] not in (TRUE if want else FALSE):
                return False
        elif isinstance(want, list):
            if row[key] not in {norm(w) for w in want}:
                return False
        elif row[key] != norm(want):
            return False
    return True


def reduce_rows(rows: list[ResultRow], column: str, how: str) -> float | None:
    if how == "count":
        return float(len(rows))
    return reduce_values([x for x in (r.number(column) for r in rows) if x is not None], how)


def reduce_values(values: list[float], how: str) -> float | None:
    if not values:
        return None
    if how == "mean":
        return statistics.fmean(values)
    if how == "sum":
        return math.fsum(values)
    if how == "min":
        return min(values)
    if how == "max":
        return max(values)
    if how == "median":
        return statistics.median(values)
    return values[0]
