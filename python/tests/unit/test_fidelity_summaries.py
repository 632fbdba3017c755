"""Per-run summaries of checks recorded per repetition (congestlab/fidelity.py): one
probe_clock_drift row per run, in µs like its limit, with each repetition's row kept in the
manifest's fidelity.per_repetition."""

from __future__ import annotations

import json

from congestlab import fidelity
from congestlab.runner.captures import probe_checks
from report_fixtures import RunBuilder


def _probe(drift_ns: int) -> dict:
    return {"probes": {"stopped": True, "lost": 0, "truncated": 0, "drift_ns": drift_ns,
                       "drift_ok": abs(drift_ns) <= 1_000_000}}


def _run_checks(drifts_ns: list[int]) -> list[fidelity.Check]:
    """The checks a run gathers: every repetition's, named as the runner names them."""
    checks = [fidelity.Check("measured_requests", True, 4, "4")]
    for rep, drift in enumerate(drifts_ns, start=1):
        checks += [fidelity.Check(f"{c.name}@main.level-C1B#{rep}", c.ok, c.value, c.expected, c.message)
                   for c in probe_checks(_probe(drift))]
    return checks


def test_a_repetitions_drift_is_in_microseconds_like_its_limit():
    drift = next(c for c in probe_checks(_probe(2_500)) if c.name == "probe_clock_drift")
    assert drift.ok and drift.value == 2.5 and drift.expected == "|drift| <= 1000 µs"


def test_one_clock_drift_row_per_run_with_worst_median_and_count():
    section = fidelity.manifest_section(_run_checks([1_000, -3_000, 2_000, 500]))
    names = [c["name"] for c in section["checks"]]
    assert names.count("probe_clock_drift") == 1 and not any(n.startswith("probe_clock_drift@") for n in names)
    assert sum(n.startswith("probe_complete@") for n in names) == 4  # only the drift is summarised
    (row,) = [c for c in section["checks"] if c["name"] == "probe_clock_drift"]
    assert row["ok"] is True and row["value"] == 3.0
    assert row["expected"] == "|drift| <= 1000 µs in each repetition"
    assert row["message"] == "worst 3.000 µs, median 1.500 µs over 4 repetitions; none beyond the limit"
    assert section["warnings"] == []
    # every repetition's value stays in the manifest
    kept = {c["name"]: c["value"] for c in section["per_repetition"]}
    assert kept == {f"probe_clock_drift@main.level-C1B#{r}": v for r, v in enumerate([1.0, -3.0, 2.0, 0.5], 1)}


def test_a_drift_beyond_the_limit_fails_the_summary_and_names_the_first_repetitions():
    drifts = [10, 1_500_000, 20, -2_000_000, 3_000_000, 1_200_000, 30]
    section = fidelity.manifest_section(_run_checks(drifts))
    (row,) = [c for c in section["checks"] if c["name"] == "probe_clock_drift"]
    assert row["ok"] is False and row["value"] == 3000.0
    assert "4 beyond the limit (main.level-C1B#2, main.level-C1B#4, main.level-C1B#5 and 1 more)" in row["message"]
    assert section["warnings"] == [row["message"]]


def test_folding_is_idempotent_and_a_stored_run_reports_one_row(tmp_path):
    section = fidelity.manifest_section(_run_checks([1, 2, 3]))
    again, replaced = fidelity.fold_per_run(fidelity.checks_from_json(section["checks"]))
    assert fidelity.checks_to_json(again) == section["checks"] and replaced == []
    # a run stored before the summaries: 3 rows of ns beside "<= 1 ms", folded by the report
    builder = RunBuilder("s", ["level"], {})
    builder.fidelity = {"checks": [{"name": f"probe_clock_drift@main.level-C1B#{r}", "ok": True, "value": v,
                                    "expected": "|drift| <= 1 ms", "message": ""}
                                   for r, v in enumerate([1000, 3000, 2000], 1)], "warnings": []}
    from congestlab.report import build_report

    md = build_report(builder.write(tmp_path / "run")).markdown_path.read_text()
    assert md.count("probe_clock_drift") == 1
    assert "| probe_clock_drift | yes | 3.0 | \\|drift\\| <= 1000 µs in each repetition | worst 3.000 µs, " \
           "median 2.000 µs over 3 repetitions" in md
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["fidelity"]["checks"][0]["value"] == 1000
