"""The makespan planner (planner/): LPT on known inputs, bad input, unit times from a
manifest's time budget, from repetition timestamps (runs recorded before the budget) and
from a cluster run's tasks, and the CLI."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from congestlab.errors import RunDirError, SpecError
from congestlab.planner.full_estimate import full_units
from congestlab.planner.makespan import Task, lpt
from congestlab.planner.unit_times import predict, relative_error, run_times
from congestlab.spec import load_preset
from congestlab.spec.sweep import expand, planned_runs

DATA = Path(__file__).parent / "data"


def _tasks(*seconds):
    return [Task(f"t{i}", s) for i, s in enumerate(seconds)]


def test_lpt_known_schedules():
    # Graham's bad case for LPT on 2 nodes: 3,3,2,2,2 -> LPT 7 (3+2+2 | 3+2), optimum 6
    s = lpt(_tasks(3, 3, 2, 2, 2), 2)
    assert s.makespan_s == 7 and sorted(s.loads_s) == [5, 7] and s.lower_bound_s == 6
    assert [t.seconds for t in s.nodes[0]] == [3, 2, 2] and [t.seconds for t in s.nodes[1]] == [3, 2]
    # longest first, each to the earliest free node
    s = lpt(_tasks(1, 9, 4, 4, 3), 3)
    assert s.loads_s == [9, 7, 5] and [t.name for t in s.nodes[0]] == ["t1"]
    assert lpt(_tasks(5, 1, 2), 1).makespan_s == 8
    assert lpt([], 4).makespan_s == 0
    assert lpt(_tasks(5, 5), 8).loads_s.count(0.0) == 6  # more nodes than tasks: some idle


def test_lpt_keeps_graham_list_scheduling_bound():
    """Any list schedule ends by mean load + (1 - 1/N) x the longest task (Graham 1966); no
    schedule ends before the lower bound; every task is placed once."""
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randint(1, 8)
        tasks = _tasks(*[rng.uniform(0.1, 100) for _ in range(rng.randint(1, 40))])
        s = lpt(tasks, n)
        longest, mean = max(t.seconds for t in tasks), sum(t.seconds for t in tasks) / n
        assert s.lower_bound_s - 1e-9 <= s.makespan_s <= mean + (1 - 1 / n) * longest + 1e-9
        assert sorted(t.name for node in s.nodes for t in node) == sorted(t.name for t in tasks)


@pytest.mark.parametrize("nodes", [0, -1, 1.5])
def test_lpt_bad_node_count(nodes):
    with pytest.raises(SpecError, match="--nodes"):
        lpt(_tasks(1), nodes)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_lpt_bad_task_time(bad):
    with pytest.raises(SpecError, match="finite time"):
        lpt([Task("x", bad)], 2)


def _manifest(tmp_path, **extra) -> Path:
    m = {"format_version": 2, "study": "s", "status": "complete", "started_utc": "2026-11-26T00:00:00Z",
         "points": [{"id": "a", "experiment": "e", "unit": 0}, {"id": "b", "experiment": "e", "unit": 1}], "timing": {"wall_s": 100.0},
         "testbed": {"setup_s": 2.0, "teardown_s": 1.0}, "analysis": {"analysis_s": 5.0}} | extra
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    return tmp_path


def test_times_from_the_time_budget_and_a_one_node_prediction(tmp_path):
    run = _manifest(tmp_path, time_budget={
        "wall_s": 100.0, "categories_s": {"setup": 2.0, "teardown": 1.0, "analysis": 5.0},
        "units": {"u0": {"wall_s": 60.0, "runs": 3}, "u1": {"wall_s": 30.0, "runs": 3}}})
    times = run_times(run)
    assert times.source == "time budget" and times.tasks_s == 90 and times.per_testbed_s == 3
    one = predict(times, 1)
    assert one.wall_s == pytest.approx(98.0) and relative_error(one.wall_s, 100.0) == pytest.approx(-0.02)
    two = predict(times, 2, task_overhead_s=0.5)  # each task builds its own testbed on a cluster
    assert two.wall_s == pytest.approx(60 + 3 + 0.5 + 5)


def test_times_from_repetition_timestamps(tmp_path):
    run = _manifest(tmp_path)
    for point, rep, finished in (("a", 1, "00:00:20"), ("a", 2, "00:00:50"), ("b", 1, "00:01:10"),
                                 ("b", 2, "00:01:30")):
        d = run / "points" / point / f"r{rep}"
        d.mkdir(parents=True)
        (d / "rep.json").write_text(json.dumps({"point": point, "repetition": rep,
                                                "finished_utc": f"2026-11-26T{finished}Z"}))
    times = run_times(run)
    # unit 0 from the testbed up (start + 2 s) to its last repetition (50 s); unit 1 after it
    assert times.source == "repetition timestamps"
    assert {t.name: t.seconds for t in times.tasks} == {"u0": 48.0, "u1": 40.0}
    assert predict(times, 1).wall_s == pytest.approx(3 + 88 + 5)


def test_times_of_a_one_node_cluster_run_carry_its_overhead_to_two_nodes(tmp_path):
    tasks = [{"unit": f"u{i}", "attempt": 1, "node_wall_s": s} for i, s in enumerate((12.0, 12.0, 13.0, 11.0))]
    run = _manifest(tmp_path, timing={"wall_s": 56.0}, cluster={"nodes": {"n1": {}}, "tasks": tasks},
                    time_budget={"wall_s": 56.0, "categories_s": {"analysis": 2.0}, "units": {}})
    times = run_times(run)
    assert times.on_cluster and times.overhead_s == pytest.approx((56 - 48 - 2) / 4)
    assert predict(times, 1).wall_s == pytest.approx(56.0)  # its own node count: exact by construction
    assert predict(times, 2).wall_s == pytest.approx(13 + 11 + 2 * 1.5 + 2)  # 13+11 | 12+12


def test_incomplete_or_empty_runs_are_refused(tmp_path):
    with pytest.raises(RunDirError, match="complete run"):
        run_times(_manifest(tmp_path, status="failed"))
    with pytest.raises(RunDirError, match="no finished repetition"):
        run_times(_manifest(tmp_path))


def test_stored_quick_runs_are_replayed_within_15_percent():
    """Runs recorded before the time budget (unit tests' data): their units' timestamps, the
    testbed and the analysis account for the recorded wall time."""
    for name in ("ipv6-quick-run", "anma-quick-run", "tcplab-quick-run"):
        run = DATA / name
        if not (run / "points").is_dir():
            continue
        times = run_times(run)
        assert abs(relative_error(predict(times, 1).wall_s, times.wall_s)) <= 0.15, name


def test_plan_cli(tmp_path):
    run = _manifest(tmp_path, time_budget={
        "wall_s": 100.0, "categories_s": {"setup": 2.0, "teardown": 1.0, "analysis": 5.0},
        "units": {"u0": {"wall_s": 60.0, "runs": 3}, "u1": {"wall_s": 30.0, "runs": 3}}})
    out = subprocess.run([sys.executable, "-m", "congestlab.cli", "plan", str(run), "--nodes", "2", "--validate"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "node 1: 63.0 s: u0 63.0" in out.stdout and "error -2.0 %" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "congestlab.cli", "plan", str(tmp_path / "nope"), "--nodes", "2"],
                         capture_output=True, text=True)
    assert bad.returncode == 7 and bad.stderr.count("\n") == 1
    zero = subprocess.run([sys.executable, "-m", "congestlab.cli", "plan", str(run), "--nodes", "0"],
                          capture_output=True, text=True)
    assert zero.returncode == 2


def test_full_units_are_extrapolated_from_a_quick_run(tmp_path):
    """rto's full run from its --quick units: a measured point keeps its time per repetition,
    its timeout waits counted in GETs that ran into the quick timeout, each costing the full
    point's own timeout (chosen per level: 10 s at 75, 97.6 s at 100, 104.3 s at 125 Mbit/s;
    --quick 10 s and 45 s); the others take the mean at their level, or their experiment's."""
    spec = load_preset("rto")
    quick = expand(spec, quick=True)
    # every quick unit: 5 s restart, one 15 s warm-up, per repetition 20 s measuring + 10 s timeout wait
    units = {f"u{p.unit}": {"wall_s": 20.0 + 2 * 30.0, "runs": 2, "server_restart": 5.0, "warmup": 15.0,
                            "measure": 2 * 20.0, "timeout_wait": 2 * 10.0} for p in quick}
    units["u0"] = {"wall_s": 20.0 + 2 * 60.0, "runs": 2, "server_restart": 5.0, "warmup": 15.0, "measure": 2 * 59.0}
    m = {"format_version": 2, "study": "rto", "status": "complete", "quick": True,
         "points": [p.describe() for p in quick], "timing": {"wall_s": 1.0},
         "time_budget": {"wall_s": 1.0, "categories_s": {}, "units": units}}
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    tasks = {t.name: t.seconds for t in full_units(tmp_path, spec)}
    full = {p.id: p for p in expand(spec, quick=False)}
    assert len(tasks) == len({p.unit for p in full.values()})
    warm = 15.0 * spec.warmup_s / quick[0].study.warmup_s  # (rto's quick keeps the warm-up: 60 s)
    first = full[quick[0].id]  # u0 of the quick run: 60 s per repetition (1 s of it bookkeeping), no timeouts
    assert tasks[f"u{first.unit}"] == pytest.approx(5 + warm + first.repetitions * 60)

    def timeout_s(point):
        return point.study.workload("get").timeout_s

    at_100 = next(p for p in quick if p.labels["level"] == "100")  # 10 s of waiting = 10/45 GETs per repetition
    point = full[at_100.id]
    assert (timeout_s(at_100), timeout_s(point)) == (45, 97.6)
    assert tasks[f"u{point.unit}"] == pytest.approx(5 + warm + point.repetitions * (20 + 10 / 45 * 97.6))
    at_75 = next(p for p in quick[1:] if p.labels["level"] == "75")  # one GET per repetition, 10 s both ways
    point = full[at_75.id]
    assert tasks[f"u{point.unit}"] == pytest.approx(5 + warm + point.repetitions * (20 + 10))
    # a cell the quick run leaves out (125 Mbit/s): the experiment's mean count of timed-out GETs x 104.3 s
    counts = [0.0] + [10 / timeout_s(p) for p in quick[1:]]
    point = next(p for p in full.values() if p.experiment == "e1" and p.labels["level"] == "125")
    rep_s = (1 + 59 + 20 * 11) / 12 + sum(counts) / len(counts) * 104.3  # bookkeeping + measuring + waits
    assert tasks[f"u{point.unit}"] == pytest.approx(5 + warm + point.repetitions * rep_s)
    # another experiment at a measured level (E5 at 75): the mean of the quick points at 75 (u0 among them)
    at_75 = [0] + [i for i, p in enumerate(quick) if i and p.labels["level"] == "75"]
    point = next(p for p in full.values() if p.experiment == "e5-modern" and p.labels["level"] == "75")
    assert sum(1 for p in full.values() if p.unit == point.unit) == 1
    rep_s = (1 + 59 + 20 * (len(at_75) - 1)) / len(at_75) + (len(at_75) - 1) / len(at_75) * timeout_s(point)
    assert timeout_s(point) == 10
    assert tasks[f"u{point.unit}"] == pytest.approx(5 + warm + point.repetitions * rep_s)
    with pytest.raises(RunDirError, match="not a --quick run"):
        (tmp_path / "manifest.json").write_text(json.dumps(m | {"quick": False}))
        full_units(tmp_path, spec)


def test_full_units_scale_warm_up_and_durations(tmp_path):
    """tcp-lab's quick iperf runs 2 s; the full one its declared duration."""
    spec = load_preset("tcp-lab")
    quick = expand(spec, quick=True)
    units = {f"u{p.unit}": {"wall_s": 100.0, "runs": 10, "measure": 10 * 2.0, "other": 80.0} for p in quick}
    m = {"format_version": 2, "study": "tcp-lab", "status": "complete", "quick": True,
         "points": [p.describe() for p in quick], "timing": {"wall_s": 1.0},
         "time_budget": {"wall_s": 1.0, "categories_s": {}, "units": units}}
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    tasks = {t.name: t.seconds for t in full_units(tmp_path, spec)}
    def duration(point):
        return max((getattr(point.study.workload(n), "duration_s", 0) or 0 for n in point.workloads), default=0)

    quick_iperf = next(p for p in quick if duration(p) == 2)
    point = next(p for p in expand(spec, quick=False) if p.id == quick_iperf.id)
    assert duration(point) >= 30
    assert tasks[f"u{point.unit}"] >= point.repetitions * (8.0 + 2.0 * duration(point) / 2)
    from congestlab.planner.full_estimate import full_estimate

    caveats = full_estimate(tmp_path, spec).caveats  # no GET and no longer warm-up
    borrowed = sum(1 for p in expand(spec, quick=False) if p.id not in {q.id for q in quick})
    assert caveats[0].startswith(f"{borrowed} of {len(expand(spec, quick=False))} points (")
    assert not any("warm-up" in c for c in caveats) and "workloads.rtt.count" in caveats[-1]


def test_full_estimate_of_a_single_quick_run_of_a_preset(tmp_path):
    """`plan RUN --nodes N --full` on one --quick run of a preset (not a suite): the full run
    estimated with the preset as this revision has it; a run of a spec file is refused."""
    from congestlab.planner.suite_plan import estimate_full, plan_run_full

    spec = load_preset("rto")
    quick = expand(spec, quick=True)
    units = {f"u{p.unit}": {"wall_s": 80.0, "runs": 2, "server_restart": 5.0, "warmup": 15.0,
                            "measure": 2 * 20.0, "timeout_wait": 2 * 10.0} for p in quick}
    m = {"format_version": 2, "study": "rto", "preset": "rto", "status": "complete", "quick": True,
         "points": [p.describe() for p in quick], "timing": {"wall_s": 1000.0},
         "time_budget": {"wall_s": 1000.0, "categories_s": {"setup": 2.0, "teardown": 2.0, "analysis": 4.0},
                         "units": units}}
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    got = plan_run_full(tmp_path, 8)
    want = estimate_full("rto", tmp_path, spec, 8)
    assert got.one_node_s == pytest.approx(want.one_node_s) and got.on_nodes.wall_s == pytest.approx(want.on_nodes.wall_s)
    assert got.on_nodes.wall_s < got.one_node_s
    out = subprocess.run([sys.executable, "-m", "congestlab.cli", "plan", str(tmp_path), "--nodes", "8", "--full"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert f"rto's full run estimated from its --quick units: {got.one_node_s:.0f} s" in out.stdout
    (tmp_path / "manifest.json").write_text(json.dumps(m | {"preset": None}))
    bad = subprocess.run([sys.executable, "-m", "congestlab.cli", "plan", str(tmp_path), "--nodes", "8", "--full"],
                         capture_output=True, text=True)
    assert bad.returncode == 7 and "not a run of a preset" in bad.stderr and bad.stderr.count("\n") == 1


def _cubic_compound_quick_run(tmp_path, spec, quick, order, units):
    """A recorded cubic-compound --quick run with these unit times: (its manifest, the full
    units estimated from it, the full points, the full order's visits per unit)."""
    from congestlab.planner.full_estimate import unit_visits

    m = {"format_version": 2, "study": "cubic-compound", "status": "complete", "quick": True,
         "points": [p.describe() for p in quick], "run_order": order, "timing": {"wall_s": 1.0},
         "time_budget": {"wall_s": 1.0, "categories_s": {}, "units": units}}
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    tasks = {t.name: t.seconds for t in full_units(tmp_path, spec)}
    full = expand(spec, quick=False)
    return m, tasks, full, unit_visits([r.point.unit for r in planned_runs(full, spec.order, spec.seed)])


def test_full_units_pay_starts_and_warm_ups_per_visit_of_the_full_order(tmp_path):
    """A quick run in one pass (cubic-compound's [quick] passes = 1) visits each unit once; the
    full run's two mirrored passes visit each unit twice but the turning one: the full estimate
    prices each visit with the quick's per-visit server start and warm-up (planner/full_estimate.py)."""
    from congestlab.planner.full_estimate import unit_visits

    assert unit_visits([0, 0, 1, 2, 2, 1, 0]) == {0: 2, 1: 2, 2: 1}
    spec = load_preset("cubic-compound")
    quick = expand(spec, quick=True)
    order = [r.describe() for r in planned_runs(quick, spec.order, spec.seed)]
    assert set(unit_visits([r["unit"] for r in order]).values()) == {1}  # the quick's one pass
    # every quick unit: 2 s of server start, one 20 s warm-up, 2 repetitions of 10 s
    units = {f"u{p.unit}": {"wall_s": 42.0, "runs": 2, "server_restart": 2.0, "warmup": 20.0, "measure": 20.0}
             for p in quick}
    m, tasks, full, visits = _cubic_compound_quick_run(tmp_path, spec, quick, order, units)
    assert sorted(set(visits.values())) == [1, 2]  # the turning unit of each experiment runs its halves at once
    warm = 20.0 * spec.warmup_s / quick[0].study.warmup_s  # 60 s over the quick's 20 s
    for unit, n in visits.items():
        reps = sum(p.repetitions for p in full if p.unit == unit)
        assert tasks[f"u{unit}"] == pytest.approx(n * (2.0 + warm) + reps * 10.0)
    # the GETs' measuring is the quick's after a 20 s warm-up: named as a lower bound, with its seconds
    from congestlab.planner.full_estimate import full_estimate

    caveats = full_estimate(tmp_path, spec).caveats
    measuring = sum(p.repetitions for p in full) * 10.0
    assert [c for c in caveats if "warm-up" in c] == [
        next(c for c in caveats if c.startswith(f"{len(full)} points' GETs ({measuring:.0f} s of measuring)")
             and "20 s warm-up, a lower bound" in c and "full 60 s" in c)]
    # recorded without an order (before the run design): once per unit, as before
    (tmp_path / "manifest.json").write_text(json.dumps({k: v for k, v in m.items() if k != "run_order"}))
    once = {t.name: t.seconds for t in full_units(tmp_path, spec)}
    assert all(once[f"u{u}"] == pytest.approx(2.0 + warm + sum(p.repetitions for p in full if p.unit == u) * 10.0)
               for u in visits)


def test_full_estimate_names_the_quick_settings_it_does_not_scale():
    """anma's --quick runs a tenth of the requests: the estimate cannot scale that back and says
    so; the warm-up, passes, durations and timeouts it models are not named."""
    from congestlab.planner.full_estimate import _unmodelled_quick_settings

    assert _unmodelled_quick_settings(load_preset("anma")) == ["workloads.anma.concurrency", "workloads.anma.requests"]
    assert _unmodelled_quick_settings(load_preset("cubic-compound")) == []
    assert _unmodelled_quick_settings(load_preset("rto")) == []
    assert "workloads.rtt.count" in _unmodelled_quick_settings(load_preset("tcp-lab"))
    assert "workloads.iperf.duration_s" not in _unmodelled_quick_settings(load_preset("tcp-lab"))


def test_full_units_a_quick_run_in_two_passes_pays_its_warm_ups_per_visit(tmp_path):
    """Two passes of one round visit most quick units twice, one repetition each: their two
    warm-ups are one per visit, not one per repetition (which would price all 90 of the full
    run's repetitions a 60 s warm-up: the +82 % estimate of docs/cluster-planning.md)."""
    from congestlab.planner.full_estimate import unit_visits

    spec = load_preset("cubic-compound")
    two = spec.model_copy(deep=True)
    two.quick.set["passes"] = 2
    quick = expand(two, quick=True)
    order = [r.describe() for r in planned_runs(quick, two.order, two.seed)]
    seen = unit_visits([r["unit"] for r in order])
    assert 2 in seen.values()
    runs = {u: sum(p.repetitions for p in quick if p.unit == u) for u in seen}
    units = {f"u{u}": {"wall_s": 20.0 * n + 10.0 * runs[u], "runs": runs[u], "warmup": 20.0 * n,
                       "measure": 10.0 * runs[u]}
             for u, n in seen.items()}
    m, tasks, full, visits = _cubic_compound_quick_run(tmp_path, spec, quick, order, units)
    for unit, n in visits.items():
        reps = sum(p.repetitions for p in full if p.unit == unit)
        assert tasks[f"u{unit}"] == pytest.approx(n * 60.0 + reps * 10.0)
