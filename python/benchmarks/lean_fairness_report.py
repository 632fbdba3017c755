"""The lean fairness benchmark's summary and plot (bench_lean_fairness.py): each pairing's
shares against its goal band, and the per-second shares of every repetition."""

from __future__ import annotations

import statistics
from pathlib import Path


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def within(values: list[float | None], goal: tuple[float, float]) -> bool:
    return all(v is not None and goal[0] <= v <= goal[1] for v in values)


# The kernel-against-kernel references are checked against the band the lean pairings are
# held to, in parentheses and outside the exit status: the yardstick for those goals.
YARDSTICK_BANDS = {"cubic-cubic": (40.0, 60.0), "kcompound-kcompound": (40.0, 60.0)}


def goal_columns(name: str, goal: tuple[float, float], whole: list, steady: list) -> tuple[str, str]:
    """The goal's band and 'met (whole / steady)' as printed; references without a goal: '-'."""
    band = YARDSTICK_BANDS.get(name)
    if band:
        verdicts = " / ".join("yes" if within(v, band) else "no" for v in (whole, steady))
        return f"({band[0]:.0f}-{band[1]:.0f})", f"({verdicts})"
    if goal == (0.0, 100.0):
        return "-", "-"
    return f"{goal[0]:.0f}-{goal[1]:.0f}", " / ".join("yes" if within(v, goal) else "no" for v in (whole, steady))


def print_summary(results: dict[str, list[dict]], table: dict) -> bool:
    """Both shares per pairing and the goal checked on each: `whole` over the run (the
    receivers' totals), `steady` after the start-up (the client's ss samples). True when a
    goal failed on the whole-run share (the exit status, as before the steady column)."""
    print("share of A in %: whole = over the whole run, steady = after the start-up (--settle-s); "
          "Jain = Jain's index over the steady window")
    print(f"{'pairing':<20} {'whole, each rep':<20} {'mean':>5} {'steady, each rep':<20} {'mean':>5} "
          f"{'Jain, each rep':<18} {'goal':>7}  met (whole / steady)")
    failed = False
    for name, rows in results.items():
        goal = table[name][2]
        whole = [r["share_a_pct"] for r in rows]
        steady = [r["steady_share_a_pct"] for r in rows]
        jain = [r["steady_jain"] for r in rows]
        steady_known = [v for v in steady if v is not None]
        failed |= not within(whole, goal)
        band, met = goal_columns(name, goal, whole, steady)
        print(f"{name:<20} {', '.join(pct(v) for v in whole):<20} {statistics.mean(whole):>5.1f} "
              f"{', '.join(pct(v) for v in steady):<20} {pct(statistics.mean(steady_known) if steady_known else None):>5} "
              f"{', '.join('-' if j is None else f'{j:.3f}' for j in jain):<18} {band:>7}  {met}")
    return failed


def plot_shares(results: dict[str, list[dict]], path: Path, seconds: float) -> None:
    """Per pairing of two flows, A's share per second of every repetition (up to the run's
    end: the interval past it holds one flow's tail), the 50 % line and the start of the
    steady window."""
    results = {name: rows for name, rows in results.items() if len(rows[0]["bytes"]) == 2}
    if not results:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        print(f"share plot: {err}")
        return
    fig, axes = plt.subplots(len(results), 1, figsize=(10, 2.6 * len(results)), squeeze=False, sharex=True)
    for ax, (name, rows) in zip(axes[:, 0], results.items()):
        for rep, row in enumerate(rows):
            points = [p for p in row["per_second"] if p["share_a_pct"] is not None and p["t_s"] <= seconds]
            ax.plot([p["t_s"] for p in points], [p["share_a_pct"] for p in points], lw=1,
                    label=f"rep {rep + 1}: whole {pct(row['share_a_pct'])} %, steady {pct(row['steady_share_a_pct'])} %")
        ax.axhline(50, color="grey", lw=0.6, ls=":")
        ax.axvline(rows[0]["settle_s"], color="grey", lw=0.6, ls="--")
        ax.set_ylim(0, 100)
        ax.set_ylabel("A's share, %")
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("s since the flows started (dashed: the steady window's start)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"share plot: {path}")
