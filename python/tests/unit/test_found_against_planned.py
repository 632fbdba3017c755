"""What `analyze` finds against what the run planned, and every file of a repetition read
defensively (analysis/run_analysis.py, repetition_analysis.py, record_checks.py; stored/run.py
missing, unplanned): a planned repetition without data and one found unplanned are listed, a
record written twice is never two samples, a damaged file leaves out what it holds, named,
and the rest is analysed; `congestlab analyze` then exits 6."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from cli_call import call_cli
from synthetic_run import manifest, sound_run

from congestlab.analysis.run_analysis import analyze_run, problem_counts
from congestlab.rundir.manifest import planned_runs
from congestlab.stats.outcomes import COMPLETE, INVALID
from congestlab.stored import StoredRun


def _analyze(run: Path) -> dict:
    return analyze_run(run, json.loads((run / "manifest.json").read_text()))


def _rep(run: Path, n: int, point: str = "p1") -> Path:
    return run / "points" / point / f"r{n}"


def _cli(*args: str) -> SimpleNamespace:
    code, out, err = call_cli(*args)
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


def test_a_sound_run_finds_what_it_planned(tmp_path):
    run = sound_run(tmp_path, reps=3)
    stored = StoredRun(run)
    assert stored.planned_runs == [("p1", 1), ("p1", 2), ("p1", 3)]
    assert stored.missing() == [] and stored.unplanned() == []
    summary = _analyze(run).summary
    assert summary["repetitions"] == {"planned": 3, "analysed": 3, "missing": [], "unplanned": [], "not_analysed": []}
    assert not any(problem_counts(summary).values())


@pytest.mark.parametrize("damage, why", [
    (lambda run: (_rep(run, 2) / "records.jsonl").write_text(""), "records.jsonl holds no record"),
    (lambda run: (_rep(run, 2) / "rep.json").unlink(), "no rep.json: it did not complete"),
    (lambda run: shutil.rmtree(_rep(run, 2)), "no directory points/p1/r2"),
])
def test_a_planned_repetition_without_data_is_listed(tmp_path, damage, why):
    run = sound_run(tmp_path, reps=3)
    damage(run)
    (absent,) = StoredRun(run).missing()
    assert (absent.point, absent.repetition, absent.why) == ("p1", 2, why)
    result = _analyze(run)
    assert {r["repetition"] for r in result.rows["request"]} == {1, 3}
    assert result.summary["repetitions"]["missing"] == [{"point": "p1", "repetition": 2, "why": why}]
    assert f"p1 #2: {why}: planned, no data" in result.summary["problems"]
    proc = _cli("analyze", str(run))
    assert proc.returncode == 6 and "1 planned repetitions without data" in proc.stderr, proc.stderr
    assert f"p1 #2: {why}" in proc.stdout


def test_a_removed_point_directory_lists_each_of_its_repetitions(tmp_path):
    run = sound_run(tmp_path, reps=2)
    data = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(manifest(2, points=("p1", "p2")) | {"spec": data["spec"]}))
    assert [(a.point, a.repetition) for a in StoredRun(run).missing()] == [("p2", 1), ("p2", 2)]


def test_a_repetition_found_but_not_planned_is_left_out(tmp_path):
    """An extra r9 (a copy of r1) is not a fourth sample: listed, left out."""
    run = sound_run(tmp_path, reps=3)
    shutil.copytree(_rep(run, 1), _rep(run, 9))
    shutil.copytree(_rep(run, 1), _rep(run, 1, "elsewhere"))
    unplanned = StoredRun(run).unplanned()
    assert [(a.point, a.repetition, a.why) for a in unplanned] == [
        ("elsewhere", 1, "not in the manifest's points"), ("p1", 9, "not planned")]
    result = _analyze(run)
    assert {r["repetition"] for r in result.rows["request"]} == {1, 2, 3}
    assert len(result.summary["repetitions"]["unplanned"]) == 2
    proc = _cli("analyze", str(run))
    assert proc.returncode == 6 and "2 unplanned repetitions" in proc.stderr and "p1 #9: not planned" in proc.stdout


def test_a_record_written_twice_is_one_sample_named(tmp_path):
    """The issue's case: a duplicated GET record gave 127 request rows from 126 GETs, 0 problems."""
    run = sound_run(tmp_path, reps=2)
    records = _rep(run, 1) / "records.jsonl"
    lines = records.read_text().splitlines()
    records.write_text("\n".join([*lines, lines[0]]) + "\n")
    result = _analyze(run)
    assert len(result.rows["request"]) == 4
    assert sum(r["outcome"] == COMPLETE for r in result.rows["request"]) == 4
    (problem,) = result.summary["input_problems"]
    assert "points/p1/r1/records.jsonl: lines 1, 3 hold the same record (get_raw workload=get request=0 " \
           "family=v4): counted once" == problem
    # the same key, another value: which one is right is not known, so neither is measured
    changed = json.loads(lines[0])
    changed["row"]["time_total_s"] += 0.001
    records.write_text("\n".join([*lines, json.dumps(changed)]) + "\n")
    rows = _analyze(run).rows["request"]
    bad = [r for r in rows if r["outcome"] == INVALID]
    assert len(rows) == 4 and len(bad) == 1 and "lines 1, 3 record one GET" in bad[0]["error"]


@pytest.mark.parametrize("file, content, said", [
    ("rep.json", "{garbage", "points/p1/r2/rep.json: unreadable"),
    ("rep.json", json.dumps({"servers": {"www": 3}}), "points/p1/r2/rep.json: damaged: servers.www"),
    ("rep.json", json.dumps({"capture_epoch_s": [2, 1]}), "capture_epoch_s: not a [start, end] span"),
    ("records.jsonl", '{"kind": "get_raw", "row": {"workload": 3}}\n', "points/p1/r2/records.jsonl:1: workload"),
    ("records.jsonl", b"\xff\xfe", "points/p1/r2/records.jsonl: unreadable"),
])
def test_a_damaged_file_leaves_its_repetition_out_named(tmp_path, file, content, said):
    run = sound_run(tmp_path, reps=3)
    path = _rep(run, 2) / file
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    result = _analyze(run)
    assert {r["repetition"] for r in result.rows["request"]} == {1, 3}
    (left_out,) = result.summary["repetitions"]["not_analysed"]
    assert left_out["repetition"] == 2 and said in left_out["why"], left_out
    proc = _cli("analyze", str(run))
    assert proc.returncode == 6 and "1 repetitions not analysed" in proc.stderr and "Traceback" not in proc.stderr


def test_a_missing_capture_makes_its_gets_invalid(tmp_path):
    run = sound_run(tmp_path, reps=2)
    (_rep(run, 2) / "pcap" / "www.pcap").unlink()
    rows = _analyze(run).rows["request"]
    assert [r["outcome"] for r in rows if r["repetition"] == 2] == [INVALID, INVALID]
    assert all(r["error"].startswith("points/p1/r2/pcap/www.pcap: missing (the repetition recorded this capture") for r in rows if r["repetition"] == 2)


def test_a_damaged_probe_file_costs_its_series_named(tmp_path):
    run = sound_run(tmp_path, reps=2)
    probes = _rep(run, 1) / "probes"
    probes.mkdir()
    (probes / "clock.jsonl").write_text('{"start": 1}\n')
    result = _analyze(run)
    assert result.summary["request_outcomes"]["complete"] == 4
    (problem,) = result.summary["input_problems"]
    assert problem.startswith("probe series:") and "probes/clock.jsonl" in problem, problem
    assert _cli("analyze", str(run)).returncode == 6


def test_planned_under_until_decisive_is_what_its_looks_asked_for():
    m = {"run_order": [{"point": p, "repetition": r} for r in range(1, 6) for p in ("a", "b")],
         "sequential": {"points": ["a", "b"], "first_look": 2, "looks": [
             {"round": 2, "next_points": ["a", "b"]}, {"round": 3, "next_points": ["b"]}, {"round": 4, "next_points": []}]}}
    assert planned_runs(m) == [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3), ("b", 4)]
    assert planned_runs({k: v for k, v in m.items() if k != "sequential"}) == [
        (p, r) for r in range(1, 6) for p in ("a", "b")]
    assert planned_runs({"points": [{"id": "a", "repetitions": 2}]}) == [("a", 1), ("a", 2)]
