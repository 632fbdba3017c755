"""The run order (spec/sweep.py planned_runs): compared servers side by side within a level, levels
and congestion controls in mirrored (ABBA) blocks, seeded and reproducible, "sequential"
as the seeds ran it."""

from __future__ import annotations

from collections import Counter

import pytest

from congestlab.spec import load_preset
from congestlab.spec.sweep import expand, longest_streaks, planned_runs, run_order


def _blocks(keys: list) -> list:
    """Consecutive runs with one key collapsed: the blocks in the order they ran."""
    return [k for i, k in enumerate(keys) if not i or k != keys[i - 1]]


@pytest.mark.parametrize("quick", [False, True])
def test_ipv6_compares_its_servers_within_each_level(quick):
    study = load_preset("ipv6")
    points = expand(study, quick)
    runs = run_order(points, study.order, study.seed)
    streaks = longest_streaks(runs)
    print(f"ipv6 {'--quick' if quick else 'full'}: {len(runs)} runs, longest streak of one point "
          f"{streaks['point']}, of one server {streaks['server']}")
    assert streaks["point"] <= 2 and streaks["server"] <= 2
    # one unit per level, all three servers running through it
    assert len({p.unit for p in points}) == 7
    assert all(p.servers == ["apache", "lean", "leanmodern"] and len(p.measured) == 1 for p in points)
    # each round of a level measures every server once
    rounds = Counter((p.unit, rep) for p, rep in runs)
    assert set(rounds.values()) == {3}


def test_the_order_is_seeded_and_reproducible():
    study = load_preset("ipv6")
    points = expand(study)
    first = [(r.point.id, r.repetition, r.round, r.block) for r in planned_runs(points, "interleaved", 1)]
    again = [(r.point.id, r.repetition, r.round, r.block) for r in planned_runs(expand(study), "interleaved", 1)]
    other = [(r.point.id, r.repetition, r.round, r.block) for r in planned_runs(points, "interleaved", 2)]
    assert first == again and first != other
    assert sorted(first) == sorted(other)  # the same runs, in another order


def test_levels_run_in_a_mirrored_block_order_opened_and_closed_by_the_reference():
    study = load_preset("ipv6")
    points = expand(study)
    runs = planned_runs(points, study.order, study.seed)
    levels = _blocks([(r.point.labels["level"], r.block) for r in runs])
    first_pass = [lv for lv, b in levels if b == 1]
    second_pass = [lv for lv, b in levels if b == 2]
    assert first_pass[0] == "C0" and second_pass[-1] == "C0"  # the drift reference at both ends
    assert second_pass == list(reversed(first_pass))
    assert sorted(first_pass) == sorted(lv.name for lv in study.levels)
    # balanced: every level's mean position in the run is the same (a linear drift cancels)
    positions: dict[str, list[int]] = {}
    for r in runs:
        positions.setdefault(r.point.labels["level"], []).append(r.index)
    means = {lv: sum(v) / len(v) for lv, v in positions.items()}
    assert max(means.values()) - min(means.values()) <= 1.0, means
    # each visit of a unit holds half of its rounds: rounds 1-5, then 6-10
    c0 = [r.repetition for r in runs if r.point.id == "main.server-apache.level-C0"]
    assert c0 == list(range(1, 11)) and [r.block for r in runs if r.point.id == "main.server-apache.level-C0"] == \
        [1] * 5 + [2] * 5


def test_chapter_3_runs_each_servers_congestion_controls_in_abba_blocks():
    study = load_preset("cubic-compound")
    points = [p for p in expand(study) if p.experiment == "same"]
    runs = planned_runs(points, study.order, study.seed)
    for level in ("C1", "C2", "C3"):
        pairs = _blocks([(r.point.labels["pair"], r.block) for r in runs if r.point.labels["level"] == level])
        assert [p for p, _ in pairs] in (["Apache-Apache", "IIS-IIS", "IIS-IIS", "Apache-Apache"],
                                         ["IIS-IIS", "Apache-Apache", "Apache-Apache", "IIS-IIS"]), pairs
    # a unit's two blocks each start with their own warm-up: a unit's rounds do not run back to back
    # except at the turning point of the mirror
    units = _blocks([r.point.unit for r in runs])
    assert len(units) == 2 * 6 - 1


def test_sequential_keeps_the_seeds_order_and_one_server_at_a_time():
    study = load_preset("ipv6").model_copy(update={"order": "sequential"})
    points = expand(study)
    runs = run_order(points, "sequential", study.seed)
    assert [p.id for p, _ in runs][:11] == ["main.server-apache.level-C0"] * 10 + ["main.server-apache.level-C1B"]
    assert longest_streaks(runs) == {"point": 10, "server": 70}
    assert all(p.servers == p.measured for p in points)


def test_a_unit_with_several_points_never_repeats_a_point_back_to_back():
    study = load_preset("rto")
    for quick in (False, True):
        runs = planned_runs(expand(study, quick), study.order, study.seed)
        for a, b in zip(runs, runs[1:]):
            if a.point.unit == b.point.unit and len({r.point.id for r in runs if r.point.unit == a.point.unit}) > 1:
                assert a.point.id != b.point.id


def test_one_pass_visits_each_unit_once_in_the_first_pass_order():
    """passes = 1: the same runs, each unit's rounds in one visit (one warm-up), block 1."""
    study = load_preset("cubic-compound")
    two = planned_runs(expand(study), study.order, study.seed)
    one_study = study.model_copy(update={"passes": 1})
    one = planned_runs(expand(one_study), one_study.order, one_study.seed)
    assert sorted((r.point.id, r.repetition) for r in one) == sorted((r.point.id, r.repetition) for r in two)
    assert {r.block for r in one} == {1}
    units = _blocks([r.point.unit for r in one])
    assert len(units) == len(set(units)) == 18  # one visit per unit (two passes: 2 x 18 - 4 turning units)
    assert len(_blocks([r.point.unit for r in two])) == 32
    first_pass = [u for u, b in _blocks([(r.point.unit, r.block) for r in two]) if b == 1]
    assert units == first_pass  # the reference unit still first in each experiment
    for unit in units:  # rounds in order within the visit
        reps = [r.repetition for r in one if r.point.unit == unit]
        assert reps == sorted(reps)


def test_shipped_quick_runs_use_one_pass_where_a_pass_would_hold_fewer_than_two_rounds():
    """The presets' rule (docs/spec.md, "Order"): --quick in one pass where two passes would
    give a unit fewer than 2 rounds in a pass; the full runs keep the default two passes."""
    from congestlab.spec import preset_names
    from congestlab.spec.sweep import experiment_passes, rounds_per_pass

    checked = 0
    for name in preset_names():
        study = load_preset(name)
        if study.order == "sequential":
            continue
        assert set(experiment_passes(expand(study)).values()) == {2}, name
        quick = expand(study, quick=True)
        two_pass = expand(study.model_copy(update={"quick": study.quick.model_copy(
            update={"set": {k: v for k, v in study.quick.set.items() if k != "passes"}})}), quick=True)
        short = any(min(r) < 2 for r in rounds_per_pass(two_pass).values())
        assert set(experiment_passes(quick).values()) == ({1} if short else {2}), name
        checked += 1
    assert checked >= 6  # anma, cubic-compound(-seed-fit), ipv6(-seed-fit), rto(-seed-fit)


def test_one_pass_keeps_until_decisive_rounds_and_resume_subsets_in_plan_order():
    """--until-decisive plans its most rounds (StudyRun `repetitions=`) and takes one round at a
    time out of the planned order; with one pass that order runs a unit's rounds together."""
    study = load_preset("cubic-compound").model_copy(update={"passes": 1})
    points = expand(study, quick=True)
    for p in points:
        p.repetitions = 6
    runs = planned_runs(points, study.order, study.seed)
    assert {r.block for r in runs} == {1}
    round_3 = [(r.point.id, r.repetition) for r in runs if r.repetition == 3]
    assert len(round_3) == 18 and [r.point.unit for r in runs if r.repetition == 3] == \
        _blocks([r.point.unit for r in runs])
