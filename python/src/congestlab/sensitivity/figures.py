"""The sensitivity report's two plots: distance per configuration and the verdict matrix
(colours as report/figures.py: Okabe-Ito, the verdicts as in the report's style.css)."""

from __future__ import annotations

from pathlib import Path

from congestlab.report.claims import DESCRIPTIVE, FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURED
from congestlab.report.figures import PALETTE, SVG_METADATA, plt
from congestlab.sensitivity.distance import WITHIN_25_PCT

VERDICT_COLOURS = {HOLDS: "#009E73", FAILS: "#D55E00", INCONCLUSIVE: "#E69F00", DESCRIPTIVE: "#4a6fa5",
                   NOT_MEASURED: "#bbbbbb"}


def _save(fig, plots_dir: Path, name: str, title: str) -> dict:
    plots_dir.mkdir(parents=True, exist_ok=True)
    png, svg = plots_dir / f"{name}.png", plots_dir / f"{name}.svg"
    fig.savefig(png, dpi=120, bbox_inches="tight")
    fig.savefig(svg, bbox_inches="tight", metadata=SVG_METADATA)
    plt.close(fig)
    return {"title": title, "png": png, "svg": svg}


def distance_plot(rows: list[dict], plots_dir: Path) -> dict | None:
    """Median |ln(ours/published)| per configuration (bar), the worst cell (marker), and the
    ln(1.25) mark; configurations nearest first, as the report's table."""
    measured = [r for r in rows if r.get("median_value") is not None]
    if not measured:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 0.35 * len(measured) + 1.4))
    ys = list(range(len(measured)))[::-1]
    medians = [r["median_value"] for r in measured]
    worst = [float(r["worst"].split()[0]) for r in measured]
    ax.barh(ys, medians, color=PALETTE[0], label="median over the published cells")
    ax.plot(worst, ys, "D", color=PALETTE[3], label="worst cell")
    ax.axvline(WITHIN_25_PCT, color="black", linestyle="--", linewidth=1, label="ln 1.25 (within 25 %)")
    ax.set_yticks(ys, [r["id"] + (f"  [{r['marks']}]" if r["marks"] else "") for r in measured], fontsize=7)
    ax.set_xlabel("|ln(ours / published)|")
    ax.legend(loc="lower right", fontsize=7)
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, plots_dir, "distance", "Distance to the published numbers per configuration")


def verdict_plot(matrix: list[dict], config_ids: list[str], plots_dir: Path) -> dict | None:
    """One square per claim x configuration, coloured by its verdict."""
    if not matrix or not config_ids:
        return None
    fig, ax = plt.subplots(figsize=(1.2 + 0.45 * len(config_ids), 0.4 * len(matrix) + 2.4))
    for i, line in enumerate(matrix):
        for j, v in enumerate(line["verdicts"]):
            ax.add_patch(plt.Rectangle((j, len(matrix) - 1 - i), 0.95, 0.95,
                                       color=VERDICT_COLOURS.get(v["verdict"], "#bbbbbb")))
    ax.set_xlim(0, len(config_ids))
    ax.set_ylim(0, len(matrix))
    ax.set_xticks([j + 0.475 for j in range(len(config_ids))], config_ids, rotation=90, fontsize=6)
    ax.set_yticks([len(matrix) - 1 - i + 0.475 for i in range(len(matrix))],
                  [f"claim {m['claim']['id']}" for m in matrix], fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in VERDICT_COLOURS.values()]
    ax.legend(handles, list(VERDICT_COLOURS), loc="upper center", bbox_to_anchor=(0.5, -0.02 - 0.5 / len(matrix)),
              ncol=4, fontsize=7, frameon=False)
    ax.set_frame_on(False)
    ax.tick_params(length=0)
    return _save(fig, plots_dir, "verdicts", "The claims' verdicts per configuration")
