"""The drift check: the reference unit of each experiment (its first declared point's unit)
runs in the first block and again in the last (the mirrored order of `passes = 2`,
spec/sweep.py planned_runs). Its GET delays from the two ends are compared per point and family with
the stats engine (the censored log-normal model, stats/median_ratio.py; a timed-out GET is
censored at its timeout); a Holm-adjusted two-sided p below ALPHA flags the run: the machine
changed between its start and its end, so every comparison across time in it deserves doubt.
A reference cell that cannot be compared is listed with the reason (`skipped`): one pass, a
single round, a second pass that did not run, too few GETs at an end."""

from __future__ import annotations

import math

from congestlab.fidelity import Check
from congestlab.stats.median_ratio import compare
from congestlab.stats.rules import holm
from congestlab.stats.outcomes import COMPLETE, INVALID, TIMED_OUT
from congestlab.stats.samples import Cell

ALPHA = 0.01
METRIC = "delay_ms"


def drift_checks(manifest: dict, request_rows: list[dict]) -> tuple[list[Check], list[dict]]:
    """(checks, one summary entry per compared point and family)."""
    order = manifest.get("run_order") or []
    if not order or not request_rows:
        return [], []
    references: dict[str, int] = {}  # experiment -> its reference unit (the first to run)
    experiment_of = {p["id"]: p["experiment"] for p in manifest["points"]}
    for run in order:
        references.setdefault(experiment_of.get(run["point"], ""), run["unit"])
    units = {(run["point"], run["repetition"]): (run["unit"], run["block"]) for run in order}
    ends: dict[tuple[str, str], dict[int, list[dict]]] = {}
    for row in request_rows:
        unit, block = units.get((row["point_id"], row["repetition"]), (None, None))
        if unit is None or references.get(row["experiment"]) != unit:
            continue
        ends.setdefault((row["point_id"], row["family"]), {}).setdefault(block, []).append(row)
    planned_blocks: dict[int, set[int]] = {}
    for run in order:
        planned_blocks.setdefault(run["unit"], set()).add(run["block"])
    entries, skipped = [], []
    for (point_id, family), by_block in sorted(ends.items()):
        if set(by_block) != {1, 2}:
            experiment = experiment_of.get(point_id, "")
            reason = _one_block_reason(manifest, experiment, planned_blocks.get(references.get(experiment), set()))
            skipped.append({"point": point_id, "family": family, "metric": METRIC, "skipped": reason})
            continue
        first, last = _cell(by_block[1]), _cell(by_block[2])
        if first.n < 2 or last.n < 2:
            skipped.append({"point": point_id, "family": family, "metric": METRIC, "n": [first.n, last.n],
                            "skipped": f"too few GETs at the ends ({first.n} and {last.n}; 2 each needed)"})
            continue
        effect = compare(last, first, blocked=False)
        p = min(1.0, 2 * min(effect.p_above(0.0), effect.p_below(0.0)))
        entries.append({"point": point_id, "family": family, "metric": METRIC, "n": [first.n, last.n],
                        "change_pct": None if math.isnan(effect.estimate) else round(effect.percent, 1),
                        "p": p})
    for entry, adjusted in zip(entries, holm([e["p"] for e in entries])):
        entry["p_holm"] = adjusted
        entry["drifted"] = adjusted < ALPHA
    checks = [Check(f"drift_{e['point']}_{e['family']}", not e["drifted"], e["p_holm"],
                    f"start and end of the run alike (Holm-adjusted p >= {ALPHA:g})",
                    f"{e['point']} {e['family']}: {METRIC} changed {e['change_pct']} % from the first block to "
                    f"the last (p = {e['p_holm']:.3g})" if e["drifted"] else "")
              for e in entries]
    return checks, entries + skipped


def _one_block_reason(manifest: dict, experiment: str, planned: set[int]) -> str:
    """Why the reference unit has GETs from one block only."""
    if manifest.get("order") == "sequential":
        return "order = sequential: the reference unit ran once, so the run's start and end were not compared"
    if (manifest.get("run_passes") or {}).get(experiment) == 1:
        return ("one pass (passes = 1): the reference unit ran once, so the run's start and end were not "
                "compared")
    if planned == {1}:
        return "the reference unit has a single round: nothing at the run's end to compare it with"
    return "the reference unit's second pass did not run (e.g. --until-decisive stopped it early)"


def drift_summary(entries: list[dict]) -> str:
    """One line for the report: what the drift check compared, or why it could not."""
    compared = [e for e in entries if "skipped" not in e]
    skipped = [e for e in entries if "skipped" in e]
    parts = []
    if compared:
        drifted = sum(e["drifted"] for e in compared)
        parts.append(f"{len(compared)} reference cells compared start vs end (Holm, alpha {ALPHA:g}): "
                     + (f"{drifted} drifted" if drifted else "none drifted"))
    if skipped:
        reasons = sorted({e["skipped"] for e in skipped})
        parts.append(f"{len(skipped)} not compared: {'; '.join(reasons)}")
    return "; ".join(parts)


def _cell(rows: list[dict]) -> Cell:
    values, outcomes, limits = [], [], []
    for row in rows:
        outcome = row.get("outcome")
        if outcome == COMPLETE and not _positive(row.get(METRIC)):
            outcome = INVALID
        values.append(float(row[METRIC]) if outcome == COMPLETE else math.nan)
        outcomes.append(outcome if outcome in (COMPLETE, TIMED_OUT) else INVALID)
        timeout_s = row.get("timeout_s")
        limits.append(float(timeout_s) * 1e3 if _positive(timeout_s) else math.nan)
    outcomes = [o if o != TIMED_OUT or math.isfinite(lim) else INVALID for o, lim in zip(outcomes, limits)]
    return Cell.of(values, outcomes, limits=limits)


def _positive(value) -> bool:
    try:
        return math.isfinite(float(value)) and float(value) > 0
    except (TypeError, ValueError):
        return False
