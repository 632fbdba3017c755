"""The drift check (analysis/drift.py): the reference unit's GETs of the run's first block
against its last, flagged at alpha = 0.01 (Holm over its points and families)."""

from __future__ import annotations

import random

from congestlab.analysis.drift import ALPHA, drift_checks, drift_summary
from congestlab.spec import load_preset
from congestlab.spec.sweep import expand, planned_runs


def _run(shift: float, seed: int, timed_out_last: int = 0):
    study = load_preset("ipv6")
    runs = planned_runs(expand(study), study.order, study.seed)
    manifest = {"points": [{"id": p.id, "experiment": p.experiment} for p in expand(study)],
                "run_order": [r.describe() for r in runs]}
    rng = random.Random(seed)
    rows = []
    for r in runs:
        for family in ("v4", "v6"):
            late = r.block == 2 and r.point.unit == runs[0].point.unit
            row = {"point_id": r.point.id, "experiment": r.point.experiment, "repetition": r.repetition,
                   "family": family, "timeout_s": 30, "outcome": "complete",
                   "delay_ms": 100 * rng.lognormvariate(0, 0.05) * (1 + shift if late else 1)}
            if late and r.repetition > 10 - timed_out_last:
                row |= {"outcome": "timed_out", "delay_ms": ""}
            rows.append(row)
    return manifest, rows


def test_a_run_without_drift_passes_and_one_with_drift_is_flagged():
    checks, entries = drift_checks(*_run(0.0, 1))
    assert len(entries) == 6 and all(c.ok for c in checks)  # 3 servers x 2 families at C0
    assert {e["point"].split(".")[-1] for e in entries} == {"level-C0"}
    checks, entries = drift_checks(*_run(0.5, 1))
    assert checks and not any(c.ok for c in checks)
    assert all(e["p_holm"] < ALPHA and e["change_pct"] > 30 for e in entries)
    # timed-out GETs at the end count (censored at their timeout, not left out)
    checks, entries = drift_checks(*_run(0.5, 2, timed_out_last=2))
    assert all(e["n"] == [5, 5] and e["change_pct"] > 30 for e in entries)


def test_false_flags_are_rare_without_drift():
    flagged = sum(any(not c.ok for c in drift_checks(*_run(0.0, seed))[0]) for seed in range(40))
    print(f"drift check: {flagged} of 40 runs without drift flagged")
    assert flagged <= 2  # Holm keeps the run-wise rate at about alpha (0.4 expected)


def test_old_run_directories_without_a_recorded_order_get_no_check():
    manifest, rows = _run(0.5, 1)
    manifest.pop("run_order")
    assert drift_checks(manifest, rows) == ([], [])


def test_a_reference_cell_that_cannot_be_compared_says_why():
    manifest, rows = _run(0.0, 3)
    # the reference unit's last block lost all but one GET per cell (e.g. stopped early)
    late = [r for r in rows if r["point_id"].endswith("level-C0")]
    keep_late = {(r["point_id"], r["family"]) for r in late}
    units = {(o["point"], o["repetition"]): o["block"] for o in manifest["run_order"]}
    seen: set = set()
    trimmed = []
    for r in rows:
        key = (r["point_id"], r["family"])
        if key in keep_late and units[(r["point_id"], r["repetition"])] == 2:
            if key in seen:
                continue
            seen.add(key)
        trimmed.append(r)
    checks, entries = drift_checks(manifest, trimmed)
    assert checks == [] and len(entries) == 6
    assert all("too few GETs at the ends" in e["skipped"] for e in entries)
    assert drift_summary(entries) == "6 not compared: too few GETs at the ends (5 and 1; 2 each needed)"
    _, compared = drift_checks(*_run(0.0, 1))
    assert drift_summary(compared).startswith("6 reference cells compared start vs end") and "none drifted" in \
        drift_summary(compared)


def _one_pass_run(passes: int, repetitions: int, recorded_passes: bool = True):
    study = load_preset("ipv6").model_copy(update={"passes": passes, "repetitions": repetitions})
    points = expand(study)
    runs = planned_runs(points, study.order, study.seed)
    manifest = {"points": [{"id": p.id, "experiment": p.experiment} for p in points], "order": study.order,
                "run_order": [r.describe() for r in runs]}
    if recorded_passes:
        manifest["run_passes"] = {"main": passes}
    rows = [{"point_id": r.point.id, "experiment": r.point.experiment, "repetition": r.repetition, "family": f,
             "timeout_s": 30, "outcome": "complete", "delay_ms": 100.0 + r.repetition} for r in runs for f in ("v4", "v6")]
    return manifest, rows


def test_one_pass_says_the_drift_check_was_skipped_and_why():
    checks, entries = drift_checks(*_one_pass_run(1, 4))
    assert checks == [] and len(entries) == 6  # the reference unit's 3 servers x 2 families, none compared
    assert drift_summary(entries) == ("6 not compared: one pass (passes = 1): the reference unit ran once, so the "
                                      "run's start and end were not compared")
    # a single round in two passes, and a second pass that did not run (--until-decisive), say so
    _, single = drift_checks(*_one_pass_run(2, 1))
    assert {e["skipped"] for e in single} == {"the reference unit has a single round: nothing at the run's end "
                                              "to compare it with"}
    manifest, rows = _one_pass_run(2, 6)
    blocks = {(o["point"], o["repetition"]): o["block"] for o in manifest["run_order"]}
    stopped = [r for r in rows if blocks[(r["point_id"], r["repetition"])] == 1]
    _, entries = drift_checks(manifest, stopped)
    assert {e["skipped"] for e in entries} == {"the reference unit's second pass did not run (e.g. "
                                               "--until-decisive stopped it early)"}
    # sequential: its own reason
    manifest, rows = _one_pass_run(1, 4)
    manifest["order"] = "sequential"
    assert "order = sequential" in drift_summary(drift_checks(manifest, rows)[1])
