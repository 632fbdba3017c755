"""Bar plots like Figs. 30-33: one bar per family per level, the study's values as markers."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from congestlab.report.tables import METRICS  # noqa: E402

COLORS = {"v4": "#3b6ea8", "v6": "#e08a2c"}


def bar_plot(server: str, kind: str, levels: list[str], summary: dict, published: dict, out: Path) -> Path:
    metric, title, pub_key = METRICS[kind]
    fig, ax = plt.subplots(figsize=(7.5, 4.0), dpi=110)
    width = 0.38
    for k, fam in enumerate(("v4", "v6")):
        xs, means, sds, pub_x, pub_y = [], [], [], [], []
        for i, level in enumerate(levels):
            row = summary.get((server, level, fam))
            x = i + (k - 0.5) * width
            if row:
                xs.append(x)
                means.append(float(row[f"{metric}_mean"]))
                sds.append(float(row[f"{metric}_sd"]))
            value = published.get((server, level, fam), {}).get(pub_key)
            if value is not None:
                pub_x.append(x)
                pub_y.append(value)
        ax.bar(xs, means, width, yerr=sds, capsize=3, color=COLORS[fam], label=f"IPv{fam[1]} (ours)")
        if pub_x:
            ax.scatter(pub_x, pub_y, marker="D", s=28, color="black", zorder=3,
                       label="study" if fam == "v4" else None)
    ax.set_xticks(range(len(levels)), levels)
    ax.set_xlabel("Congestion level")
    ax.set_ylabel(title)
    ax.set_title(f"{server}: {title.split(' in ')[0].lower()} under congestion")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out
