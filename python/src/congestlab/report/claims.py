"""Verdicts on the seeds' claims (docs/reports.md, "Verdict rules").

Every check ends in one of four verdicts: holds, does not hold, inconclusive, not measured.
A claim with several checks (parts, or one check per `for_each` combination) holds when every
measured check holds; it does not hold when any check does not hold; else it is
inconclusive; it is not measured when no check could be measured.

compare   a <relation> b. With >= 3 samples on both sides: Welch's t-test at `alpha`
          (5 %) decides: a significant difference in the claimed direction holds, in the
          other direction does not hold, no significant difference is inconclusive (for
          >= / <=: holds). With fewer: the ratio of the means against `margin` (1.5): beyond
          the margin decides, inside it is inconclusive (for >= / <=: holds unless the
          ratio is beyond the margin the wrong way). `~`: the means within
          `tolerance_pct` of each other hold; outside it, a significant difference (or a
          ratio beyond the margin) does not hold, else inconclusive.
matches   every cell's mean within `tolerance_pct` of `expected` (a number, or the seed's
          published value for that cell).
monotone  the cell means along `along` move in `direction`: no step goes the other way by
          more than `tolerance_pct` (with >= 3 samples per cell also significantly, by
          Welch), and the last differs from the first in `direction` beyond it.
shape     least-squares fits of the samples against the numeric values of `along`: linear
          y = a + b*x and exponential y = A*exp(b*x); the better by AIC (equal parameter
          counts, so by residual sum of squares) by at least 2 decides; closer is
          inconclusive; fewer than 4 values of `along` is inconclusive.
share     in every point x repetition, each record's value within `tolerance_pct` of the
          group's total / n (TCP sessions sharing r/n).
best      the cells are the combinations of the `among` dimensions' values. With `a`: cell a
          has the best (`best` = highest or lowest) mean; another cell better by a significant
          difference (Welch, >= 3 samples each) or a ratio beyond `margin` does not hold, else
          inconclusive. With `along`: the best cell at each value of `along` is not the same
          cell at every value (fewer than two values: inconclusive).
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as st
from scipy.optimize import curve_fit

from congestlab.report.data import RunData, Stats, matches, norm, parse_number
from congestlab.spec.report import CheckSpec, ClaimSpec, MetricSpec, Selector

HOLDS, FAILS, INCONCLUSIVE, NOT_MEASURED = "holds", "does not hold", "inconclusive", "not measured"
MIN_WELCH_N = 3
MIN_SHAPE_POINTS = 4
AIC_DECIDES = 2.0


@dataclass
class CheckResult:
    """One check on one combination of for_each values."""

    label: str
    verdict: str
    ours: str
    seed: str = ""
    detail: str = ""


@dataclass
class ClaimResult:
    claim: ClaimSpec
    verdict: str
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def property_failed(self) -> bool:
        return self.claim.property and self.verdict == FAILS

    @property
    def coverage(self) -> str:
        measured = sum(c.verdict != NOT_MEASURED for c in self.checks)
        return f"{measured}/{len(self.checks)}"


def combine(verdicts: list[str]) -> str:
    measured = [v for v in verdicts if v != NOT_MEASURED]
    if not measured:
        return NOT_MEASURED
    if FAILS in measured:
        return FAILS
    if INCONCLUSIVE in measured:
        return INCONCLUSIVE
    return HOLDS


def evaluate_claims(data: RunData) -> list[ClaimResult]:
    return [evaluate_claim(data, claim) for claim in data.report.claims]


def evaluate_claim(data: RunData, claim: ClaimSpec) -> ClaimResult:
    results: list[CheckResult] = []
    for check in claim.checks():
        results.extend(run_check(data, check))
    return ClaimResult(claim, combine([r.verdict for r in results]), results)


def run_check(data: RunData, check: CheckSpec) -> list[CheckResult]:
    metric = data.report.metrics[check.metric]
    combos = _combinations(data, metric, check)
    if not combos:
        label = check.label or _describe(check.where)
        return [CheckResult(label, NOT_MEASURED, "no results for this selection")]
    if check.rule == "matches" and check.expected == "published":
        # only the cells the seed gives a number for
        stated = [c for c in combos if data.published_value(check.metric, {**check.where, **c}) is not None]
        combos = stated or combos
    rule = {"compare": _compare, "matches": _matches, "monotone": _monotone, "shape": _shape,
            "share": _share, "best": _best}[check.rule]
    out = []
    for combo in combos:
        selection = {**check.where, **combo}
        label = ", ".join(filter(None, [check.label, _short(combo)])) or _short(check.where) or check.rule
        out.append(rule(data, check, metric, selection, label))
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
            values = data.values(dim, [metric.kind], where)
        lists.append(values)
    combos = [dict(zip(check.for_each, vals)) for vals in itertools.product(*lists)]
    # keep combinations the run has any record of (a Cartesian product of two dimensions
    # may name cells that no point has; a compare's cells are its a and b selections); if
    # none, keep all so that they show as not measured
    sides = [check.a, check.b] if check.rule == "compare" else [{}]
    rows = data.rows(metric.kind)
    present = [c for c in combos
               if any(matches(r, {**where, **c, **side}) for side in sides for r in rows)]
    return present or combos


def _describe(selection: Selector) -> str:
    return ", ".join(f"{k}={'/'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in selection.items())


def _short(selection: Selector) -> str:
    """Values only ("apache, C1B"): the dimension names are in the claim's words."""
    return ", ".join("/".join(map(str, v)) if isinstance(v, list) else str(v) for v in selection.values())


def fmt_stats(stats: Stats, digits: int, n: bool = True) -> str:
    if not stats.n:
        return "–"
    text = f"{stats.mean:.{digits}f}"
    if stats.sd is not None:
        text += f" ± {stats.sd:.{digits}f}"
    return text + (f" (n={stats.n})" if n else "")


def fmt_pair(name_a: str, a: Stats, relation: str, name_b: str, b: Stats, digits: int) -> str:
    same_n = a.n == b.n
    text = (f"{name_a} {fmt_stats(a, digits, not same_n)} {relation} {name_b} {fmt_stats(b, digits, not same_n)}")
    return text + (f" (n={a.n})" if same_n and a.n else "")


def welch_p(a: Stats, b: Stats) -> float:
    """Two-sided p of Welch's t-test (unequal variances)."""


    if (a.sd or 0.0) == 0.0 and (b.sd or 0.0) == 0.0:
        return 1.0 if a.mean == b.mean else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nearly identical samples: p is still defined
        return float(st.ttest_ind(a.values, b.values, equal_var=False).pvalue)


def _ratio(a: float, b: float) -> float:
    if b == 0:
        return 1.0 if a == 0 else math.copysign(math.inf, a)
    return a / b


def decide_compare(a: Stats, b: Stats, relation: str, margin: float, alpha: float,
                   tolerance_pct: float) -> tuple[str, str]:
    """(verdict, how it was decided) for a <relation> b."""
    if not a.n or not b.n:
        return NOT_MEASURED, "a side has no samples"
    ma, mb = a.mean, b.mean
    ratio = _ratio(ma, mb)
    if relation == "~":
        if abs(ratio - 1.0) * 100 <= tolerance_pct:
            return HOLDS, f"ratio {ratio:.3g} within ±{tolerance_pct:g} %"
        if a.n >= MIN_WELCH_N and b.n >= MIN_WELCH_N:
            p = welch_p(a, b)
            return (FAILS if p < alpha else INCONCLUSIVE), f"ratio {ratio:.3g}, Welch p={p:.3g}"
        beyond = ratio >= margin or ratio <= 1 / margin
        return (FAILS if beyond else INCONCLUSIVE), f"ratio {ratio:.3g} vs margin {margin:g}"
    want_greater = relation in (">", ">=")
    weak = relation in (">=", "<=")
    if a.n >= MIN_WELCH_N and b.n >= MIN_WELCH_N:
        p = welch_p(a, b)
        how = f"Welch p={p:.3g}"
        if p >= alpha:
            return (HOLDS if weak else INCONCLUSIVE), how + " (no significant difference)"
        return (HOLDS if (ma > mb) == want_greater else FAILS), how
    how = f"ratio {ratio:.3g} vs margin {margin:g} (n < {MIN_WELCH_N})"
    right = ratio >= margin if want_greater else ratio <= 1 / margin
    wrong = ratio <= 1 / margin if want_greater else ratio >= margin
    if right:
        return HOLDS, how
    if wrong:
        return FAILS, how
    return (HOLDS if weak else INCONCLUSIVE), how + " (inside the margin)"


def _compare(data: RunData, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    sel_a, sel_b = {**selection, **check.a}, {**selection, **check.b}
    a, b = data.stats(metric, sel_a), data.stats(metric, sel_b)
    verdict, how = decide_compare(a, b, check.relation, check.margin, check.alpha, check.tolerance_pct)
    name_a, name_b = _short(check.a) or "a", _short(check.b) or "b"
    ours = fmt_pair(name_a, a, check.relation, name_b, b, metric.digits)
    seed = _seed_pair(data, check.metric, metric, sel_a, sel_b, name_a, name_b, check)
    return CheckResult(label, verdict, ours, seed, how)


def seed_agrees(pa: float, pb: float, relation: str, tolerance_pct: float) -> bool:
    """Do the seed's own two numbers go the way its words say (direction only, one value each)?"""
    if relation == "~":
        return abs(_ratio(pa, pb) - 1.0) * 100 <= tolerance_pct
    return {">": pa > pb, "<": pa < pb, ">=": pa >= pb, "<=": pa <= pb}[relation]


def _seed_pair(data, metric_name, metric, sel_a, sel_b, name_a, name_b, check: CheckSpec) -> str:
    pa, pb = data.published_value(metric_name, sel_a), data.published_value(metric_name, sel_b)
    if pa is None and pb is None:
        return ""
    fa = "–" if pa is None else f"{pa:g}"
    fb = "–" if pb is None else f"{pb:g}"
    text = f"{name_a} {fa}, {name_b} {fb}"
    if pa is not None and pb is not None and not seed_agrees(pa, pb, check.relation, check.tolerance_pct):
        text += " (the seed's own numbers go the other way)"
    return text


def _matches(data: RunData, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    stats = data.stats(metric, selection)
    published = data.published_value(check.metric, selection)
    expected = published if check.expected == "published" else check.expected
    seed = "" if published is None else f"{published:g}"
    if not stats.n:
        return CheckResult(label, NOT_MEASURED, "–", seed, "no samples")
    if expected is None:
        return CheckResult(label, NOT_MEASURED, fmt_stats(stats, metric.digits), seed, "the seed gives no value here")
    dev = abs(stats.mean - expected)
    limit = abs(expected) * check.tolerance_pct / 100
    verdict = HOLDS if dev <= limit else FAILS
    return CheckResult(label, verdict, fmt_stats(stats, metric.digits), seed or f"{expected:g}",
                       f"expected {expected:g} ± {check.tolerance_pct:g} %, off by {dev:.{metric.digits}f}")


def _cells_along(data: RunData, check: CheckSpec, metric: MetricSpec, selection: Selector):
    where = {**metric.where, **selection}
    values = data.values(check.along, [metric.kind], where)
    if check.along in selection:
        wanted = selection[check.along]
        wanted = {norm(w) for w in (wanted if isinstance(wanted, list) else [wanted])}
        values = [v for v in values if v in wanted]
    cells = [(v, data.stats(metric, {**selection, check.along: v})) for v in values]
    return [(v, s) for v, s in cells if s.n]


def _monotone(data: RunData, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    cells = _cells_along(data, check, metric, selection)
    ours = ", ".join(f"{v}: {s.mean:.{metric.digits}f}" for v, s in cells)
    if len(cells) < 2:
        return CheckResult(label, NOT_MEASURED if not cells else INCONCLUSIVE, ours or "–", "",
                           f"{len(cells)} value(s) of {check.along}")
    sign = 1 if check.direction == "increasing" else -1
    tol = check.tolerance_pct / 100

    def step(s1: Stats, s2: Stats) -> int:
        """+1: moves in direction beyond tolerance (and significantly); -1: against; 0: neither."""
        change = (s2.mean - s1.mean) * sign
        scale = max(abs(s1.mean), abs(s2.mean)) or 1.0
        if abs(change) <= tol * scale:
            return 0
        if s1.n >= MIN_WELCH_N and s2.n >= MIN_WELCH_N and welch_p(s1, s2) >= check.alpha:
            return 0
        return 1 if change > 0 else -1

    against = [(cells[i][0], cells[i + 1][0]) for i in range(len(cells) - 1) if step(cells[i][1], cells[i + 1][1]) < 0]
    overall = step(cells[0][1], cells[-1][1])
    if against:
        verdict, how = FAILS, "goes the other way: " + ", ".join(f"{x}→{y}" for x, y in against)
    elif overall > 0:
        verdict, how = HOLDS, f"{check.direction} from {cells[0][0]} to {cells[-1][0]}"
    elif overall < 0:
        verdict, how = FAILS, "first to last goes the other way"
    else:
        verdict, how = INCONCLUSIVE, f"no change beyond ±{check.tolerance_pct:g} %"
    return CheckResult(label, verdict, ours, "", how)


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


def _shape(data: RunData, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    cells = _cells_along(data, check, metric, selection)
    xs, ys = [], []
    for v, s in cells:
        x = parse_number(v)
        if x is None:
            return CheckResult(label, INCONCLUSIVE, "–", "", f"{check.along}={v} is not a number")
        xs += [x] * s.n
        ys += s.values
    ours = ", ".join(f"{v}: {s.mean:.{metric.digits}f}" for v, s in cells) or "–"
    if not cells:
        return CheckResult(label, NOT_MEASURED, ours, "", "no samples")
    if len(cells) < MIN_SHAPE_POINTS:
        return CheckResult(label, INCONCLUSIVE, ours, "", f"{len(cells)} values of {check.along}, a fit needs "
                                                         f"{MIN_SHAPE_POINTS}")
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
        return CheckResult(label, FAILS, ours, "", how + f"; the fit is not {check.direction}")
    if delta >= AIC_DECIDES:
        return CheckResult(label, HOLDS, ours, "", how)
    if delta <= -AIC_DECIDES:
        return CheckResult(label, FAILS, ours, "", how)
    return CheckResult(label, INCONCLUSIVE, ours, "", how + f" (|Δ| < {AIC_DECIDES:g})")


def _share(data: RunData, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    where = {**metric.where, **selection}
    groups: dict[tuple[str, str], list[float]] = {}
    for row in data.rows(metric.kind):
        if matches(row, where):
            value = parse_number(row.get(metric.column))
            if value is not None:
                groups.setdefault((row["point_id"], row["repetition"]), []).append(value * metric.scale)
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
    ours = f"largest deviation from r/n {worst:.1f} % ({len(groups)} point×repetition groups, up to {n_max} records)"
    return CheckResult(label, verdict, ours, "r/n", f"tolerance ±{check.tolerance_pct:g} %; worst in {worst_key[0]} "
                                                    f"r{worst_key[1]}")


def _cells_among(data: RunData, check: CheckSpec, metric: MetricSpec, selection: Selector) -> list[tuple[dict, Stats]]:
    """(cell, stats) for every combination of the `among` values the selection has samples of."""
    where = {**metric.where, **selection}
    lists = [data.values(dim, [metric.kind], where) for dim in check.among]
    cells = [dict(zip(check.among, vals)) for vals in itertools.product(*lists)]
    out = [(cell, data.stats(metric, {**selection, **cell})) for cell in cells]
    return [(c, s) for c, s in out if s.n]


def _best_of(cells: list[tuple[dict, Stats]], highest: bool) -> tuple[dict, Stats]:
    return (max if highest else min)(cells, key=lambda cs: cs[1].mean)


def _best(data: RunData, check: CheckSpec, metric: MetricSpec, selection: Selector, label: str) -> CheckResult:
    highest = check.best == "highest"
    if check.a:
        cells = _cells_among(data, check, metric, selection)
        claimed = [(c, s) for c, s in cells if all(matches(c, {k: v}) for k, v in check.a.items())]
        if not claimed:
            return CheckResult(label, NOT_MEASURED, "–", "", "no samples of the claimed cell")
        cell_a, stats_a = _best_of(claimed, highest)
        top, stats_top = _best_of(cells, highest)
        ours = f"{_short(check.a)} {fmt_stats(stats_a, metric.digits)}; best {_short(top)} " \
               f"{fmt_stats(stats_top, metric.digits)} of {len(cells)} cells"
        if top == cell_a:
            return CheckResult(label, HOLDS, ours, "", f"the {check.best} mean")
        verdict, how = decide_compare(stats_top, stats_a, ">" if highest else "<", check.margin, check.alpha,
                                      check.tolerance_pct)
        return CheckResult(label, FAILS if verdict == HOLDS else INCONCLUSIVE, ours, "",
                           f"{_short(top)} is better: {how}")
    values = data.values(check.along, [metric.kind], {**metric.where, **selection})
    winners = []
    for value in values:
        cells = _cells_among(data, check, metric, {**selection, check.along: value})
        if cells:
            winners.append((value, _best_of(cells, highest)[0]))
    ours = "; ".join(f"{v}: {_short(c)}" for v, c in winners) or "–"
    if not winners:
        return CheckResult(label, NOT_MEASURED, ours, "", "no samples")
    if len(winners) < 2:
        return CheckResult(label, INCONCLUSIVE, ours, "", f"one value of {check.along}")
    same = all(c == winners[0][1] for _, c in winners)
    return CheckResult(label, FAILS if same else HOLDS, ours, "",
                       f"the {check.best} cell per {check.along}" + (": always the same" if same else ": differs"))
