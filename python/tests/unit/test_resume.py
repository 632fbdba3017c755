"""--resume without a testbed: which repetitions a resumed StudyRun runs, what it keeps."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "netns"))
from spine_helpers import write_mini_spec

from congestlab.runner import StudyRun
from congestlab.spec import load_spec


def _stored(tmp_path):
    spec = load_spec(write_mini_spec(tmp_path, repetitions=2))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    first = StudyRun(spec, run_dir)
    manifest = json.loads(json.dumps(first.manifest, default=str)) | {"status": "running"}
    return spec, run_dir, first, manifest


def test_resume_runs_only_repetitions_without_rep_json(tmp_path):
    spec, run_dir, first, manifest = _stored(tmp_path)
    all_runs = [(p.id, r) for p, r in first.runs]
    assert len(all_runs) == 8
    done = all_runs[:3]
    for pid, rep in done:
        rep_dir = run_dir / "points" / pid / f"r{rep}"
        rep_dir.mkdir(parents=True)
        (rep_dir / "rep.json").write_text(json.dumps({"checks": [{"name": "c", "ok": False, "value": 1,
                                                                   "expected": "0", "message": "m"}]}))
    partial = run_dir / "points" / all_runs[3][0] / f"r{all_runs[3][1]}"
    (partial / "pcap").mkdir(parents=True)  # started, no rep.json: runs again
    resumed = StudyRun(spec, run_dir, resume=manifest, argv=["congestlab", "run", "--resume"])
    assert [(p.id, r) for p, r in resumed.runs] == all_runs[3:]
    entry = resumed.manifest["resumes"][-1]
    assert entry["kept"] == 3 and entry["ran"] == []  # each repetition as it finishes (next test)
    assert entry["previous_prefix"] == first.prefix and entry["prefix"] == resumed.prefix != first.prefix
    assert resumed.manifest["runs_done"] == 3 and resumed.manifest["runs_total"] == 8
    # the kept repetitions' checks stand as they were recorded
    assert sorted(c.name for c in resumed.checks) == sorted(f"c@{p}#{r}" for p, r in done)


def test_a_killed_attempt_lists_only_the_repetitions_it_ran(tmp_path, monkeypatch):
    """The resume entry on disk after each repetition is what a SIGKILL at the next one leaves."""
    import pytest

    from congestlab.runner import orchestrator

    spec, run_dir, first, manifest = _stored(tmp_path)
    monkeypatch.setattr(orchestrator, "require_root", lambda: None)
    resumed = StudyRun(spec, run_dir, resume=manifest, analyze=False)
    on_disk = []

    def one(tb, point, rep):
        on_disk.append(json.loads((run_dir / "manifest.json").read_text())["resumes"][-1]["ran"])
        if len(on_disk) == 3:
            raise RuntimeError("killed here")
        folder = run_dir / "points" / point.id / f"r{rep}"
        folder.mkdir(parents=True)
        (folder / "rep.json").write_text("{}")

    monkeypatch.setattr(resumed, "_run_one", one)
    monkeypatch.setattr(resumed, "_run_testbed", lambda: resumed._run_all(None))
    with pytest.raises(RuntimeError, match="killed here"):
        resumed.run()
    ran = [f"{p.id}#{r}" for p, r in resumed.runs[:2]]
    assert on_disk == [[], ran[:1], ran]
    stored = json.loads((run_dir / "manifest.json").read_text())
    assert stored["resumes"][-1]["ran"] == ran and stored["status"] == "failed"


def test_subset_of_runs(tmp_path):
    spec, run_dir, first, _ = _stored(tmp_path)
    pid = first.points[1].id
    sub = StudyRun(spec, run_dir, runs=[(pid, 2), (pid, 1)], analyze=False)
    assert [(p.id, r) for p, r in sub.runs] == [(p.id, r) for p, r in first.runs if p.id == pid]
    assert sub.do_analyze is False


def test_sigterm_during_the_analysis_marks_the_run_interrupted_and_keeps_its_budget(tmp_path, monkeypatch):
    import os
    import signal

    import pytest

    from congestlab.errors import Interrupted

    spec, run_dir, first, _ = _stored(tmp_path)
    first.runs = []  # every repetition done: the run goes straight to its analysis

    def slow_analysis():
        os.kill(os.getpid(), signal.SIGTERM)  # e.g. `kill PID` during anma's minutes of analysis

    def outside_the_run(signum, frame):  # where the run does not handle SIGTERM (not the default: it would end pytest)
        raise RuntimeError("SIGTERM not handled by the run")

    monkeypatch.setattr(first, "_analyze", slow_analysis)
    previous = signal.signal(signal.SIGTERM, outside_the_run)
    try:
        with pytest.raises(Interrupted, match="SIGTERM"):
            first.run()
        assert signal.getsignal(signal.SIGTERM) is outside_the_run  # the run's handler is gone again
    finally:
        signal.signal(signal.SIGTERM, previous)
    stored = json.loads((run_dir / "manifest.json").read_text())
    assert stored["status"] == "interrupted" and "SIGTERM" in stored["error"]
    assert stored["time_budget_sessions"] and "analysis" in stored["time_budget"]["categories_s"]


def test_a_running_attempt_keeps_its_budget_after_each_repetition_and_a_killed_ones_is_kept(tmp_path, monkeypatch):
    from congestlab.rundir import write_manifest
    from congestlab.runner.time_budget import IN_PROGRESS

    spec, run_dir, first, manifest = _stored(tmp_path)
    seen = []

    def one_repetition(tb, point, rep):  # what the manifest on disk holds when each repetition starts
        on_disk = json.loads((run_dir / "manifest.json").read_text())
        seen.append(sum(u["runs"] for u in on_disk.get(IN_PROGRESS, {}).get("units", {}).values()))

    monkeypatch.setattr(first, "_run_one", one_repetition)
    first.runs = first.runs[:3]
    write_manifest(run_dir, first.manifest)  # as run() does before the testbed
    first._run_all(tb=None)
    assert seen == [0, 1, 2]  # rewritten after each repetition, before the next one starts
    killed = json.loads((run_dir / "manifest.json").read_text())  # SIGKILLed here: no session recorded
    assert killed[IN_PROGRESS]["wall_s"] > 0 and "time_budget_sessions" not in killed
    earlier = {"wall_s": 10.0, "categories_s": {"measure": 10.0}, "units": {"u0": {"wall_s": 10.0, "runs": 1}}}
    killed |= {"time_budget_sessions": [earlier], "time_budget": earlier}
    resumed = StudyRun(spec, run_dir, resume=killed, argv=["congestlab", "run", "--resume"])
    m = resumed.manifest
    assert IN_PROGRESS not in m and [s.get("killed") for s in m["time_budget_sessions"]] == [None, True]
    assert m["time_budget"]["wall_s"] == round(10.0 + killed[IN_PROGRESS]["wall_s"], 3)
    assert sum(u["runs"] for u in m["time_budget"]["units"].values()) == 1 + 3
    resumed._record_budget(5.0)  # the resumed attempt stops: its own session, no in-progress one left
    assert len(resumed.manifest["time_budget_sessions"]) == 3 and IN_PROGRESS not in resumed.manifest
