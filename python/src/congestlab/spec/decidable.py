"""Claims undecidable by design: each check's smallest attainable p at the planned n, from the
study's points alone (docs/statistics.md, "Decidable by design"; the statistics in
stats/decidable.py). A check whose test cannot reach its level whatever the network does is a
warning naming the repetitions it needs, at `run`, `reproduce` and their `--dry-run` (and with
--quick: a quick run is allowed to decide nothing, never stopped for it).

Per rule: a compare needs more than one sample on some side (a one-sample compare is
undetermined), and where its metric can be censored (a GET's delay, throughput or
retransmissions) a timed-out GET sends it to Gehan's permutation test, whose smallest p is
2^-rounds; `range`, `matches`, `share` and a best cell's comparisons need two repetitions (a
spread); `monotone` Kendall's tau over its values of x; `shape` three values of x and four
samples. A magnitude range decides only once its CI fits inside the range, which depends on the
spread: its repetitions come from a run's report (stats/power.py's estimate), not from here.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from congestlab.spec.models import StudySpec
from congestlab.spec.report import CheckSpec, load_report_spec
from congestlab.spec.sweep import expand
from congestlab.stats import decidable
from congestlab.stats.outcomes import COMPLETE

EXPERIMENT = "experiment"
# request columns a timed-out GET bounds (report/data.py censors them)
CENSORABLE = ("delay_ms", "syn_to_last_ack_ms", "curl_time_ms", "goodput_mbps", "nrt_throughput_mbps",
              "retransmissions")
Planned = tuple[str, dict[str, str], int]  # (experiment, axis labels, repetitions)


@dataclass(frozen=True)
class Undecidable:
    claim: str
    check: str             # the first check it applies to
    why: str
    needs: int | None      # repetitions; None: more repetitions do not help
    more: int = 0          # further checks of the claim with the same reason

    def __str__(self) -> str:
        need = (f"; it needs {self.needs} repetitions" if self.needs
                else "; more repetitions do not help" if self.needs is None else "")
        also = f" (and {self.more} more check{'s' if self.more != 1 else ''})" if self.more else ""
        return f"claim {self.claim}, {self.check}{also}: {self.why}{need}"


def _spell(value) -> str:
    """One spelling per value, numbers as %.12g (as stored/rows.py norm spells a run's values)."""
    if isinstance(value, bool):
        return str(value)
    try:
        return f"{float(value):.12g}"
    except (TypeError, ValueError):
        return str(value).strip()


def _values(want) -> set[str]:
    return {_spell(w) for w in (want if isinstance(want, list) else [want])}


def point_allows(experiment: str, labels: dict[str, str], selection: dict) -> bool:
    """Can a point (its experiment and axis labels) give samples of the selection? Keys that are
    neither its experiment nor one of its axes are not known before a run: allowed."""
    for key, want in selection.items():
        if key == EXPERIMENT and experiment not in _values(want):
            return False
        if key in labels and _spell(labels[key]) not in _values(want):
            return False
    return True


def _matching(planned: list[Planned], selection: dict) -> list[Planned]:
    return [p for p in planned if point_allows(p[0], p[1], selection)]


def _combos(check: CheckSpec, planned: list[Planned], where: dict) -> list[dict]:
    axes = {k for _, labels, _ in planned for k in labels} | {EXPERIMENT}
    lists = []
    for dim in [d for d in check.for_each if d in axes]:  # other dimensions are not known before a run
        if dim in where:
            lists.append([_spell(v) for v in (where[dim] if isinstance(where[dim], list) else [where[dim]])])
        else:
            found = [p[0] if dim == EXPERIMENT else p[1].get(dim) for p in _matching(planned, where)]
            lists.append(list(dict.fromkeys(v for v in found if v is not None)))
    dims = [d for d in check.for_each if d in axes]
    return [dict(zip(dims, vals)) for vals in itertools.product(*lists)]


def _censorable(check: CheckSpec, metrics: dict) -> bool:
    m = metrics[check.metric]
    return (m.kind == "request" and m.column in CENSORABLE and not m.operand()[0]
            and (m.where.get("outcome") == COMPLETE or m.where.get("ok") is True))


def check_needs(check: CheckSpec, metrics: dict, planned: list[Planned], selection: dict) -> tuple[str, int | None]:
    """("", 0) when the check can decide at the planned repetitions, else why and what it needs."""
    alpha = check.alpha / 2
    sides = [check.a, check.b] if check.rule == "compare" else [check.a] if check.a else [{}]
    groups = [_matching(planned, {**selection, **side}) for side in sides]
    if not all(groups):
        return "", 0  # nothing planned: the report shows it not measured
    reps = min(max(r for *_, r in g) for g in groups)
    samples = [sum(r for *_, r in g) for g in groups]
    if check.rule == "compare" or (check.rule == "best" and check.a):
        if max(samples) < 2:
            return "one sample a side, no spread: undetermined", 2
        if _censorable(check, metrics) and decidable.gehan_min_p(reps) >= alpha:
            need = decidable.needed(decidable.gehan_min_p, alpha, reps)
            return (f"where its GETs time out Gehan's permutation test decides (stats/median_ratio.py), whose "
                    f"smallest p at {reps} repetition(s) is 1/{2 ** reps} (level {alpha:g})"), need
        return "", 0
    if check.rule == "monotone":
        xs = {p[1].get(check.along) for p in groups[0]} - {None}
        p_min = decidable.kendall_min_p(len(xs), reps)
        if p_min < alpha:
            return "", 0
        need = decidable.needed(lambda r: decidable.kendall_min_p(len(xs), r), alpha, reps)
        return f"Kendall's tau over {len(xs)} values of {check.along} at {reps} repetition(s) reaches p {p_min:.3g} " \
               f"at best (level {alpha:g})", need
    if check.rule == "shape":
        xs = {p[1].get(check.along) for p in groups[0]} - {None}
        if len(xs) < 3:
            return f"{len(xs)} value(s) of {check.along}: every two-parameter curve fits them", None
        if samples[0] < 4:
            return f"{samples[0]} samples: the curve and its power fit them exactly", \
                decidable.needed(lambda r: decidable.shape_min_p(len(xs), len(xs) * r), alpha, reps)
        return "", 0
    if reps < 2 and (check.rule != "range" or check.trials is not None or samples[0] < 2):
        return f"{reps} repetition(s): no spread to test with", 2
    return "", 0


def undecidable(study: StudySpec, quick: bool = False) -> list[Undecidable]:
    """Every check of the study's claims that cannot decide at its planned repetitions."""
    if not study.report:
        return []
    report = load_report_spec({"report": study.report})
    planned = [(p.experiment, {k: str(v) for k, v in p.labels.items()}, p.repetitions) for p in expand(study, quick)]
    out = []
    for claim in report.claims:
        found: dict[tuple[str, int | None], Undecidable] = {}  # one line per reason and claim
        for check in claim.checks():
            where = {**report.metrics[check.metric].where, **check.where}
            for combo in _combos(check, planned, where):
                why, needs = check_needs(check, report.metrics, planned, {**where, **combo})
                if not why:
                    continue
                if (why, needs) in found:
                    first = found[why, needs]
                    found[why, needs] = Undecidable(first.claim, first.check, why, needs, first.more + 1)
                else:
                    label = check.label or check.rule or ""
                    found[why, needs] = Undecidable(claim.id, f"'{label}'" + (f" at {_short(combo)}" if combo else ""),
                                                    why, needs)
        out += found.values()
    return out


def _short(combo: dict) -> str:
    return ", ".join(str(v) for v in combo.values())
