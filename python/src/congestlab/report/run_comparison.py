"""`congestlab compare RUN_A RUN_B ...`: the same cells of several runs side by side, with
the effect of each run against the first and whether it lies beyond the runs' spread; overlaid
plots; the claims' verdicts per run. The first run's [report] declaration decides the cells and plots.

Each cell is the statistics engine's (report/data.py `RunData.cell`: GETs that timed out are
censored at their timeout, invalid ones excluded and counted), and the effect of run X against
the first run is `stats.median_ratio.compare` on the two cells: log(median X / median first) from the censored
log-normal model, shown as a relative difference with its 95 % CI. The runs' repetitions are not
paired (repetition 1 of one run and of another ran at different times), so the cells are
compared unblocked. Where a GET timed out, Gehan's permutation test gives the p (stats/median_ratio.py)
and the model only the effect and CI shown. Cells with values <= 0 have no ratio: Gehan's
permutation test decides only whether they differ, without a CI. A difference lies beyond the
spread when its two-sided p, Holm-adjusted over the cells compared between the two runs, is below
5 % (without timed-out GETs its 95 % CI then excludes 0); an effect the data cannot estimate (one
repetition per side) is "–".
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.errors import RunDirError
from congestlab.report.claims import evaluate_claims, fmt_cell
from congestlab.report.data import EngineCell, RunData
from congestlab.report.run_comparison_scope import (check_cells_shared, check_same_study, environment_differences,
                                                    same_runs)
from congestlab.stored import norm, number_of
from congestlab.report.engine import Console, data_uri, verdict_class
from congestlab.rundir import check_new_dir, new_out_dir
from congestlab.report.figures import Source, render_plot
from congestlab.report.render import render_template
from congestlab.stats import Effect, compare, gehan
from congestlab.stats.rules import holm
from congestlab.stats.samples import RIGHT

ALPHA = 0.05  # two-sided: the 95 % CI excludes 0
MAX_LISTED = 20  # differences listed on the console; compare.md has them all


@dataclass
class Difference:
    """One cell of run X against the same cell of the first run."""

    effect: Effect | None       # None: a side has no samples
    p: float                    # two-sided p (NaN: the effect cannot be tested)
    p_holm: float = math.nan    # adjusted over the cells compared between the two runs

    @property
    def tested(self) -> bool:
        return math.isfinite(self.p)

    @property
    def exceeds(self) -> str:
        if not self.tested:
            return "–"
        return "yes" if self.p_holm < ALPHA else "no"

    def delta(self) -> str:
        e = self.effect
        if e is None:
            return "–"
        if e.determined:
            lo, hi = e.ci(1 - ALPHA)
            return f"{_pct(e.percent)} [{_pct(_to_pct(lo))}, {_pct(_to_pct(hi))}]"
        return "–"  # no CI: how() says why

    def how(self) -> str:
        e = self.effect
        if e is None:
            return "a run has no samples"
        # first run / this run (the effect is this run's against the first: e.n is (this, first))
        counts = (f"n={e.n[1]}/{e.n[0]}, censored {e.censored[1]}/{e.censored[0]}, "
                  f"invalid {e.invalid[1]}/{e.invalid[0]}")
        if not self.tested:
            return f"{counts}; {e.note or 'no spread to test with'}"
        test = "Gehan permutation" if e.rank_test is not None else "censored log-normal"
        return f"{counts}; {test} p={self.p:.3g}, Holm p={self.p_holm:.3g}"


def _to_pct(log_ratio: float) -> float:
    return math.inf if log_ratio >= 700 else -100.0 if log_ratio == -math.inf else (math.exp(log_ratio) - 1) * 100


def _pct(x: float) -> str:
    return "∞" if x == math.inf else f"{x:+.1f} %"


def cell_effect(base: EngineCell, other: EngineCell) -> Effect:
    """log(other / base), unblocked; for values <= 0 an undetermined effect whose p Gehan's
    permutation test on the values gives (report/claims/check.py `effect` does the same, blocked)."""
    if base.positive and other.positive:
        return compare(other.cell, base.cell, blocked=False)
    a, b = other.cell.valid(), base.cell.valid()

    def test(threshold: float) -> tuple[float, float]:
        if threshold != 0.0 or not a or not b:
            return 1.0, 1.0
        return gehan.p_values([v for v, _, _ in a], [c for _, c, _ in a], [v for v, _, _ in b],
                              [c for _, c, _ in b], None, None, other.cell.censoring == RIGHT)

    return Effect(math.nan, math.inf, 0, n=(other.cell.n, base.cell.n),
                  censored=(other.cell.censored, base.cell.censored), invalid=(other.cell.invalid, base.cell.invalid),
                  blocks=0, sd_pair=math.nan, rank_test=test,
                  note="values <= 0 have no ratio: Gehan's permutation test decides whether they differ")


def difference(base: EngineCell, other: EngineCell) -> Difference:
    """The effect of other against base and its two-sided p (unadjusted)."""
    if not base.cell.n or not other.cell.n:
        return Difference(None, math.nan)
    e = cell_effect(base, other)
    if not e.determined and e.rank_test is None:
        return Difference(e, math.nan)
    return Difference(e, min(1.0, 2 * min(e.p_above(0.0), e.p_below(0.0))))


def adjust(diffs: list[Difference]) -> None:
    """Holm over the tested differences of one pair of runs."""
    tested = [d for d in diffs if d.tested]
    for d, p in zip(tested, holm([d.p for d in tested])):
        d.p_holm = p


@dataclass
class Comparison:
    markdown_path: Path
    html_path: Path
    plots: list[Path]
    console: Console = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _union(runs: list[RunData], dim: str | None, explicit: list, kinds: list[str], where: dict) -> list:
    if not dim:
        return [None]
    if explicit:
        return [norm(v) for v in explicit]
    seen: dict[str, None] = {}
    for run in runs:
        for v in run.values(dim, kinds, where):
            seen.setdefault(v, None)
    values = list(seen)
    if values and all(number_of(v) is not None for v in values):
        values.sort(key=float)
    return values


def _labels(runs: list[RunData]) -> list[str]:
    names = [r.name for r in runs]
    if len(set(names)) == len(names):
        return names
    return [f"{i + 1}:{n}" for i, n in enumerate(names)]


def compare_runs(run_dirs: list[Path], out: Path | None = None, force: bool = False) -> Comparison:
    """Runs of one study side by side. Runs of another study than the first, or with no
    cell in common with it, are refused unless `force` (report/run_comparison_scope.py)."""
    if len(run_dirs) < 2:
        raise RunDirError("compare needs at least two run directories")
    runs = [RunData(Path(d)) for d in run_dirs]
    base = runs[0]
    labels = _labels(runs)
    warnings = same_runs(labels, run_dirs)
    warnings += check_same_study(labels, [run.spec for run in runs], force)
    warnings += environment_differences(labels, [run.manifest for run in runs])
    for run in runs[1:]:
        run.report = base.report  # one declaration decides the cells for every run
    # new or empty, no link, its folder there (rundir/out_paths.py); made once the comparison stands
    out = Path(out) if out else Path(f"compare-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")
    check_new_dir(out)
    tables = []
    shared_cells = [0] * (len(runs) - 1)
    per_pair: list[list[Difference]] = [[] for _ in runs[1:]]
    for spec in base.report.tables:
        metrics = [(m, base.report.metrics[m]) for m in spec.metrics]
        kinds = sorted({m.kind for _, m in metrics})
        rows = _union(runs, spec.rows, spec.row_values, kinds, spec.where)
        groups = _union(runs, spec.columns, spec.column_values, kinds, spec.where)
        lines = []
        for r in rows:
            for g in groups:
                for name, metric in metrics:
                    sel = {**spec.where, spec.rows: r}
                    if spec.columns:
                        sel[spec.columns] = g
                    cells = [run.cell(metric, sel) for run in runs]
                    if not any(c.cell.n or c.cell.invalid for c in cells):
                        continue
                    diffs = []
                    for i, c in enumerate(cells[1:]):
                        shared_cells[i] += bool(c.cell.n and cells[0].cell.n)
                        d = difference(cells[0], c)
                        per_pair[i].append(d)
                        diffs.append(d)
                    lines.append({"row": r, "group": g, "metric": metric.title(name),
                                  "values": [fmt_cell(c.cell, metric.digits) for c in cells], "diffs": diffs})
        tables.append({"id": spec.id, "title": spec.title, "rows_dim": spec.rows, "group_dim": spec.columns,
                       "lines": lines})
    warnings += check_cells_shared(labels, shared_cells, force)
    for diffs in per_pair:
        adjust(diffs)
    for t in tables:
        for line in t["lines"]:
            line["diffs"] = [{"delta": d.delta(), "exceeds": d.exceeds, "how": d.how()} for d in line["diffs"]]
    new_out_dir(out)
    figures, plots = [], []
    for plot in base.report.plots:
        if plot.type not in ("bar", "line", "cdf"):
            continue
        fig = render_plot(plot, [Source(label, run) for label, run in zip(labels, runs)], out / "plots")
        if fig is None:
            continue
        fig.svg_uri = data_uri(fig.svg, "image/svg+xml")
        fig.png_href = str(fig.png.relative_to(out))
        fig.svg_href = str(fig.svg.relative_to(out))
        figures.append(fig)
        plots += [fig.png, fig.svg]
    verdicts = [evaluate_claims(run) for run in runs]
    claims = []
    for i, claim in enumerate(base.report.claims):
        claims.append({"id": claim.id, "title": claim.title, "property": claim.property,
                       "verdicts": [{"verdict": v[i].verdict, "css": verdict_class(v[i].verdict),
                                     "coverage": v[i].coverage} for v in verdicts]})
    context = {
        "title": f"Comparison: {base.report.title or base.spec.get('title') or base.spec.get('name')}",
        "runs": [{"label": label, "path": str(run.run_dir), "study": run.manifest.get("study"),
                  "quick": run.manifest.get("quick"), "status": run.manifest.get("status"),
                  "git_revision": (run.manifest.get("environment") or {}).get("git_revision"),
                  "kernel": (run.manifest.get("environment") or {}).get("kernel"),
                  "warnings": len(run.manifest["fidelity"]["warnings"])}
                 for label, run in zip(labels, runs)],
        "labels": labels, "tables": tables, "figures": figures, "claims": claims, "warnings": warnings,
        "rule": (f"Cells: mean of the completed samples [95 % CI] (n, censored at the timeout, invalid). "
                 f"Δ = the effect of the run against {labels[0]}: median ratio − 1 from the censored log-normal "
                 f"model (timed-out GETs censored, invalid ones excluded; repetitions not paired across runs), "
                 f"with its 95 % CI. Beyond the spread: two-sided p below {ALPHA:.0%} after Holm's adjustment "
                 f"over the cells compared between the two runs; values <= 0 by Gehan's permutation test; "
                 f"counts in brackets: first run / this run; "
                 f"– where the effect cannot be estimated (e.g. one repetition per side)."),
    }
    md_path, html_path = out / "compare.md", out / "compare.html"
    md_path.write_text(render_template("compare.md.j2", context))
    html_path.write_text(render_template("compare.html.j2", context))
    console: Console = {}
    if claims:
        console["claims per run"] = (("claim", *labels), [[c["id"], *[v["verdict"] for v in c["verdicts"]]]
                                                          for c in claims])
    n_exceed = sum(d["exceeds"] == "yes" for t in tables for line in t["lines"] for d in line["diffs"])
    n_cells = sum(len(t["lines"]) for t in tables)
    console["cells"] = (("cells compared", "differences beyond the spread"), [[str(n_cells), str(n_exceed)]])
    beyond = [[t["id"], " ".join(str(x) for x in (line["row"], line["group"]) if x is not None), line["metric"],
               label, d["delta"], d["how"]]
              for t in tables for line in t["lines"] for label, d in zip(labels[1:], line["diffs"])
              if d["exceeds"] == "yes"]
    if beyond:
        shown = beyond[:MAX_LISTED]
        if len(beyond) > MAX_LISTED:
            shown.append(["…", f"{len(beyond) - MAX_LISTED} more in {md_path}", "", "", "", ""])
        console["differences beyond the spread"] = (
            ("table", "cell", "metric", "run", f"Δ vs {labels[0]} [95 % CI]", "n, censored, invalid (first/run); p"),
            shown)
    return Comparison(md_path, html_path, plots, console, warnings)
