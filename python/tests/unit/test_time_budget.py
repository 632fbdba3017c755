"""The time accounting of a run (runner/time_budget.py) and its table in the report
(report/time_table.py), with a fake clock: every second is charged to one category, so
the categories add up to the wall time."""

from __future__ import annotations

import json

import pytest

from congestlab.report.time_table import record_report_s, time_table
from congestlab.runner.time_budget import (ANALYSIS, CATEGORIES, MEASURE, OTHER, SERVER_RESTART, SETUP, TEARDOWN,
                                           TIMEOUT_WAIT, WARMUP, TimeBudget, merge, timed_out_seconds)


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


def _a_run(clock: FakeClock) -> TimeBudget:
    """Set-up 3 s, two units of two repetitions, teardown 1 s, analysis 4 s, 0.5 s unclaimed."""
    b = TimeBudget(clock)
    with b.phase(SETUP):
        clock.tick(3)
    for unit, restart_s, warm_s in (("u0", 2.0, 10.0), ("u1", 1.5, 0.0)):
        for rep in range(2):
            with b.unit_run(unit):
                with b.phase(SERVER_RESTART, unit):
                    clock.tick(restart_s if rep == 0 else 0.0)
                with b.phase(WARMUP, unit):
                    clock.tick(warm_s if rep == 0 else 0.0)
                clock.tick(0.25)  # captures, bookkeeping: the unit's "other"
                b.split_measure(6.0, 4.0 if unit == "u1" else 0.0, unit)
                clock.tick(6.0)
    with b.phase(TEARDOWN):
        clock.tick(1)
    clock.tick(0.5)
    with b.phase(ANALYSIS):
        clock.tick(4)
    return b


def test_categories_add_up_to_the_wall_time():
    clock = FakeClock()
    out = _a_run(clock).to_json()
    cats = out["categories_s"]
    assert set(cats) == set(CATEGORIES)
    assert out["wall_s"] == pytest.approx(3 + 2 + 10 + 1.5 + 4 * 6.25 + 1 + 0.5 + 4)
    assert sum(cats.values()) == pytest.approx(out["wall_s"], abs=1e-6)
    assert cats[SETUP] == 3 and cats[TEARDOWN] == 1 and cats[ANALYSIS] == 4
    assert cats[SERVER_RESTART] == pytest.approx(3.5) and cats[WARMUP] == 10
    assert cats[TIMEOUT_WAIT] == pytest.approx(8) and cats[MEASURE] == pytest.approx(16)
    assert cats[OTHER] == pytest.approx(4 * 0.25 + 0.5)


def test_each_unit_adds_up_to_its_own_wall_time():
    out = _a_run(FakeClock()).to_json()
    u0, u1 = out["units"]["u0"], out["units"]["u1"]
    assert u0["runs"] == 2 and u1["runs"] == 2
    assert u0["wall_s"] == pytest.approx(2 + 10 + 2 * 6.25)
    assert u1["wall_s"] == pytest.approx(1.5 + 2 * 6.25)
    for per in (u0, u1):
        parts = sum(v for k, v in per.items() if k in CATEGORIES)
        assert parts == pytest.approx(per["wall_s"])
    assert u1[TIMEOUT_WAIT] == pytest.approx(8) and u1[MEASURE] == pytest.approx(4)


def test_a_phase_that_raises_is_still_charged():
    clock = FakeClock()
    b = TimeBudget(clock)
    with pytest.raises(RuntimeError):
        with b.phase(WARMUP, "u0"):
            clock.tick(2)
            raise RuntimeError("boom")
    assert b.totals[WARMUP] == 2 and b.units["u0"][WARMUP] == 2


def test_unknown_category_is_refused():
    with pytest.raises(ValueError):
        TimeBudget().add("coffee", 1.0)


def test_timed_out_requests_are_the_union_of_their_intervals_inside_the_window():
    def rec(a, b, ok=False, err="Operation timed out after 45000 milliseconds"):
        return "request", {"start_ts": a, "end_ts": b, "ok": ok, "error": err}

    records = [rec(10, 20), rec(15, 25), rec(30, 40, ok=True, err=""), rec(50, 60, err="Connection refused"),
               rec(5, 12)]
    # timed out: [5,12] U [10,20] U [15,25] = [5,25], clipped to the window [8, 22]
    assert timed_out_seconds(records, (8.0, 22.0)) == pytest.approx(14.0)
    assert timed_out_seconds([], (0.0, 1.0)) == 0.0


def test_merge_adds_sessions_and_units():
    a = {"wall_s": 10.0, "categories_s": {"setup": 1.0, "measure": 9.0}, "units": {"u0": {"wall_s": 9.0, "runs": 2}}}
    b = {"wall_s": 5.0, "categories_s": {"setup": 1.0, "measure": 4.0}, "units": {"u0": {"wall_s": 4.0, "runs": 1},
                                                                                  "u1": {"wall_s": 0.5, "runs": 1}}}
    m = merge([a, b])
    assert m["wall_s"] == 15.0 and m["categories_s"]["setup"] == 2.0 and m["categories_s"]["measure"] == 13.0
    assert m["units"]["u0"] == {"wall_s": 13.0, "runs": 3} and m["units"]["u1"]["runs"] == 1


def test_report_table_shares_and_report_time(tmp_path):
    budget = _a_run(FakeClock()).to_json()
    table = time_table({"time_budget": budget}, report_s=2.5)
    assert table.sum_s == pytest.approx(budget["wall_s"], abs=0.05)
    assert sum(r["pct"] for r in table.rows) == pytest.approx(100, abs=0.5)
    assert [u["unit"] for u in table.units] == ["u0", "u1"] and table.report_s == 2.5
    assert time_table({}) is None  # a run from before the budget
    manifest = {"format_version": 2, "status": "complete", "time_budget": budget}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    record_report_s(tmp_path, 1.25)
    assert json.loads((tmp_path / "manifest.json").read_text())["time_budget"]["report_s"] == 1.25
