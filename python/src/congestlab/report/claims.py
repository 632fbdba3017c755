"""Verdicts on the seeds' claims, decided by the statistics engine (congestlab/stats;
docs/reports.md, "Verdict rules"; docs/statistics.md).

Every check ends in one of four verdicts: holds, does not hold, inconclusive, not measured. It
is two one-sided tests, each at alpha/2 of the check's `alpha` (5 %: the sides of a 95 % CI),
one whose rejection says "holds" and one whose rejection says "does not hold"; neither rejected
is inconclusive, so an underpowered run is never "holds" by default. The same rule at every n.

A cell is the samples of one selection, one per point x repetition, with its outcome: a GET
that timed out is censored at its timeout (a delay beyond it, a throughput below the file over
it), an invalid one is excluded and counted (report/data.py, RunData.cell). The block of a
sample is its repetition.

compare   a <relation> b on the effect log(median a / median b) of the censored log-normal
          model with the repetition as block (stats/median_ratio.py). > and <: the CI excludes 0
          on the claimed side (stats.rules.direction). ~: TOST against +-margin_pct; >= / <=:
          non-inferiority, a at most margin_pct below / above b. `range_pct`: a/b - 1 lies in
          the seed's range (magnitude: holds when the CI lies inside it, does not hold when it
          lies wholly outside, else inconclusive). `range`: a - b in the metric's unit lies in the range, on the
          differences paired by repetition (censored normal model). Cells with values <= 0
          have no ratio: Gehan's permutation test decides their direction; margins undecided.
range     the cell's (geometric) median lies in [lo, hi]: a magnitude check of one cell.
matches   every cell's mean of completed samples within `tolerance_pct` of `expected` (a
          number, or the seed's published value for that cell): a comparison with the seed.
monotone  along `along`: the samples' trend (Kendall's tau against the values of `along`)
          significantly in `direction`, and no step between neighbours significantly against
          it by more than `tolerance_pct` (Holm over the steps); does not hold when a step is
          (Holm) or the trend goes significantly the other way.
shape     least-squares fits of the samples against the numeric values of `along`: linear
          y = a + b*x and exponential y = A*exp(b*x); the better by AIC by at least 2
          decides; closer is inconclusive; fewer than 4 values of `along` is inconclusive.
share     in every point x repetition, each record's value within `tolerance_pct` of the
          group's total / n (TCP sessions sharing r/n).
best      the cells are the combinations of the `among` dimensions' values. With `a`: cell a
          is better than every other cell (direction against each, intersection-union; does
          not hold when another is significantly better, Holm). With `along`: the best cell
          changes with the value of `along` (stats.rules.best_changes: a significant swap).

A claim's checks (its parts, one per `for_each` combination) are combined by
stats.rules.every_cell: it holds when every measured check holds (intersection-union, no
adjustment), does not hold when one does after Holm's adjustment over the checks, else it is
inconclusive; not measured when nothing was measured. Each check carries the point ids that
fed it (`points`) and, when undecided, the rounds a power estimate says it needs (its "does not
hold" at the Holm level over the claim's checks); the claim, the rounds at which it decides as a
whole (stats/power.py, UndecidedClaim).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Collection

import numpy as np
from scipy import stats as st
from scipy.optimize import curve_fit

from congestlab.report.data import EngineCell, RunData, Stats, matches, norm, parse_number
from congestlab.spec.report import CheckSpec, ClaimSpec, MetricSpec, Selector
from congestlab.stats import gehan, tobit
from congestlab.stats.effect import Effect, from_percent
from congestlab.stats.median_ratio import compare
from congestlab.stats.power import rounds_needed_for_verdict
from congestlab.stats.rules import (FAILS, HOLDS, INCONCLUSIVE, Verdict, at_least, at_most, best_changes, direction,
                                    equivalence, every_cell, holm, magnitude, range_p_values)
from congestlab.stats.samples import COMPLETE, RIGHT, Cell
from congestlab.stats.summary import mean_with_ci

NOT_MEASURED = "not measured"
MIN_SHAPE_POINTS = 4
AIC_DECIDES = 2.0


@dataclass
class CheckResult:
    """One check on one combination of for_each values."""

    label: str
    verdict: str
    ours: str
    seed: str = ""
    detail: str = ""                      # how it was decided: the numbers and the rule in words
    decision: Verdict | None = None       # the engine's verdict (after the claim's Holm adjustment)
    points: frozenset[str] = frozenset()  # the point ids whose samples fed it
    rounds_needed: int | None = None      # inconclusive: rounds (repetitions) a power estimate says decide it


@dataclass
class ClaimResult:
    claim: ClaimSpec
    verdict: str
    checks: list[CheckResult] = field(default_factory=list)
    decision: Verdict | None = None

    @property
    def property_failed(self) -> bool:
        return self.claim.property and self.verdict == FAILS

    @property
    def coverage(self) -> str:
        measured = sum(c.verdict != NOT_MEASURED for c in self.checks)
        return f"{measured}/{len(self.checks)}"

    @property
    def points(self) -> frozenset[str]:
        """The point ids that feed the claim (for repetitions until decisive)."""
        return frozenset().union(*(c.points for c in self.checks)) if self.checks else frozenset()

    @property
    def rounds_needed(self) -> int | None:
        """For an inconclusive claim: the repetitions at which the claim itself decides with 80 %
        power (stats/power.py, rounds_needed_for_verdict on its every_cell verdict: every undecided
        check holding, or one failing at Holm's level); None when decided or when an undecided
        check that matters has no estimate."""
        if self.verdict != INCONCLUSIVE or self.decision is None:
            return None
        return rounds_needed_for_verdict(self.decision)


def combine(verdicts: list[str]) -> str:
    """The claim's verdict from decided check verdicts (the checks already Holm-adjusted)."""
    measured = [v for v in verdicts if v != NOT_MEASURED]
    if not measured:
        return NOT_MEASURED
    if FAILS in measured:
        return FAILS
    if INCONCLUSIVE in measured:
        return INCONCLUSIVE
    return HOLDS


# --- entry points ----------------------------------------------------------------------------
def evaluate_claims(data: RunData, alpha: float | None = None,
                    repetitions: Collection[str] | None = None) -> list[ClaimResult]:
    """Every declared claim. alpha: the level of each one-sided test (default: each check's
    alpha / 2), e.g. a sequential look's nominal level; repetitions: only these (as
    results/*.csv write them), e.g. the rounds done at a look."""
    return [evaluate_claim(data, claim, alpha, repetitions) for claim in data.report.claims]


def evaluate_claim(data: RunData, claim: ClaimSpec, alpha: float | None = None,
                   repetitions: Collection[str] | None = None) -> ClaimResult:
    results: list[CheckResult] = []
    for check in claim.checks():
        results.extend(run_check(data, check, alpha, repetitions))
    measured = [r for r in results if r.verdict != NOT_MEASURED and r.decision is not None]
    if not measured:
        return ClaimResult(claim, combine([r.verdict for r in results]), results)
    side = alpha if alpha is not None else claim.checks()[0].alpha / 2
    combined = every_cell([r.decision for r in measured], alpha=side)
    for r, adjusted in zip(measured, combined.cells):
        if adjusted.verdict != r.verdict:
            r.detail += f"; after Holm over the claim's {len(measured)} checks: {adjusted.verdict}"
        r.verdict, r.decision = adjusted.verdict, adjusted
        # a check's "does not hold" is Holm-adjusted over the claim's checks: its power at that level
        r.rounds_needed = (rounds_needed_for_verdict(adjusted, tests=len(measured))
                           if adjusted.verdict == INCONCLUSIVE else None)
    return ClaimResult(claim, combined.verdict, results, combined)


class _Context:
    def __init__(self, data: RunData, alpha: float, repetitions: Collection[str] | None):
        self.data, self.alpha = data, alpha
        self.keep = None if repetitions is None else {norm(r) for r in repetitions}

    def cell(self, metric: MetricSpec, selection: Selector) -> EngineCell:
        ec = self.data.cell(metric, selection)
        if self.keep is None:
            return ec
        cell = ec.cell.first_blocks(self.keep)
        return EngineCell(cell, ec.points if len(cell) else frozenset(), ec.positive)

    def stats(self, metric: MetricSpec, selection: Selector) -> Stats:
        samples = self.data.samples(metric, selection)
        return Stats([s.value for s in samples if self.keep is None or s.repetition in self.keep])


def run_check(data: RunData, check: CheckSpec, alpha: float | None = None,
              repetitions: Collection[str] | None = None) -> list[CheckResult]:
    ctx = _Context(data, alpha if alpha is not None else check.alpha / 2, repetitions)
    metric = data.report.metrics[check.metric]
    combos = _combinations(data, metric, check)
    if not combos:
        label = check.label or _describe(check.where)
        return [CheckResult(label, NOT_MEASURED, "no results for this selection")]
    if check.rule == "matches" and check.expected == "published":
        # only the cells the seed gives a number for
        stated = [c for c in combos if data.published_value(check.metric, {**check.where, **c}) is not None]
        combos = stated or combos
    rule = {"compare": _compare, "range": _range, "matches": _matches, "monotone": _monotone, "shape": _shape,
            "share": _share, "best": _best}[check.rule]
    out = []
    for combo in combos:
        selection = {**check.where, **combo}
        label = ", ".join(filter(None, [check.label, _short(combo)])) or _short(check.where) or check.rule
        out.append(rule(ctx, check, metric, selection, label))
    return out


def _combinations(data: RunData, metric: MetricSpec, check: CheckSpec) -> list[dict]:
    if not check.for_each:
        return [{}]
    where = {**metric.where, **check.where}
    lists = []
    for dim in check.for_each:
        if dim in where and isinstance(where[dim], list):
            values = [norm(v) for v in where[dim]]
        elif dim in where:
            values = [norm(where[dim])]
        else:
            values = data.values(dim, [metric.kind], _without_outcome(metric, where))
        lists.append(values)
    combos = [dict(zip(check.for_each, vals)) for vals in itertools.product(*lists)]
    # keep combinations the run has any record of (a Cartesian product of two dimensions
    # may name cells that no point has; a compare's cells are its a and b selections); if
    # none, keep all so that they show as not measured
    sides = [check.a, check.b] if check.rule == "compare" else [{}]
    rows = data.rows(metric.kind)
    loose = _without_outcome(metric, where)
    present = [c for c in combos if any(matches(r, {**loose, **c, **side}) for side in sides for r in rows)]
    return present or combos


def _without_outcome(metric: MetricSpec, where: Selector) -> Selector:
    """A selection of GETs of any outcome: a cell whose GETs all timed out is still a cell."""
    if metric.kind != "request":
        return where
    return {k: v for k, v in where.items() if not (k == "outcome" and v == COMPLETE) and not (k == "ok" and v is True)}


def _describe(selection: Selector) -> str:
    return ", ".join(f"{k}={'/'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in selection.items())


def _short(selection: Selector) -> str:
    """Values only ("apache, C1B"): the dimension names are in the claim's words."""
    return ", ".join("/".join(map(str, v)) if isinstance(v, list) else str(v) for v in selection.values())


# --- formatting ------------------------------------------------------------------------------
def _num(x: float, digits: int) -> str:
    return "∞" if x == math.inf else "-∞" if x == -math.inf else "?" if math.isnan(x) else f"{x:.{digits}f}"


def fmt_cell(cell: Cell, digits: int) -> str:
    """Mean of the completed samples with its 95 % CI, n, and the censored / invalid counts."""
    done = cell.completed()
    if not cell.n and not cell.invalid:
        return "–"
    mean, (lo, hi) = mean_with_ci(done)
    text = f"{_num(mean, digits)} [{_num(lo, digits)}, {_num(hi, digits)}]" if done else "–"
    extra = [f"n={cell.n}"]
    if cell.censored:
        limit = min(lim for lim, o in zip(cell.limits, cell.outcomes) if o == "timed_out") if cell.censoring == RIGHT \
            else max(lim for lim, o in zip(cell.limits, cell.outcomes) if o == "timed_out")
        bound = f"{limit:.{digits}f}"
        bound = bound.rstrip("0").rstrip(".") if "." in bound else bound
        extra.append(f"{cell.censored} censored {'>' if cell.censoring == RIGHT else '<'} {bound}")
    if cell.invalid:
        extra.append(f"{cell.invalid} invalid")
    return f"{text} ({', '.join(extra)})"


def fmt_stats(stats: Stats, digits: int, n: bool = True) -> str:
    """Mean with its 95 % CI (matches, monotone, shape: samples without outcomes)."""
    if not stats.n:
        return "–"
    mean, (lo, hi) = mean_with_ci(stats.values)
    text = f"{mean:.{digits}f}" + (f" [{_num(lo, digits)}, {_num(hi, digits)}]" if stats.n > 1 else "")
    return text + (f" (n={stats.n})" if n else "")


def _pct(x: float) -> str:
    return "∞" if x == math.inf else "-∞" if x == -math.inf else "?" if math.isnan(x) else f"{x:+.1f} %"


def numbers(v: Verdict) -> str:
    """The verdict's numbers inline: effect and 95 % CI, p of each side, n, censored, invalid."""
    parts = []
    if math.isfinite(v.effect_pct):
        parts.append(f"effect {_pct(v.effect_pct)} [{_pct(v.ci_pct[0])}, {_pct(v.ci_pct[1])}]")
    parts.append(f"p(holds) {v.p_holds:.3g}, p(does not hold) {v.p_fails:.3g} at {v.alpha:g} per side")
    parts.append(f"n={v.n}, censored {v.censored}, invalid {v.invalid}")
    text = "; ".join(parts) + f" — {v.rule}"
    return text + (f" ({v.note})" if v.note else "")


def _decided(verdict: str, rule: str, alpha: float, n: int = 0, note: str = "") -> Verdict:
    """A check decided without a test (matches, shape, share) as the engine's verdict: p 0 on
    its decided side, so Holm leaves it as it is."""
    p_holds = 0.0 if verdict == HOLDS else 1.0
    p_fails = 0.0 if verdict == FAILS else 1.0
    return Verdict(verdict, rule, math.nan, (math.nan, math.nan), p_holds, p_fails, n, 0, 0, alpha, note=note)


# --- effects ---------------------------------------------------------------------------------
def effect(a: EngineCell, b: EngineCell) -> Effect:
    """The engine's effect log(a/b); for cells with values <= 0 (no ratio) an undetermined
    effect whose direction Gehan's permutation test decides (margins stay undecided)."""
    if a.positive and b.positive:
        return compare(a.cell, b.cell)
    counts = dict(n=(a.cell.n, b.cell.n), censored=(a.cell.censored, b.cell.censored),
                  invalid=(a.cell.invalid, b.cell.invalid))
    va, vb = a.cell.valid(), b.cell.valid()
    shared = {blk for _, _, blk in va} & {blk for _, _, blk in vb}
    blocked = len(shared) >= 2 and all(blk in shared for _, _, blk in va + vb)

    def fallback(threshold: float) -> tuple[float, float]:
        if threshold != 0.0 or not va or not vb:
            return 1.0, 1.0
        return gehan.p_values([v for v, _, _ in va], [c for _, c, _ in va], [v for v, _, _ in vb],
                              [c for _, c, _ in vb], [blk for *_, blk in va] if blocked else None,
                              [blk for *_, blk in vb] if blocked else None, a.cell.censoring == RIGHT)

    return Effect(math.nan, math.inf, 0, blocks=0, sd_pair=math.nan, fallback=fallback,
                  note="values <= 0 have no ratio: Gehan's permutation test on the values decides the "
                       "direction; a margin cannot be decided", **counts)


def _intercept_effect(values: list[float], kind: list[int], counts: dict) -> Effect:
    """The mean of `values` (censored: kind +1 above, -1 below) as an effect, from the censored
    normal model with an intercept only (stats/tobit.py)."""
    done = sum(1 for k in kind if k == 0)
    if done < 2:
        return Effect(math.nan, math.inf, 0, blocks=0, sd_pair=math.nan,
                      note=f"{done} completed sample(s): no spread to test with", **counts)
    f = tobit.fit(np.ones((len(values), 1)), np.asarray(values, float), np.asarray(kind))
    if not f.converged:
        return Effect(float(f.beta[0]), math.inf, f.df, blocks=0, sd_pair=math.nan,
                      note="the censored fit did not converge", **counts)
    return Effect(float(f.beta[0]), float(math.sqrt(f.cov[0, 0])), f.df, blocks=0, sd_pair=f.sigma, **counts)


def paired_difference(a: Cell, b: Cell) -> Effect:
    """a - b in the metric's unit, over the repetitions where each cell has one sample: a
    censored sample makes the difference censored (a delay of a beyond its timeout: a - b above
    the bound); both censored tells nothing and is left out (still counted as censored)."""
    by_block = lambda c: {blk: [(v, done) for v, done, b2 in c.valid() if b2 == blk] for _, _, blk in c.valid()}  # noqa: E731
    ba, bb = by_block(a), by_block(b)
    right = a.censoring == RIGHT
    values, kind = [], []
    for blk in ba:
        if blk is None or blk not in bb or len(ba[blk]) != 1 or len(bb[blk]) != 1:
            continue
        (va, da), (vb, db) = ba[blk][0], bb[blk][0]
        if da and db:
            values.append(va - vb), kind.append(0)
        elif da != db:
            values.append(va - vb)
            # a censored beyond (right) / below (left) its bound moves a - b the same way; b the other
            kind.append((1 if right else -1) * (1 if not da else -1))
    counts = dict(n=(a.n, b.n), censored=(a.censored, b.censored), invalid=(a.invalid, b.invalid))
    return _intercept_effect(values, kind, counts)


def level_effect(cell: Cell) -> Effect:
    """The cell's log (geometric) median from the censored log-normal model, intercept only."""
    side = 1 if cell.censoring == RIGHT else -1
    rows = cell.valid()
    counts = dict(n=(cell.n, 0), censored=(cell.censored, 0), invalid=(cell.invalid, 0))
    return _intercept_effect([math.log(v) for v, _, _ in rows], [0 if c else side for _, c, _ in rows], counts)


def _raw_magnitude(e: Effect, lo: float, hi: float, rule: str, alpha: float, label: str) -> Verdict:
    """A range on the effect's own scale: holds when the CI lies inside [lo, hi], does not hold
    when it lies wholly above or below (as stats.rules.magnitude, without the log-ratio scale)."""
    if not e.determined:  # not weak: an undetermined range stays inconclusive under every_cell
        return Verdict(INCONCLUSIVE, rule, math.nan, (math.nan, math.nan), 1.0, 1.0, sum(e.n), sum(e.censored),
                       sum(e.invalid), alpha, label, e.note, kind="magnitude", interval=(lo, hi), effect=e)
    p_holds, p_fails = range_p_values(e, lo, hi)
    verdict = FAILS if p_fails < alpha else HOLDS if p_holds < alpha else INCONCLUSIVE
    return Verdict(verdict, rule, math.nan, (math.nan, math.nan), p_holds, p_fails, sum(e.n), sum(e.censored),
                   sum(e.invalid), alpha, label, e.note, kind="magnitude", interval=(lo, hi), effect=e)


# --- rules -----------------------------------------------------------------------------------
def _compare(ctx: _Context, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    sel_a, sel_b = {**selection, **check.a}, {**selection, **check.b}
    a, b = ctx.cell(metric, sel_a), ctx.cell(metric, sel_b)
    name_a, name_b = _short(check.a) or "a", _short(check.b) or "b"
    ours = f"{name_a} {fmt_cell(a.cell, metric.digits)} vs {name_b} {fmt_cell(b.cell, metric.digits)}"
    seed = _seed_pair(ctx.data, check.metric, sel_a, sel_b, name_a, name_b, check)
    points = a.points | b.points
    if not a.cell.n or not b.cell.n:
        return CheckResult(label, NOT_MEASURED, ours, seed, "a side has no samples", points=points)
    alpha = ctx.alpha
    if check.range is not None:
        lo, hi = check.range
        e = paired_difference(a.cell, b.cell)
        v = _raw_magnitude(e, lo, hi, f"{name_a} − {name_b} within {lo:g}..{hi:g} {metric.unit} in every cell, "
                           f"paired by repetition: the CI lies inside the range (reason: {check.reason})", alpha, label)
        if e.determined:
            ci = e.ci(1 - 2 * alpha)
            ours += f"; difference {e.estimate:+.{metric.digits}f} [{_num(ci[0], metric.digits)}, " \
                    f"{_num(ci[1], metric.digits)}] {metric.unit}"
    else:
        e = effect(a, b)
        if check.range_pct is not None:
            v = magnitude(e, check.range_pct[0], check.range_pct[1], alpha, label)
            v = replace(v, rule=v.rule + f" (reason: {check.reason})")
        elif check.relation in (">", "<"):
            v = direction(e, check.relation == ">", alpha, label)
        elif check.relation == "~":
            v = equivalence(e, check.margin_pct, alpha, label)
        elif check.relation == ">=":
            v = at_least(e, check.margin_pct, alpha, label)
        else:
            v = at_most(e, check.margin_pct, alpha, label)
        if check.margin_pct is not None and check.relation in ("~", ">=", "<=") and check.range_pct is None:
            v = replace(v, rule=v.rule + f" (reason: {check.reason})")
    return CheckResult(label, v.verdict, ours, seed, numbers(v), v, points)


def _range(ctx: _Context, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    ec = ctx.cell(metric, selection)
    lo, hi = check.range
    ours = fmt_cell(ec.cell, metric.digits)
    if not ec.cell.n:
        return CheckResult(label, NOT_MEASURED, ours, "", "no samples", points=ec.points)
    rule = (f"the median lies in {lo:g}..{hi:g} {metric.unit}: its CI lies inside the range; does not hold when "
            f"the CI lies wholly outside (reason: {check.reason})")
    if not ec.positive:
        v = _decided(INCONCLUSIVE, rule, ctx.alpha, ec.cell.n, "values <= 0: no log-normal median")
        return CheckResult(label, v.verdict, ours, "", numbers(v), v, ec.points)
    e = level_effect(ec.cell)
    v = _raw_magnitude(e, math.log(lo), math.log(hi), rule, ctx.alpha, label)
    if e.determined:
        ci = e.ci(1 - 2 * ctx.alpha)
        ours += f"; median {math.exp(e.estimate):.{metric.digits}f} [{math.exp(ci[0]):.{metric.digits}f}, " \
                f"{math.exp(ci[1]):.{metric.digits}f}]"
    return CheckResult(label, v.verdict, ours, "", numbers(v), v, ec.points)


def seed_agrees(pa: float, pb: float, check: CheckSpec) -> bool:
    """Do the seed's own two numbers go the way its words say (one value each, no test)?"""
    if check.range_pct is not None and pb:
        return check.range_pct[0] <= (pa / pb - 1) * 100 <= check.range_pct[1]
    if check.range is not None:
        return check.range[0] <= pa - pb <= check.range[1]
    if check.relation == "~":
        return pb != 0 and abs(pa / pb - 1) * 100 <= (check.margin_pct or 0)
    margin = (check.margin_pct or 0) / 100
    return {">": pa > pb, "<": pa < pb, ">=": pa >= pb * (1 - margin), "<=": pa <= pb * (1 + margin)}[check.relation]


def _seed_pair(data: RunData, metric_name, sel_a, sel_b, name_a, name_b, check: CheckSpec) -> str:
    pa, pb = data.published_value(metric_name, sel_a), data.published_value(metric_name, sel_b)
    if pa is None and pb is None:
        return ""
    fa = "–" if pa is None else f"{pa:g}"
    fb = "–" if pb is None else f"{pb:g}"
    text = f"{name_a} {fa}, {name_b} {fb}"
    if pa is not None and pb is not None and not seed_agrees(pa, pb, check):
        text += " (the seed's own numbers go the other way)"
    return text


def _matches(ctx: _Context, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    stats = ctx.stats(metric, selection)
    points = frozenset(s.point_id for s in ctx.data.samples(metric, selection))
    published = ctx.data.published_value(check.metric, selection)
    expected = published if check.expected == "published" else check.expected
    seed = "" if published is None else f"{published:g}"
    if not stats.n:
        return CheckResult(label, NOT_MEASURED, "–", seed, "no samples", points=points)
    if expected is None:
        return CheckResult(label, NOT_MEASURED, fmt_stats(stats, metric.digits), seed, "the seed gives no value here",
                           points=points)
    dev = abs(stats.mean - expected)
    limit = abs(expected) * check.tolerance_pct / 100
    verdict = HOLDS if dev <= limit else FAILS
    rule = f"the mean of completed samples within ±{check.tolerance_pct:g} % of {expected:g} (a comparison, no test)"
    return CheckResult(label, verdict, fmt_stats(stats, metric.digits), seed or f"{expected:g}",
                       f"off by {dev:.{metric.digits}f} (n={stats.n}) — {rule}",
                       _decided(verdict, rule, ctx.alpha, stats.n), points)


def _cells_along(ctx: _Context, check: CheckSpec, metric: MetricSpec, selection: Selector):
    where = _without_outcome(metric, {**metric.where, **selection})
    values = ctx.data.values(check.along, [metric.kind], where)
    if check.along in selection:
        wanted = selection[check.along]
        wanted = {norm(w) for w in (wanted if isinstance(wanted, list) else [wanted])}
        values = [v for v in values if v in wanted]
    cells = [(v, ctx.cell(metric, {**selection, check.along: v})) for v in values]
    return [(v, c) for v, c in cells if c.cell.n]


def _monotone(ctx: _Context, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    cells = _cells_along(ctx, check, metric, selection)
    points = frozenset().union(*(c.points for _, c in cells)) if cells else frozenset()
    ours = ", ".join(f"{v}: {_num(mean_with_ci(c.cell.completed())[0], metric.digits)}" for v, c in cells)
    if len(cells) < 2:
        return CheckResult(label, NOT_MEASURED if not cells else INCONCLUSIVE, ours or "–", "",
                           f"{len(cells)} value(s) of {check.along}", points=points)
    alpha = ctx.alpha
    up = check.direction == "increasing"
    xs, ys = [], []
    for v, c in cells:
        x = parse_number(v)
        x = float(len(xs)) if x is None else x
        for y in c.cell.completed():
            xs.append(x), ys.append(y)
    # the trend: Kendall's tau of the samples against x, one-sided each way
    if len(set(xs)) >= 2 and len(set(ys)) >= 2:
        p_up = float(st.kendalltau(xs, ys, alternative="greater").pvalue)
        p_down = float(st.kendalltau(xs, ys, alternative="less").pvalue)
    else:
        p_up = p_down = 1.0
    p_trend_holds, p_trend_against = (p_up, p_down) if up else (p_down, p_up)
    # the steps: does a step go against the direction by more than the tolerance?
    steps = []
    for (x1, c1), (x2, c2) in zip(cells, cells[1:]):
        e = effect(c2, c1)
        steps.append(((x1, x2), e.p_below(from_percent(-check.tolerance_pct)) if up
                      else e.p_above(from_percent(check.tolerance_pct))))
    adjusted = holm([p for _, p in steps])
    against = [f"{x1}→{x2}" for ((x1, x2), _), p in zip(steps, adjusted) if p < alpha]
    p_fails = min([*adjusted, p_trend_against])
    if against or p_trend_against < alpha:
        verdict = FAILS
    elif p_trend_holds < alpha:
        verdict = HOLDS
    else:
        verdict = INCONCLUSIVE
    rule = (f"{check.direction}: Kendall's tau of the samples against {check.along} significant that way, and no "
            f"step significantly against it by more than {check.tolerance_pct:g} % (Holm over {len(steps)} steps)")
    v = Verdict(verdict, rule, math.nan, (math.nan, math.nan), p_trend_holds, p_fails,
                sum(c.cell.n for _, c in cells), sum(c.cell.censored for _, c in cells),
                sum(c.cell.invalid for _, c in cells), alpha, label,
                note=("against: " + ", ".join(against)) if against else "")
    return CheckResult(label, verdict, ours, "", numbers(v), v, points)


def fit_shapes(xs: list[float], ys: list[float]) -> dict[str, tuple[float, float, float]]:
    """{"linear": (a, b, rss), "exponential": (A, b, rss)} for y = a + b x and y = A e^(b x)."""

    x, y = np.asarray(xs, float), np.asarray(ys, float)
    b, a = np.polyfit(x, y, 1)
    out = {"linear": (float(a), float(b), float(np.sum((y - (a + b * x)) ** 2)))}
    positive = np.clip(y, max(float(np.max(y)) * 1e-3, 1e-12), None)
    lb, la = np.polyfit(x, np.log(positive), 1)
    try:
        (A, k), _ = curve_fit(lambda t, A, k: A * np.exp(k * t), x, y, p0=(math.exp(la), lb), maxfev=20000)
    except (RuntimeError, ValueError):
        A, k = math.exp(la), lb
    out["exponential"] = (float(A), float(k), float(np.sum((y - A * np.exp(k * x)) ** 2)))
    return out


def aic(rss: float, n: int, params: int = 2) -> float:
    return n * math.log(max(rss, 1e-300) / n) + 2 * params


def _shape(ctx: _Context, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    cells = _cells_along(ctx, check, metric, selection)
    points = frozenset().union(*(c.points for _, c in cells)) if cells else frozenset()
    xs, ys = [], []
    for v, c in cells:
        x = parse_number(v)
        if x is None:
            return CheckResult(label, INCONCLUSIVE, "–", "", f"{check.along}={v} is not a number", points=points)
        done = c.cell.completed()
        xs += [x] * len(done)
        ys += done
    ours = ", ".join(f"{v}: {_num(mean_with_ci(c.cell.completed())[0], metric.digits)}" for v, c in cells) or "–"
    rule = (f"{check.shape} and {check.direction}: the fit better than the other shape by AIC ≥ {AIC_DECIDES:g} "
            "(model selection, no test)")
    if not cells or not ys:
        return CheckResult(label, NOT_MEASURED, ours, "", "no samples", points=points)
    if len(cells) < MIN_SHAPE_POINTS:
        v = _decided(INCONCLUSIVE, rule, ctx.alpha, len(ys))
        return CheckResult(label, INCONCLUSIVE, ours, "", f"{len(cells)} values of {check.along}, a fit needs "
                                                         f"{MIN_SHAPE_POINTS} — {rule}", v, points)
    fits = fit_shapes(xs, ys)
    n = len(xs)
    aics = {name: aic(f[2], n) for name, f in fits.items()}
    other = "linear" if check.shape == "exponential" else "exponential"
    delta = aics[other] - aics[check.shape]
    sst = sum((y - sum(ys) / n) ** 2 for y in ys) or 1e-300
    r2 = {name: 1 - f[2] / sst for name, f in fits.items()}
    slope = fits[check.shape][1]
    direction_ok = (slope < 0) == (check.direction == "decreasing")
    how = (f"R² linear {r2['linear']:.3f}, exponential {r2['exponential']:.3f}; "
           f"AIC({other}) − AIC({check.shape}) = {delta:+.1f}")
    if not direction_ok:
        verdict, how = FAILS, how + f"; the fit is not {check.direction}"
    elif delta >= AIC_DECIDES:
        verdict = HOLDS
    elif delta <= -AIC_DECIDES:
        verdict = FAILS
    else:
        verdict, how = INCONCLUSIVE, how + f" (|Δ| < {AIC_DECIDES:g})"
    return CheckResult(label, verdict, ours, "", f"{how} — {rule}", _decided(verdict, rule, ctx.alpha, n), points)


def _share(ctx: _Context, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    where = {**metric.where, **selection}
    groups: dict[tuple[str, str], list[float]] = {}
    for row in ctx.data.rows(metric.kind):
        if matches(row, where) and (ctx.keep is None or row.get("repetition") in ctx.keep):
            value = parse_number(row.get(metric.column))
            if value is not None:
                groups.setdefault((row["point_id"], row["repetition"]), []).append(value * metric.scale)
    points = frozenset(p for p, _ in groups)
    if not groups:
        return CheckResult(label, NOT_MEASURED, "–", "", "no records")
    worst, worst_key, n_max = 0.0, None, 0
    for key, values in groups.items():
        fair = sum(values) / len(values)
        n_max = max(n_max, len(values))
        dev = max(abs(v - fair) for v in values) / fair * 100 if fair > 0 else (0.0 if not any(values) else math.inf)
        if dev >= worst:
            worst, worst_key = dev, key
    verdict = HOLDS if worst <= check.tolerance_pct else FAILS
    rule = f"every record within ±{check.tolerance_pct:g} % of its group's r/n (a property, no test)"
    ours = f"largest deviation from r/n {worst:.1f} % ({len(groups)} point×repetition groups, up to {n_max} records)"
    return CheckResult(label, verdict, ours, "r/n", f"worst in {worst_key[0]} r{worst_key[1]} — {rule}",
                       _decided(verdict, rule, ctx.alpha, len(groups)), points)


def _cells_among(ctx: _Context, check: CheckSpec, metric: MetricSpec, selection: Selector) -> list[tuple[dict, EngineCell]]:
    """(cell coordinates, cell) for every combination of the `among` values the selection has samples of."""
    where = _without_outcome(metric, {**metric.where, **selection})
    lists = [ctx.data.values(dim, [metric.kind], where) for dim in check.among]
    coords = [dict(zip(check.among, vals)) for vals in itertools.product(*lists)]
    out = [(c, ctx.cell(metric, {**selection, **c})) for c in coords]
    return [(c, ec) for c, ec in out if ec.cell.n]


def _typical(ec: EngineCell) -> float:
    """For naming the best cell only: the mean of completed samples, or the bound of a cell
    whose samples are all censored."""
    done = ec.cell.completed()
    if done:
        return sum(done) / len(done)
    limits = [lim for lim, o in zip(ec.cell.limits, ec.cell.outcomes) if o == "timed_out"]
    return max(limits) if ec.cell.censoring == RIGHT and limits else min(limits) if limits else math.nan


def _best(ctx: _Context, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    highest = check.best == "highest"
    alpha = ctx.alpha
    if check.a:
        cells = _cells_among(ctx, check, metric, selection)
        points = frozenset().union(*(ec.points for _, ec in cells)) if cells else frozenset()
        claimed = [(c, ec) for c, ec in cells if all(matches(c, {k: v}) for k, v in check.a.items())]
        if not claimed:
            return CheckResult(label, NOT_MEASURED, "–", "", "no samples of the claimed cell", points=points)
        coords_a, cell_a = claimed[0]
        others = [(c, ec) for c, ec in cells if c != coords_a]
        if not others:
            return CheckResult(label, NOT_MEASURED, "–", "", "no other cell to compare with", points=points)
        top = (max if highest else min)(cells, key=lambda cec: _typical(cec[1]))
        ours = f"{_short(check.a)} {fmt_cell(cell_a.cell, metric.digits)}; the {check.best} mean " \
               f"{_short(top[0])} of {len(cells)} cells"
        verdicts = [direction(effect(cell_a, ec), highest, alpha, _short(c)) for c, ec in others]
        v = every_cell(verdicts, alpha=alpha, rule=(
            f"{_short(check.a)} {'above' if highest else 'below'} each of the {len(others)} other cells "
            f"(CI of log(a/other) excludes 0, every one: intersection–union); does not hold: another cell "
            f"significantly {'above' if highest else 'below'} it (Holm)"), label=label)
        worse = [c.label for c in v.cells if c.verdict == FAILS]
        if worse:
            v = replace(v, note="significantly better: " + ", ".join(worse))
        return CheckResult(label, v.verdict, ours, "", numbers(v), v, points)
    levels = ctx.data.values(check.along, [metric.kind], _without_outcome(metric, {**metric.where, **selection}))
    by_level: dict = {}
    winners = []
    points: frozenset[str] = frozenset()
    for value in levels:
        cells = _cells_among(ctx, check, metric, {**selection, check.along: value})
        if cells:
            by_level[value] = {_short(c): ec.cell for c, ec in cells}
            points |= frozenset().union(*(ec.points for _, ec in cells))
            winners.append((value, _short((max if highest else min)(cells, key=lambda cec: _typical(cec[1]))[0])))
            if not all(ec.positive for _, ec in cells):
                v = _decided(INCONCLUSIVE, "best changes", alpha, note="values <= 0: no ratio to rank by")
                return CheckResult(label, INCONCLUSIVE, "", "", numbers(v), v, points)
    ours = "; ".join(f"{v}: {c}" for v, c in winners) or "–"
    if not winners:
        return CheckResult(label, NOT_MEASURED, ours, "", "no samples")
    if len(winners) < 2:
        v = _decided(INCONCLUSIVE, f"one value of {check.along}: the best cannot change", alpha)
        return CheckResult(label, INCONCLUSIVE, ours, "", numbers(v), v, points)
    v = best_changes(by_level, check.best, alpha, label)
    return CheckResult(label, v.verdict, f"the {check.best} mean per {check.along}: {ours}", "", numbers(v), v, points)
