"""Where a run's time goes: a monotonic-clock account of named categories, per unit of
points (spec/sweep.py) and in total, stored in manifest.json under "time_budget"
(docs/data-format.md) and shown by the report (docs/time-budget.md).

Phases do not nest: each second of the run is charged to one category. What no phase
claims (bookkeeping, capture start/stop, reconfiguring the testbed between points) is
"other", so the categories add up to the wall time.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterable

SETUP = "setup"  # building the testbed, tool versions, calibration
SERVER_RESTART = "server_restart"  # (re)starting servers and their ready checks
WARMUP = "warmup"  # waiting for a started background to settle before measuring
MEASURE = "measure"  # measuring workloads running, minus what timed out
TIMEOUT_WAIT = "timeout_wait"  # measured requests that ended by their timeout
TEARDOWN = "teardown"  # stopping servers and background, deleting the testbed
ANALYSIS = "analysis"  # captures and records -> results/*.csv
OTHER = "other"  # the rest: bookkeeping between phases

# (the report is built after the run, outside its wall time: time_budget.report_s, report/time_table.py)
# the manifest's key for the attempt in progress: its budget up to its last finished repetition,
# rewritten after each one, so a kill loses no more than the repetition it hit
IN_PROGRESS = "time_budget_in_progress"
CATEGORIES = (SETUP, SERVER_RESTART, WARMUP, MEASURE, TIMEOUT_WAIT, TEARDOWN, ANALYSIS, OTHER)
UNIT_CATEGORIES = (SERVER_RESTART, WARMUP, MEASURE, TIMEOUT_WAIT, OTHER)


class TimeBudget:
    """Seconds per category, in total and per unit. `clock` is injectable for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.started = clock()
        self.totals: dict[str, float] = {c: 0.0 for c in CATEGORIES}
        self.units: dict[str, dict[str, float]] = {}
        self._unit_open: dict[str, float] = {}

    def add(self, category: str, seconds: float, unit: str | None = None) -> None:
        if category not in CATEGORIES:
            raise ValueError(f"unknown time category {category!r}")
        seconds = max(0.0, seconds)
        self.totals[category] += seconds
        if unit is not None:
            per = self.units.setdefault(unit, {c: 0.0 for c in UNIT_CATEGORIES} | {"wall_s": 0.0, "runs": 0})
            per[category] = per.get(category, 0.0) + seconds

    @contextmanager
    def phase(self, category: str, unit: str | None = None):
        t0 = self.clock()
        try:
            yield
        finally:
            self.add(category, self.clock() - t0, unit)

    @contextmanager
    def unit_run(self, unit: str):
        """One (point, repetition) of `unit`: its wall time is the unit's, and whatever its
        phases did not claim is the unit's "other"."""
        per = self.units.setdefault(unit, {c: 0.0 for c in UNIT_CATEGORIES} | {"wall_s": 0.0, "runs": 0})
        claimed0 = sum(per[c] for c in UNIT_CATEGORIES)
        t0 = self.clock()
        try:
            yield
        finally:
            wall = self.clock() - t0
            claimed = sum(per[c] for c in UNIT_CATEGORIES) - claimed0
            per["wall_s"] += wall
            per["runs"] += 1
            self.add(OTHER, wall - claimed, unit)

    def split_measure(self, seconds: float, timed_out_s: float, unit: str | None = None) -> None:
        """A measuring window: the part spent in requests that timed out is a timeout wait."""
        waited = min(max(timed_out_s, 0.0), max(seconds, 0.0))
        self.add(TIMEOUT_WAIT, waited, unit)
        self.add(MEASURE, seconds - waited, unit)

    def to_json(self, wall_s: float | None = None) -> dict:
        """Totals with "other" taking the unclaimed rest of `wall_s` (default: since creation)."""
        wall = (self.clock() - self.started) if wall_s is None else wall_s
        totals = dict(self.totals)
        totals[OTHER] += max(0.0, wall - sum(totals.values()))
        return {"wall_s": round(wall, 3),
                "categories_s": {c: round(v, 3) for c, v in totals.items()},
                "units": {u: {k: (round(v, 3) if isinstance(v, float) else v) for k, v in per.items()}
                          for u, per in self.units.items()}}


def timed_out_seconds(records: Iterable[tuple[str, dict]], window: tuple[float, float]) -> float:
    """Length of the union of the intervals of requests that ended by their timeout (curl:
    "timed out"), clipped to the measuring window (epoch seconds)."""
    spans = sorted((max(r["start_ts"], window[0]), min(r["end_ts"], window[1]))
                   for _, r in records if _timed_out(r) and "start_ts" in r and "end_ts" in r)
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if b <= a:
            continue
        if a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def _timed_out(row: dict) -> bool:
    return not row.get("ok", True) and "timed out" in str(row.get("error", "")).lower()


def merge(budgets: Iterable[dict]) -> dict:
    """The sum of several stored budgets (a resumed run's sessions, a suite's studies)."""
    out = {"wall_s": 0.0, "categories_s": {c: 0.0 for c in CATEGORIES}, "units": {}}
    for b in budgets:
        out["wall_s"] = round(out["wall_s"] + b.get("wall_s", 0.0), 3)
        for c, v in (b.get("categories_s") or {}).items():
            out["categories_s"][c] = round(out["categories_s"].get(c, 0.0) + v, 3)
        for u, per in (b.get("units") or {}).items():
            mine = out["units"].setdefault(u, {})
            for k, v in per.items():
                mine[k] = round(mine.get(k, 0) + v, 3) if isinstance(v, float) else mine.get(k, 0) + v
    return out


def record_session(manifest: dict, session: dict) -> None:
    """An attempt's budget into the manifest, in place of its in-progress one: appended to
    time_budget_sessions, time_budget their sum."""
    manifest.pop(IN_PROGRESS, None)
    _append_session(manifest, session)


def settle_in_progress(manifest: dict) -> None:
    """An attempt killed before it recorded its budget (SIGKILL, power loss) left its budget
    up to its last finished repetition: that becomes its session, marked `"killed": true`."""
    left = manifest.pop(IN_PROGRESS, None)
    if left:
        _append_session(manifest, left | {"killed": True})


def _append_session(manifest: dict, session: dict) -> None:
    manifest["time_budget_sessions"] = [*manifest.get("time_budget_sessions", []), session]
    manifest["time_budget"] = merge(manifest["time_budget_sessions"])
