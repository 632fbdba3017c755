"""Suites without root: the suite file loader, the parent directory with a sub-run per
study (the runs themselves replaced by hand-made run directories), and the index report."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from congestlab import study
from congestlab.errors import RunDirError, SpecError
from congestlab.report.claims import FAILS, HOLDS
from congestlab.suite import run as suite_run
from congestlab.suite.index import build_index
from congestlab.suite.run import STATE, open_parent, run_suite, study_dir
from congestlab.suite.spec import is_suite, load_suite, members, parse_suite

from report_fixtures import delay_claim_run

# --- the suite file -----------------------------------------------------------------------


def test_dissertation_lists_the_chapters_the_lab_report_and_anma():
    suite, base = load_suite(name="dissertation")
    assert is_suite("dissertation") and not is_suite("ipv6") and base is None
    assert [m.key for m in members(suite, base)] == ["cubic-compound", "rto", "ipv6", "tcp-lab", "anma"]
    with_fit = [m.key for m in members(suite, base, seed_fit=True)]
    assert with_fit == ["cubic-compound", "cubic-compound-seed-fit", "rto", "rto-seed-fit", "ipv6",
                        "ipv6-seed-fit", "tcp-lab", "anma"]  # (tcp-lab and anma have no seed-fit variant)


def test_a_user_suite_of_names_and_a_spec_file(tmp_path):
    spec = tmp_path / "mine.toml"
    spec.write_text('extends = "ipv6"\nname = "ipv6-mine"\n')
    (tmp_path / "s.toml").write_text('[suite]\nname = "two"\nstudies = ["anma", "mine.toml"]\nseed_fit = true\n')
    suite, base = load_suite(path=tmp_path / "s.toml")
    got = members(suite, base)
    assert [m.key for m in got] == ["anma", "ipv6-mine"] and got[1].source == str(spec)
    assert [m.key for m in members(suite, base, seed_fit=False)] == ["anma", "ipv6-mine"]


@pytest.mark.parametrize("text, says", [
    ('[suite]\nname = "x"\nstudies = []\n', "studies"),
    ('[suite]\nname = "x"\nstudies = ["anma"]\ncolour = 1\n', "colour"),
    ('[suite]\nstudies = ["anma"]\n', "name"),
    ('studies = ["anma"]\n', "exactly one [suite] table"),
    ('[suite\n', "not valid TOML"),
])
def test_bad_suite_file_is_one_spec_error(text, says):
    with pytest.raises(SpecError) as err:
        parse_suite(text, "s.toml")
    assert says in str(err.value)


def test_unknown_study_and_duplicates_are_spec_errors():
    with pytest.raises(SpecError, match="unknown preset"):
        members(parse_suite('[suite]\nname = "x"\nstudies = ["nope"]\n', "s"), None)
    with pytest.raises(SpecError, match="listed twice: anma"):
        members(parse_suite('[suite]\nname = "x"\nstudies = ["anma", "anma"]\n', "s"), None)
    with pytest.raises(SpecError, match="unknown suite"):
        load_suite(name="thesis")


def test_cli_bad_suite_file_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "s.toml"
    bad.write_text('[suite]\nname = "x"\nstudies = ["nope"]\n')
    out = subprocess.run([sys.executable, "-m", "congestlab.cli", "suite", str(bad), "--dry-run"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "nope" in out.stderr


def test_until_decisive_on_a_suite_is_refused_in_one_line():
    out = subprocess.run([sys.executable, "-m", "congestlab.cli", "reproduce", "dissertation", "--until-decisive",
                          "--dry-run"], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "one by one" in out.stderr


def test_dry_run_of_the_quick_dissertation_lists_every_study_with_its_passes(capsys):
    out = subprocess.run([sys.executable, "-m", "congestlab.cli", "reproduce", "dissertation", "--dry-run",
                          "--quick"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split()[1] for line in lines if line.startswith("[study]")] == [
        "cubic-compound:", "rto:", "ipv6:", "tcp-lab:", "anma:"]
    # under each study, its passes and rounds per pass as its own --quick --dry-run prints them
    shown = {line.split()[1].rstrip(":"): lines[i + 1] for i, line in enumerate(lines) if line.startswith("[study]")}
    suite, base = load_suite(name="dissertation")
    for member in members(suite, base):
        study.dry_run(member.spec, quick=True)
        own = [line for line in capsys.readouterr().out.splitlines() if line.startswith("# passes")]
        if member.spec.order == "sequential":
            assert own == [] and shown[member.key] == "  # order sequential: no passes"
        else:
            assert shown[member.key] == f"  {own[0]}", member.key
    assert shown["rto"] == "  # passes (rounds per pass): e1 1 (2)"


# --- the parent directory and its sub-runs ---------------------------------------------------

BUDGET = {"wall_s": 50.0, "categories_s": {"setup": 2.0, "warmup": 20.0, "measure": 20.0, "analysis": 5.0, "other": 3.0},
          "units": {"u0": {"warmup": 20.0, "measure": 20.0, "other": 1.0, "wall_s": 41.0, "runs": 6}}}


def _fake_run(run_dir, v4_ms, v6_ms):
    """A complete hand-made sub-run, with a time budget in its manifest."""
    delay_claim_run(v4_ms, v6_ms).write(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["time_budget"] = BUDGET
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


def _two_study_suite(tmp_path):
    (tmp_path / "s.toml").write_text('[suite]\nname = "two"\nstudies = ["ipv6", "anma"]\n')
    suite, base = load_suite(path=tmp_path / "s.toml")
    return suite, members(suite, base)


def test_suite_runs_each_study_into_its_sub_run_and_keeps_complete_ones(tmp_path, monkeypatch):
    suite, studies = _two_study_suite(tmp_path)
    ran = []

    def fake_run_child(spec, run_dir, quick, calibrate, cluster, console, preset=None):
        ran.append((spec.name, run_dir.relative_to(parent_dir), quick, preset))
        if spec.name == "anma" and len(ran) == 2:
            raise RunDirError("the testbed broke")  # the suite records it and goes on
        _fake_run(run_dir, [200, 201, 199], [240, 241, 239])
        return run_dir

    monkeypatch.setattr(study, "run_child", fake_run_child)  # study.run_children runs each
    monkeypatch.setattr(suite_run, "print_report", lambda *a: None)
    parent_dir = tmp_path / "out"
    parent, failed = run_suite(suite, studies, quick=True, out=parent_dir, echo=lambda *_: None)
    assert parent == parent_dir and failed == ["anma"]
    assert [r[1].as_posix() for r in ran] == ["studies/ipv6", "studies/anma"] and all(r[2] for r in ran)
    assert [r[3] for r in ran] == ["ipv6", "anma"]  # each sub-run records its preset (as `reproduce PRESET` does)
    state = json.loads((parent / STATE).read_text())
    assert state["runs"]["ipv6"]["status"] == "complete" and state["runs"]["anma"]["status"] == "failed"
    # the run's time and the report's apart; every attempt's time kept
    assert list(state["runs"]["ipv6"]) == ["status", "load_avg_1m_start", "wall_s", "report_s", "load_avg_1m",
                                           "attempts_wall_s"]
    assert list(state["runs"]["anma"]) == ["status", "load_avg_1m_start", "error", "wall_s", "load_avg_1m",
                                           "attempts_wall_s"]
    assert state["runs"]["anma"]["error"] == "the testbed broke"
    assert (parent / "studies" / "ipv6" / "report.html").exists()  # the sub-run's own report
    # --resume: ipv6 is kept, anma runs again; its earlier attempt's time is kept beside
    ran.clear()
    parent, failed = run_suite(suite, studies, quick=True, resume=parent, echo=lambda *_: None)
    assert failed == [] and [r[0] for r in ran] == ["anma"]
    state = json.loads((parent / STATE).read_text())
    assert len(state["runs"]["anma"]["attempts_wall_s"]) == 2
    assert study_dir(parent, studies[1]) == parent / "studies" / "anma"


def test_only_runs_the_named_studies_now_and_resume_runs_the_rest(tmp_path, monkeypatch):
    suite, studies = _two_study_suite(tmp_path)
    ran = []

    def fake_run_child(spec, run_dir, quick, calibrate, cluster, console, preset=None):
        ran.append(spec.name)
        _fake_run(run_dir, [200, 201, 199], [240, 241, 239])
        return run_dir

    monkeypatch.setattr(study, "run_child", fake_run_child)
    monkeypatch.setattr(suite_run, "print_report", lambda *a: None)
    parent, failed = run_suite(suite, studies, out=tmp_path / "p", only=["anma"], echo=lambda *_: None)
    assert ran == ["anma"] and failed == []
    assert list(json.loads((parent / STATE).read_text())["runs"]) == ["anma"]
    rows = {s["key"]: s for s in build_index(parent).studies}
    assert rows["ipv6"]["status"] == "not run" and rows["anma"]["status"] == "complete"
    ran.clear()
    run_suite(suite, studies, resume=parent, echo=lambda *_: None)  # the rest; anma is kept
    assert ran == ["ipv6"]
    with pytest.raises(SpecError, match="not a study of this suite.*ipv6, anma"):
        run_suite(suite, studies, out=tmp_path / "q", only=["rto"], echo=lambda *_: None)
    with pytest.raises(SpecError, match="named twice"):
        run_suite(suite, studies, out=tmp_path / "q", only=["anma", "anma"], echo=lambda *_: None)
    assert not (tmp_path / "q").exists()  # a refused --only leaves no directory behind


def test_only_in_the_dry_run_and_refused_on_a_study():
    out = subprocess.run([sys.executable, "-m", "congestlab.cli", "reproduce", "dissertation", "--dry-run",
                          "--only", "ipv6", "--only", "anma"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert [line.split()[1] for line in out.stdout.splitlines() if line.startswith("[study]")] == ["ipv6:", "anma:"]
    out = subprocess.run([sys.executable, "-m", "congestlab.cli", "reproduce", "ipv6", "--dry-run", "--only", "x"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "not a suite" in out.stderr


def test_resume_refuses_another_suite_or_quick_and_out_refuses_a_used_directory(tmp_path):
    suite, studies = _two_study_suite(tmp_path)
    parent = open_parent(suite, studies, True, tmp_path / "p", None)
    with pytest.raises(RunDirError, match="same suite"):
        open_parent(suite, studies, False, None, parent)
    with pytest.raises(RunDirError, match="same suite"):
        open_parent(suite, studies[:1], True, None, parent)
    with pytest.raises(RunDirError, match="not empty"):
        open_parent(suite, studies, True, parent, None)
    with pytest.raises(RunDirError, match="no suite.json"):
        open_parent(suite, studies, True, None, tmp_path)
    assert open_parent(suite, studies, True, None, parent) == parent


def test_index_report_has_every_study_verdicts_distance_time_and_links(tmp_path):
    suite, studies = _two_study_suite(tmp_path)
    parent = open_parent(suite, studies, True, tmp_path / "p", None)
    _fake_run(parent / "studies" / "ipv6", [200, 201, 199], [240, 241, 239])  # v6 above v4: holds; 2x the seed
    suite_run.record(parent, "ipv6", {"status": "complete", "wall_s": 60.0, "report_s": 3.0, "load_avg_1m": 4.2})
    (parent / "studies" / "ipv6" / "report.html").write_text("<html></html>")
    index = build_index(parent)
    ipv6, anma = index.studies
    assert ipv6["verdicts"] == {HOLDS: 1} and ipv6["claims"][0]["verdict"] == HOLDS
    assert ipv6["distance"]["median_x"] == pytest.approx(2.0) and ipv6["distance"]["within"] == 0
    assert ipv6["report_href"] == "studies/ipv6/report.html"
    assert anma["status"] == "not run" and not anma["claims"]
    assert index.total_wall_s == 60.0
    html = index.html_path.read_text()
    md = index.markdown_path.read_text()
    assert 'href="studies/ipv6/report.html"' in html and 'href="studies/ipv6/report.html#finding-v6slower"' in html
    assert "Where the time went (all studies)" in html and "warm-ups" in html and "timebar" in html
    total = md[md.index("## Where the time went (all studies)"):md.index("## Performance")]
    assert "| u0 |" not in total  # units belong to their study's own table
    assert "| v6slower | holds" in md and "not run" in md
    _fake_run(parent / "studies" / "anma", [200, 201, 199], [100, 100, 100])  # v6 below v4: fails
    assert build_index(parent).studies[1]["verdicts"] == {FAILS: 1}
    # stopped part-way: the index says how far it got (what a --resume goes on from)
    anma_dir = parent / "studies" / "anma"
    manifest = json.loads((anma_dir / "manifest.json").read_text())
    planned = sum(p["repetitions"] for p in manifest["points"])
    (anma_dir / "manifest.json").write_text(json.dumps(manifest | {"status": "interrupted"}))
    for rep_dir in sorted(anma_dir.glob("points/*/r*"))[1:]:  # every repetition but one finished
        (rep_dir / "rep.json").write_text("{}")
    index = build_index(parent)
    assert index.studies[1]["progress"] == {"done": planned - 1, "planned": planned}
    assert f"interrupted ({planned - 1} of {planned} repetitions)" in index.markdown_path.read_text()
    assert f"interrupted ({planned - 1} of {planned} repetitions)" in index.html_path.read_text()
    # with the planner's estimate of what it has left (the command line passes it: cli/suite.py)
    index = build_index(parent, rest_s=lambda run_dir: 7200.0 if run_dir.name == "anma" else None)
    assert f"interrupted ({planned - 1} of {planned} repetitions; about 2.0 h left)" in index.markdown_path.read_text()
    assert "about 2.0 h left" in index.html_path.read_text()
    # resumed: the study's wall time is every attempt's, and the row says how many
    suite_run.record(parent, "ipv6", {"status": "complete", "wall_s": 40.0, "report_s": 3.0, "load_avg_1m": 1.5})
    index = build_index(parent)
    assert index.studies[0]["wall_s"] == 100.0 and index.total_wall_s == 100.0
    assert "| 100.0 (1.5) in 2 attempts |" in index.markdown_path.read_text()


def test_suite_report_of_a_directory_that_is_no_suite_exits_7(tmp_path):
    out = subprocess.run([sys.executable, "-m", "congestlab.cli", "suite-report", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 7 and "not a suite run" in out.stderr
