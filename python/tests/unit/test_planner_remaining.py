"""The planner on an unfinished run: what its `--resume` has left, priced from its own units
(planner/remaining.py), and a suite's unfinished study (planner/suite_plan.py)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from congestlab.errors import RunDirError
from congestlab.planner.remaining import left_s, projected_times, remainder
from congestlab.planner.suite_plan import plan_suite
from congestlab.planner.unit_times import predict
from congestlab.spec import load_preset
from congestlab.spec.sweep import expand, planned_runs


@functools.cache
def _rto_full():
    spec = load_preset("rto")
    points = expand(spec, quick=False)
    return spec, points, planned_runs(points, spec.order, spec.seed)


def _interrupted_rto(tmp_path, done_runs=4, **extra) -> tuple[Path, list]:
    """rto's full run stopped after its first `done_runs` runs (u0's and u24's first visits:
    two repetitions each, at 75 Mbit/s), with their time budget: u0 a 5 s start, the 60 s
    warm-up, per repetition 1 s bookkeeping + 2 s measuring + one GET waiting its 10 s
    timeout; u24 a 5 s start and 3 s per repetition."""
    spec, points, order = _rto_full()
    units = {"u0": {"server_restart": 5.0, "warmup": 60.0, "measure": 4.0, "timeout_wait": 20.0, "other": 2.0,
                    "wall_s": 91.0, "runs": 2},
             "u24": {"server_restart": 5.0, "measure": 4.0, "other": 2.0, "wall_s": 11.0, "runs": 2}}
    m = {"format_version": 2, "study": "rto", "preset": "rto", "status": "interrupted", "quick": False,
         "started_utc": "2026-11-26T00:00:00Z", "spec": spec.model_dump(mode="json"),
         "points": [p.describe() for p in points], "run_order": [r.describe() for r in order],
         "time_budget": {"wall_s": 104.0, "categories_s": {"setup": 2.0}, "units": units}} | extra
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    for r in order[:done_runs]:
        d = tmp_path / "points" / r.point.id / f"r{r.repetition}"
        d.mkdir(parents=True)
        (d / "rep.json").write_text("{}")
    return tmp_path, order


def test_an_interrupted_run_has_its_rest_priced_from_its_own_units(tmp_path):
    run, order = _interrupted_rto(tmp_path)
    rest = remainder(run)
    assert (rest.status, rest.done, rest.planned, rest.recorded_s) == ("interrupted", 4, 393, 104.0)
    left = {t.name: t.seconds for t in rest.left}
    # each unit's third repetition, in a later visit: what one cost, and the unit's start (and warm-up) again
    assert left["u0"] == pytest.approx((1 + 2 + 10) + 5 + 60) and left["u24"] == pytest.approx(3 + 5)
    assert rest.borrowed == 111  # every other point: no unit of its ran yet
    # a point not run, at a measured level (E1 at 75 Mbit/s): the mean of the two units, per repetition
    # and per visit (two visits: two repetitions, then the third)
    w2 = next(r.point for r in order if r.point.id == "e1.level-75.sampling-all.weight-W2")
    assert left[f"u{w2.unit}"] == pytest.approx(3 * (3 + 0.5 * 10) + 2 * (5 + 30))
    # at a level no unit measured yet (125 Mbit/s): E1's mean, its GETs waiting the level's own timeout
    w2 = next(r.point for r in order if r.point.id == "e1.level-125.sampling-all.weight-W2")
    assert w2.study.workload("get").timeout_s == 104.3
    assert left[f"u{w2.unit}"] == pytest.approx(3 * (3 + 0.5 * 104.3) + 2 * (5 + 30))
    times = projected_times(run)
    assert not times.complete and times.source == "time budget + projected rest"
    assert times.tasks_s == pytest.approx(91 + 11 + rest.left_s) and times.wall_s == pytest.approx(104 + rest.left_s)
    assert "4 of 393 repetitions done" in times.notes[0] and "111 points from others" in times.notes[0]
    assert predict(times, 1).wall_s == pytest.approx(2 + times.tasks_s)
    # still running (or killed): its attempt's budget up to its last finished repetition prices it the same
    m = json.loads((run / "manifest.json").read_text())
    m |= {"status": "running", "time_budget": {}, "time_budget_in_progress": m["time_budget"]}
    (run / "manifest.json").write_text(json.dumps(m))
    live = remainder(run)
    assert live.status == "running" and live.left == rest.left and live.recorded_s == 104.0


def test_the_rest_of_a_run_is_refused_when_it_cannot_be_priced(tmp_path):
    run, _ = _interrupted_rto(tmp_path / "a", status="complete")
    with pytest.raises(RunDirError, match="complete; nothing is left"):
        remainder(run)
    assert projected_times(run).complete  # a complete run's own times (its time budget)
    assert left_s(run) is None  # (the suite index then shows no time left)
    run, _ = _interrupted_rto(tmp_path / "b", time_budget={})
    with pytest.raises(RunDirError, match="no repetition of it recorded its time"):
        remainder(run)
    run, _ = _interrupted_rto(tmp_path / "c", preset=None, study="mine")
    with pytest.raises(RunDirError, match="not a run of a preset"):
        remainder(run)
    other = _rto_full()[0].model_dump(mode="json") | {"warmup_s": 30.0}
    run, _ = _interrupted_rto(tmp_path / "d", spec=other)
    with pytest.raises(RunDirError, match="another spec than preset 'rto'"):
        remainder(run)
    # a suite's sub-run recorded before suites named their preset: found by its study's name
    run, _ = _interrupted_rto(tmp_path / "e", preset=None)
    assert remainder(run).done == 4 and left_s(run) == remainder(run).left_s


def test_plan_cli_on_an_interrupted_run_projects_it_and_does_not_validate(tmp_path):
    run, _ = _interrupted_rto(tmp_path)
    out = subprocess.run([sys.executable, "-m", "congestlab.cli", "plan", str(run), "--nodes", "8", "--validate"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "(time budget + projected rest)" in out.stdout and "note: interrupted: 4 of 393 repetitions done" in out.stdout
    assert "validation: none, the run is not complete" in out.stdout and "error" not in out.stdout


def test_a_suite_plan_projects_its_unfinished_study(tmp_path):
    _interrupted_rto(tmp_path / "studies" / "rto")
    (tmp_path / "suite.json").write_text(json.dumps({"studies": [{"key": "rto", "dir": "studies/rto"},
                                                                 {"key": "anma", "dir": "studies/anma"}]}))
    sp = plan_suite(tmp_path, 8)
    [(times, prediction)] = sp.studies
    assert not times.complete and prediction.wall_s == pytest.approx(predict(times, 8).wall_s)
    assert sp.in_sequence_s == pytest.approx(prediction.wall_s) and sp.skipped[0].startswith("anma:")
