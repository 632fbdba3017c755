"""Declared plots (bar, line, cdf, timeseries) from stored samples only, as PNG and SVG.

Colours are the Okabe-Ito palette (distinguishable with the common colour-vision
deficiencies); series also differ by marker, runs in a comparison by line style and hatch.
The seed's published values are black markers labelled "seed".

Bars and line points are the mean of a cell's samples with its 95 % CI (Student t), the same
numbers as the tables' "mean [95 % CI]" (report/cells.py); faint dots are the single
repetitions. A CDF is the Kaplan–Meier estimate of the cell's distribution where some of its
GETs timed out (censored at their timeout, as the tables' medians count them: a curve that
stops below 1 is the share that did not finish, and is labelled so), else the empirical CDF,
which the Kaplan–Meier estimate equals without censoring.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from congestlab.report.data import RunData, Stats
from congestlab.spec.report import PlotSpec
from congestlab.stats.samples import RIGHT
from congestlab.stats.summary import mean_with_ci
from congestlab.stored import norm, number_of

# the same plot is the same file: SVG ids from a fixed salt, and no date in its metadata, so a
# report rebuilt from the same run directory is byte for byte the same
matplotlib.rcParams["svg.hashsalt"] = "congestlab"
SVG_METADATA = {"Date": None}

# Okabe & Ito, "Color Universal Design" (2008): blue, orange, bluish green, vermillion,
# reddish purple, sky blue, yellow
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442"]
MARKERS = ["o", "s", "^", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", ":", "-."]
HATCHES = ["", "//", "..", "xx"]
SEED_STYLE = {"color": "black", "zorder": 5}

plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.titlesize": 10, "legend.fontsize": 8})


@dataclass
class Figure:
    id: str
    title: str
    note: str
    png: Path
    svg: Path
    warnings: list[str] = field(default_factory=list)
    caption: str = ""  # what the marks are (report and compare templates)


CAPTIONS = {
    "bar": "bars: mean over repetitions with its 95 % CI (Student t; as the tables' mean [95 % CI], none at n = 1)",
    "line": "points: mean over repetitions with its 95 % CI (Student t; as the tables' mean [95 % CI], none at "
            "n = 1); faint dots: single repetitions",
    "cdf": "one curve per cell: the Kaplan–Meier estimate where GETs timed out (censored at their timeout, as in "
           "the tables' medians; a curve that stops below 1 leaves out the share that did not finish), else the "
           "empirical CDF",
    "timeseries": "one point per sample",
}


@dataclass
class Source:
    """One run's data in a plot; `label` is empty for a single report, the run's name in a comparison."""

    label: str
    data: RunData


def _values(sources: list[Source], dim: str | None, explicit: list, kinds: list[str], where: dict) -> list:
    if not dim:
        return [None]
    if explicit:
        return [norm(v) for v in explicit]
    seen: dict[str, None] = {}
    for src in sources:
        for v in src.data.values(dim, kinds, where):
            seen.setdefault(v, None)
    values = list(seen)
    if values and all(number_of(v) is not None for v in values) and len(sources) > 1:
        values.sort(key=float)
    return values


def render_plot(plot: PlotSpec, sources: list[Source], out_dir: Path) -> Figure | None:
    """Draw one declared plot; None when no source has a sample for it."""
    first = sources[0].data
    metrics = [(name, first.report.metrics[name]) for name in plot.metrics]
    kinds = sorted({m.kind for _, m in metrics})
    where = dict(plot.where)
    facets = _values(sources, plot.facets, plot.facet_values, kinds, where)
    series_values = _values(sources, plot.series, plot.series_values, kinds, where)
    x_values = _values(sources, plot.x, plot.x_values, kinds, where) if plot.type in ("bar", "line") else [None]
    if not facets or not series_values or not x_values:
        return None  # the run has no value of a facet, series or x dimension (e.g. a subset of the points)
    ncols = min(len(facets), 3)
    nrows = math.ceil(len(facets) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.6 * ncols, 3.9 * nrows), squeeze=False)
    drawn = 0
    censored = [0]  # GETs that timed out in the bar / line cells: their means are of completed GETs only
    keys = list(itertools.product(range(len(sources)), metrics, series_values))
    for f_index, facet in enumerate(facets):
        ax = axes[f_index // ncols][f_index % ncols]
        base = dict(where)
        if plot.facets:
            base[plot.facets] = facet
        for k, (s_index, (mname, metric), sval) in enumerate(keys):
            src = sources[s_index]
            sel = dict(base)
            if plot.series:
                sel[plot.series] = sval
            style = _style(s_index, metrics.index((mname, metric)), series_values.index(sval), len(series_values))
            label = _label(src.label, metric.label or mname if len(metrics) > 1 else "", sval)
            if plot.type == "bar":
                n = _bars(ax, src.data, metric, mname, sel, plot, x_values, k, len(keys), style, label,
                          seed=plot.published and s_index == 0, censored=censored)
            elif plot.type == "line":
                n = _line(ax, src.data, metric, mname, sel, plot, x_values, style, label,
                          seed=plot.published and s_index == 0, censored=censored)
            elif plot.type == "cdf":
                n = _cdf(ax, src.data, metric, sel, style, label)
            else:
                n = _timeseries(ax, src.data, metric, sel, plot, style, label)
            drawn += n
        for ref in plot.reference:
            ax.axhline(ref.y, color="#555555", lw=1, ls=(0, (4, 3)), label=ref.label)
        _axes_text(ax, plot, metrics, facet, x_values)
    for extra in range(len(facets), nrows * ncols):
        axes[extra // ncols][extra % ncols].set_visible(False)
    if not drawn:
        plt.close(fig)
        return None
    fig.suptitle(plot.title, fontsize=11)
    handles, labels = _legend_entries(axes)
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), frameon=False,
                   bbox_to_anchor=(0.5, 0.0))
        fig.tight_layout(rect=(0, 0.06 + 0.03 * ((len(labels) - 1) // 5), 1, 0.95))
    else:
        fig.tight_layout(rect=(0, 0, 1, 0.95))
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{plot.id}.png", out_dir / f"{plot.id}.svg"
    fig.savefig(png, dpi=120)
    fig.savefig(svg, metadata=SVG_METADATA)
    plt.close(fig)
    caption = CAPTIONS[plot.type]
    if "seed" in labels:
        caption += "; black markers: the seed"
    if censored[0]:
        caption += (f"; {censored[0]} samples timed out and are not in these means "
                    "(the tables' Kaplan–Meier medians count them)")
    return Figure(plot.id, plot.title, plot.note, png, svg, caption=caption)


def _tick(x: float) -> str:
    """10000 -> 10k, 150000000 -> 150M: sweep values stay readable under the axis."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(x) >= scale:
            divisor = 1e3 if suffix == "k" else scale
            return f"{x / divisor:.4g}{suffix}"
    return f"{x:g}"


def _style(source: int, metric: int, series: int, n_series: int) -> dict:
    colour_index = metric * n_series + series
    return {"color": PALETTE[colour_index % len(PALETTE)], "marker": MARKERS[(metric + series) % len(MARKERS)],
            "ls": LINESTYLES[source % len(LINESTYLES)], "hatch": HATCHES[source % len(HATCHES)]}


def _label(run: str, metric: str, series) -> str:
    return " · ".join(str(p) for p in (run, metric, series) if p not in (None, "")) or "ours"


def _legend_entries(axes):
    seen: dict[str, object] = {}
    for row in axes:
        for ax in row:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(lab, h)
    return list(seen.values()), list(seen)


def _axes_text(ax, plot: PlotSpec, metrics, facet, x_values) -> None:
    if plot.facets:
        ax.set_title(f"{plot.facets} = {facet}")
    units = {m.unit for _, m in metrics}
    y_label = plot.y_label or (metrics[0][1].title(metrics[0][0]) if len(metrics) == 1 else
                               (units.pop() if len(units) == 1 else ""))
    if plot.type == "cdf":
        ax.set_xlabel(plot.x_label or metrics[0][1].title(metrics[0][0]))
        ax.set_ylabel("fraction of samples ≤ x")  # Kaplan–Meier where some timed out (_cdf)
        ax.set_ylim(0, 1.02)
    elif plot.type == "timeseries":
        ax.set_xlabel(plot.x_label or "time since the first sample (s)")
        ax.set_ylabel(y_label)
    else:
        ax.set_xlabel(plot.x_label or plot.x)
        ax.set_ylabel(y_label)
        if not plot.log_y:
            ax.set_ylim(0, ax.get_ylim()[1] * 1.06)  # room above a plateau and the seed's markers
    if plot.log_x and plot.type != "bar":
        ax.set_xscale("symlog" if any(number_of(v) == 0 for v in x_values if v is not None) else "log")
    numbers = [number_of(v) for v in x_values if v is not None]
    if plot.type == "line" and numbers and None not in numbers and len(numbers) <= 12:
        # ticks at the swept values themselves (a sweep has few points; log minor labels overlap)
        from matplotlib.ticker import NullFormatter

        ax.set_xticks(numbers, [_tick(x) for x in numbers], rotation=45 if len(numbers) > 6 else 0)
        ax.xaxis.set_minor_formatter(NullFormatter())
    if plot.log_y:
        ax.set_yscale("log")
    ax.grid(alpha=0.3, lw=0.6)


def _mean_and_error(values: list[float]) -> tuple[float, float, float]:
    """Mean and the distances to its 95 % CI's ends (0 where the CI is unbounded: n = 1)."""
    mean, (lo, hi) = mean_with_ci(values)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return mean, 0.0, 0.0
    return mean, mean - lo, hi - mean


def _bars(ax, data: RunData, metric, mname, sel, plot, x_values, k, n_keys, style, label, seed, censored) -> int:
    width = 0.8 / n_keys
    xs, means, below, above, pub_x, pub_y = [], [], [], [], [], []
    for i, xv in enumerate(x_values):
        cell = {**sel, plot.x: xv}
        engine_cell = data.cell(metric, cell).cell  # its completed samples are data.stats's
        stats = Stats(engine_cell.completed())
        censored[0] += engine_cell.censored
        x = i - 0.4 + width * (k + 0.5)
        if stats.n:
            mean, lo, hi = _mean_and_error(stats.values)
            xs.append(x)
            means.append(mean)
            below.append(lo)
            above.append(hi)
        pub = data.published_value(mname, cell) if seed else None
        if pub is not None:
            pub_x.append(x)
            pub_y.append(pub)
    if xs:
        ax.bar(xs, means, width * 0.95, yerr=[below, above] if any(below + above) else None, capsize=2,
               color=style["color"], hatch=style["hatch"],
               edgecolor="white" if not style["hatch"] else "black", linewidth=0.4, label=label,
               error_kw={"elinewidth": 0.8})
    if pub_x:
        ax.scatter(pub_x, pub_y, marker="D", s=22, label="seed", **SEED_STYLE)
    ax.set_xticks(range(len(x_values)), [str(v) for v in x_values])
    return len(xs)


def _line(ax, data: RunData, metric, mname, sel, plot, x_values, style, label, seed, censored) -> int:
    numeric = all(number_of(v) is not None for v in x_values)
    pos = {v: (float(v) if numeric else i) for i, v in enumerate(x_values)}
    xs, means, below, above, dots_x, dots_y, pub = [], [], [], [], [], [], []
    for v in x_values:
        cell = {**sel, plot.x: v}
        engine_cell = data.cell(metric, cell).cell  # its completed samples are data.samples's
        stats = Stats(engine_cell.completed())
        censored[0] += engine_cell.censored
        if stats.n:
            mean, lo, hi = _mean_and_error(stats.values)
            xs.append(pos[v])
            means.append(mean)
            below.append(lo)
            above.append(hi)
            dots_x += [pos[v]] * stats.n
            dots_y += stats.values
        p = data.published_value(mname, cell) if seed else None
        if p is not None:
            pub.append((pos[v], p))
    if xs:
        ax.errorbar(xs, means, yerr=[below, above] if any(below + above) else None, color=style["color"], marker=style["marker"], ls=style["ls"], ms=5,
                    capsize=2, lw=1.4, label=label)
        if len(dots_y) > len(xs):
            ax.scatter(dots_x, dots_y, s=8, color=style["color"], alpha=0.35, zorder=2)
    if pub:
        ax.scatter(*zip(*pub), marker="x", s=40, linewidths=1.6, label="seed", **SEED_STYLE)
    if not numeric:
        ax.set_xticks(range(len(x_values)), [str(v) for v in x_values])
    return len(xs)


def _cdf(ax, data: RunData, metric, sel, style, label) -> int:
    cell = data.cell(metric, sel).cell
    valid = cell.valid()
    if not valid:
        return 0
    if not cell.censored:
        values = sorted(v for v, _, _ in valid)
        ys = [(i + 1) / len(values) for i in range(len(values))]
        # from 0 at the smallest value, so that even one sample draws its step
        ax.step([values[0], *values], [0.0, *ys], where="post", color=style["color"], ls=style["ls"], lw=1.6,
                label=f"{label} (n={len(values)})")
        ax.plot(values, ys, ls="none", marker=style["marker"], ms=3.5, color=style["color"])
        return len(values)
    xs, ys = kaplan_meier_cdf(valid, cell.censoring)
    right = cell.censoring == RIGHT
    ax.step(xs, ys, where="post", color=style["color"], ls=style["ls"], lw=1.6,
            label=f"{label} (n={cell.n}, {cell.censored} timed out)")
    done = [v for v, c, _ in valid if c]
    ax.plot(done, [_at(xs, ys, v) for v in done], ls="none", marker=style["marker"], ms=3.5, color=style["color"])
    limits = [v for v, c, _ in valid if not c]
    # where the estimate ends short of the distribution: above the last completed GET (a delay) or
    # below the first (a throughput) lies the share that timed out
    end = ys[-1] if right else ys[0]
    if (right and end < 1.0) or (not right and end > 0.0):
        bound = min(limits) if right else max(limits)
        text = (f"stops at {end:.2f}: {cell.censored}/{cell.n} timed out (> {bound:g})" if right else
                f"starts at {end:.2f}: {cell.censored}/{cell.n} timed out (< {bound:g})")
        ax.annotate(text, (xs[-1] if right else xs[0], end), xytext=(-4 if right else 4, -10 if right else 6),
                    textcoords="offset points", ha="right" if right else "left", fontsize=7, color=style["color"])
    return cell.n


def kaplan_meier_cdf(valid: list[tuple[float, bool, object]], censoring: str) -> tuple[list[float], list[float]]:
    """The Kaplan–Meier estimate of P(X <= x) as step points (lifelines), from the smallest to the
    largest value or limit: right-censored (a delay beyond its timeout) it starts at 0 and may stop
    below 1; left-censored (a throughput below size / timeout) it may start above 0 and ends at 1."""
    from lifelines import KaplanMeierFitter

    times = [v for v, _, _ in valid]
    events = [c for _, c, _ in valid]
    kmf = KaplanMeierFitter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lifelines warns on ties and all-censored samples
        if censoring == RIGHT:
            kmf.fit(times, events)
        else:
            kmf.fit_left_censoring(times, events)
    cdf = kmf.cumulative_density_.iloc[:, 0]
    lo = min(times)
    xs = [float(t) for t in cdf.index if t >= lo]
    ys = [float(cdf[t]) for t in cdf.index if t >= lo]
    if censoring == RIGHT:
        return [lo, *xs], [0.0, *ys]  # from 0 at the smallest value, as the empirical CDF
    return xs, ys


def _at(xs: list[float], ys: list[float], x: float) -> float:
    """The step function's value at x (the last step at or before it)."""
    y = ys[0]
    for xi, yi in zip(xs, ys):
        if xi > x:
            break
        y = yi
    return y


def _timeseries(ax, data: RunData, metric, sel, plot, style, label) -> int:
    samples = [s for s in data.samples(metric, sel, time_column=plot.x) if s.time is not None]
    if not samples:
        return 0
    t0 = min((s.time for s in data.samples(metric, dict(plot.where), time_column=plot.x) if s.time is not None),
             default=0.0)
    samples.sort(key=lambda s: s.time)
    ax.plot([s.time - t0 for s in samples], [s.value for s in samples], color=style["color"], marker=style["marker"],
            ls="none", ms=4, label=label)
    return len(samples)
