"""Per-run summaries of checks recorded per repetition (congestlab/fidelity.py): one
probe_clock_drift row per run, in µs like its limit, one probe_complete, one probe_stopped
and one get_previous_closed row, with each repetition's row kept in the manifest's
fidelity.per_repetition; a failure in any repetition fails the summary."""

from __future__ import annotations

import json

from congestlab import fidelity
from congestlab.rundir.upgrade import fidelity_view
from congestlab.runner.captures import probe_checks
from report_fixtures import RunBuilder


def _probe(drift_ns: int, lost: int = 0, truncated: int = 0) -> dict:
    return {"probes": {"stopped": True, "lost": lost, "truncated": truncated, "drift_ns": drift_ns,
                       "drift_ok": abs(drift_ns) <= 1_000_000}}


def _run_checks(drifts_ns: list[int], dropped: dict[int, tuple[int, int]] | None = None) -> list[fidelity.Check]:
    """The checks a run gathers: every repetition's, named as the runner names them;
    dropped: {repetition: (lost, truncated)} of the sampler."""
    checks = [fidelity.Check("measured_requests", True, 4, "4")]
    for rep, drift in enumerate(drifts_ns, start=1):
        checks += [fidelity.Check(f"{c.name}@main.level-C1B#{rep}", c.ok, c.value, c.expected, c.message)
                   for c in probe_checks(_probe(drift, *(dropped or {}).get(rep, (0, 0))))]
    return checks


PREVIOUS_CLOSED = "every GET starts after the previous one's connection closed (waits at most 10 s)"


def _previous_closed(waits_ms: list[float], late: dict[int, int] | None = None) -> list[fidelity.Check]:
    """get_previous_closed per repetition as workloads/get.py records it (late: {repetition:
    GETs of 2 started before the previous connection closed}), named as the runner names them."""
    late = late or {}
    return [fidelity.Check(f"get_previous_closed@main.level-C1B#{rep}", not late.get(rep), wait, PREVIOUS_CLOSED,
                           f"{late[rep]} of 2 GETs started before the previous connection closed"
                           if late.get(rep) else "")
            for rep, wait in enumerate(waits_ms, start=1)]


def test_a_repetitions_drift_is_in_microseconds_like_its_limit():
    drift = next(c for c in probe_checks(_probe(2_500)) if c.name == "probe_clock_drift")
    assert drift.ok and drift.value == 2.5 and drift.expected == "|drift| <= 1000 µs"


def test_one_clock_drift_row_per_run_with_worst_median_and_count():
    section = fidelity.manifest_section(_run_checks([1_000, -3_000, 2_000, 500]))
    names = [c["name"] for c in section["checks"]]
    assert names.count("probe_clock_drift") == 1 and not any(n.startswith("probe_clock_drift@") for n in names)
    assert names == ["measured_requests", "probe_complete", "probe_clock_drift"]
    (row,) = [c for c in section["checks"] if c["name"] == "probe_clock_drift"]
    assert row["ok"] is True and row["value"] == 3.0
    assert row["expected"] == "|drift| <= 1000 µs in each repetition"
    assert row["message"] == "worst 3.000 µs, median 1.500 µs over 4 repetitions; none beyond the limit"
    assert section["warnings"] == []
    # every repetition's value stays in the manifest
    kept = {c["name"]: c["value"] for c in section["per_repetition"] if c["name"].startswith("probe_clock_drift@")}
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


def test_one_probe_complete_row_per_run_and_a_drop_anywhere_fails_it():
    section = fidelity.manifest_section(_run_checks([1, 2, 3, 4]))
    (row,) = [c for c in section["checks"] if c["name"] == "probe_complete"]
    assert row == {"name": "probe_complete", "ok": True, "value": "lost 0, over the cap 0",
                   "expected": "0 and 0 in each repetition", "message": "no rows dropped in 4 repetitions"}
    assert sum(c["name"].startswith("probe_complete@") for c in section["per_repetition"]) == 4

    section = fidelity.manifest_section(_run_checks([1, 2, 3, 4, 5], dropped={2: (3, 0), 4: (0, 40), 5: (1, 1)}))
    (row,) = [c for c in section["checks"] if c["name"] == "probe_complete"]
    assert row["ok"] is False and row["value"] == "lost 0, over the cap 40"
    assert row["message"].startswith("3 of 5 repetitions failed (main.level-C1B#2, main.level-C1B#4, "
                                     "main.level-C1B#5); worst main.level-C1B#4 (lost 0, over the cap 40): "
                                     "the sampler dropped rows")
    assert section["warnings"] == [row["message"]]


def test_one_previous_closed_row_per_run_with_the_longest_wait():
    section = fidelity.manifest_section(_run_checks([1]) + _previous_closed([8.5, 11.4, 0.0]))
    (row,) = [c for c in section["checks"] if c["name"].startswith("get_previous_closed")]
    assert row == {"name": "get_previous_closed", "ok": True, "value": 11.4,
                   "expected": PREVIOUS_CLOSED + " in each repetition",
                   "message": "longest wait 11.4 ms over 3 repetitions; every GET started after the previous "
                              "connection closed"}
    assert [c["value"] for c in section["per_repetition"] if c["name"].startswith("get_previous_closed@")] \
        == [8.5, 11.4, 0.0]


def test_a_get_started_early_in_one_repetition_fails_the_previous_closed_row():
    section = fidelity.manifest_section(_previous_closed([3.0, 10_004.2, 12.0, 10_001.0], late={2: 1, 4: 2}))
    (row,) = section["checks"]
    assert row["ok"] is False and row["value"] == 10_004.2
    assert row["message"] == ("longest wait 10004.2 ms over 4 repetitions; 2 of 4 repetitions failed "
                              "(main.level-C1B#2, main.level-C1B#4); worst main.level-C1B#2 (waited 10004.2 ms): "
                              "1 of 2 GETs started before the previous connection closed")
    assert section["warnings"] == [row["message"]]
    # the worst failed repetition, not the longest wait of all, is the one named
    section = fidelity.manifest_section(_previous_closed([20_000.0, 10_001.0], late={2: 1}))
    assert "1 of 2 repetitions failed (main.level-C1B#2); worst main.level-C1B#2 (waited 10001 ms)" \
        in section["checks"][0]["message"]


def test_a_run_stored_before_the_folding_reports_one_failed_row_and_one_warning(tmp_path):
    rows = _previous_closed([3.0, 10_004.2, 12.0], late={2: 1})
    stored = {"checks": fidelity.checks_to_json(rows),
              "warnings": ["udp: background achieved 8.87 of 10.00 Mbit/s", rows[1].message]}
    shown = fidelity_view(stored)  # rundir/upgrade.py; its own cases: test_upgrade.py
    assert shown == fidelity_view(fidelity.manifest_section(rows) | {"warnings": shown["warnings"]})

    builder = RunBuilder("s", ["level"], {})
    builder.fidelity = stored
    from congestlab.report import build_report

    report = build_report(builder.write(tmp_path / "run"))
    md = report.markdown_path.read_text()
    assert md.count("get_previous_closed") == 1 and "| get_previous_closed | **NO** | 10004.2 |" in md
    assert report.warnings == shown["warnings"]
    # the stored manifest is left as it was
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["fidelity"] == stored


def test_samplers_that_did_not_stop_are_one_failed_row_naming_them():
    unstopped = {"probes": {"stopped": False}}
    checks = _run_checks([1, 2]) + [fidelity.Check(f"{c.name}@main.level-C1B#{rep}", c.ok, c.value, c.expected,
                                                   c.message)
                                    for rep in (3, 4, 5, 6) for c in probe_checks(unstopped)]
    section = fidelity.manifest_section(checks)
    (row,) = [c for c in section["checks"] if c["name"].startswith("probe_stopped")]
    assert row["ok"] is False and row["value"] == "4 without"
    assert row["message"] == ("4 repetitions without it (main.level-C1B#3, main.level-C1B#4, main.level-C1B#5 and "
                              "1 more): the BPF sampler did not stop cleanly: its series may be cut")
    assert section["warnings"] == [row["message"]]
    assert sum(c["name"].startswith("probe_stopped@") for c in section["per_repetition"]) == 4
