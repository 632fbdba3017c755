"""`congestlab compare RUN_A RUN_B ...`: the same cells of several runs side by side, with
the difference to the first run and whether it exceeds the runs' spread; overlaid plots; the
claims' verdicts per run. The first run's [report] declaration decides the cells and plots.

When does a difference exceed the spread? With >= 3
repetitions in both runs, Welch's t-test at 5 %; with fewer, only a ratio of the means beyond
a factor of 1.5 counts (the runs' spread is unknown with one repetition).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from scipy import stats as st

from congestlab.errors import RunDirError
from congestlab.report.claims import evaluate_claims
from congestlab.report.compare_scope import check_cells_shared, check_same_study, environment_differences
from congestlab.report.data import RunData, Stats, parse_number, norm
from congestlab.report.engine import Console, data_uri, verdict_class
from congestlab.report.figures import Source, render_plot
from congestlab.report.render import render_template

MARGIN = 1.5
ALPHA = 0.05
MIN_WELCH_N = 3


def welch_p(a: Stats, b: Stats) -> float:
    """Two-sided p of Welch's t-test (unequal variances)."""
    if (a.sd or 0.0) == 0.0 and (b.sd or 0.0) == 0.0:
        return 1.0 if a.mean == b.mean else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nearly identical samples: p is still defined
        return float(st.ttest_ind(a.values, b.values, equal_var=False).pvalue)


@dataclass
class Comparison:
    markdown_path: Path
    html_path: Path
    plots: list[Path]
    console: Console = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def difference(base: Stats, other: Stats) -> tuple[str, str]:
    """(exceeds: "yes" / "no" / "–", how it was decided) for other against base."""
    if not base.n or not other.n:
        return "–", "a run has no samples"
    if base.n >= MIN_WELCH_N and other.n >= MIN_WELCH_N:
        p = welch_p(base, other)
        return ("yes" if p < ALPHA else "no"), f"Welch p={p:.3g}"
    if base.mean == 0:
        return ("no" if other.mean == 0 else "yes"), "ratio to 0"
    ratio = other.mean / base.mean
    beyond = ratio >= MARGIN or ratio <= 1 / MARGIN
    return ("yes" if beyond else "no"), f"ratio {ratio:.3g} vs {MARGIN:g} (n < {MIN_WELCH_N})"


def _fmt(stats: Stats, digits: int) -> str:
    if not stats.n:
        return "–"
    text = f"{stats.mean:.{digits}f}"
    if stats.sd is not None:
        text += f" ± {stats.sd:.{digits}f}"
    return f"{text} ({stats.n})"


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
    if values and all(parse_number(v) is not None for v in values):
        values.sort(key=float)
    return values


def _labels(runs: list[RunData]) -> list[str]:
    names = [r.name for r in runs]
    if len(set(names)) == len(names):
        return names
    return [f"{i + 1}:{n}" for i, n in enumerate(names)]


def compare_runs(run_dirs: list[Path], out: Path | None = None, force: bool = False) -> Comparison:
    """Runs of one study side by side. Runs of another study than the first, or with no
    cell in common with it, are refused unless `force` (report/compare_scope.py)."""
    if len(run_dirs) < 2:
        raise RunDirError("compare needs at least two run directories")
    runs = [RunData(Path(d)) for d in run_dirs]
    base = runs[0]
    labels = _labels(runs)
    warnings = check_same_study(labels, [run.spec for run in runs], force)
    warnings += environment_differences(labels, [run.manifest for run in runs])
    for run in runs[1:]:
        run.report = base.report  # one declaration decides the cells for every run
    out = Path(out) if out else Path(f"compare-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}")
    if out.exists() and not out.is_dir():
        raise RunDirError(f"compare --out {out}: exists and is not a directory")
    tables = []
    shared_cells = [0] * (len(runs) - 1)
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
                    stats = [run.stats(metric, sel) for run in runs]
                    if not any(s.n for s in stats):
                        continue
                    diffs = []
                    for i, s in enumerate(stats[1:]):
                        shared_cells[i] += bool(s.n and stats[0].n)
                        exceeds, how = difference(stats[0], s)
                        delta = "–" if not (s.n and stats[0].n) else f"{s.mean - stats[0].mean:+.{metric.digits}f}"
                        diffs.append({"delta": delta, "exceeds": exceeds, "how": how})
                    lines.append({"row": r, "group": g, "metric": metric.title(name),
                                  "values": [_fmt(s, metric.digits) for s in stats], "diffs": diffs})
        tables.append({"id": spec.id, "title": spec.title, "rows_dim": spec.rows, "group_dim": spec.columns,
                       "lines": lines})
    warnings += check_cells_shared(labels, shared_cells, force)
    out.mkdir(parents=True, exist_ok=True)
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
                  "warnings": len((run.manifest.get("fidelity") or {}).get("warnings") or [])}
                 for label, run in zip(labels, runs)],
        "labels": labels, "tables": tables, "figures": figures, "claims": claims, "warnings": warnings,
        "rule": (f"Δ = run − {labels[0]}. Exceeds the spread: with ≥ {MIN_WELCH_N} repetitions in both runs, "
                 f"Welch's t-test at {ALPHA:.0%}; with fewer, a ratio of the means beyond {MARGIN:g}×."),
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
    return Comparison(md_path, html_path, plots, console, warnings)
