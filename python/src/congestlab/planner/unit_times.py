"""A finished run's time as the planner sees it (docs/cluster-planning.md):

- `tasks`: what a node would run as one task, in seconds: a unit of points (spec/sweep.py)
  from the manifest's time_budget, or, for a run recorded before it, from its repetitions'
  timestamps; for a cluster run, each task's own StudyRun time on its node.
- `per_testbed_s`: building and tearing down one testbed (every cluster task builds its own).
- `serial_s`: what runs once, after every task: the analysis on the head.
- `overhead_s`: per cluster task, what a one-node cluster run took beyond its tasks and
  analysis (scheduling, transfer); charged again per task in a prediction. For a run
  without a cluster it is `--task-overhead-s` (default 0; docs/cluster.md measured 0.17 s
  per task, 1.8 s for a node's first).

`predict(times, nodes)` is the wall time on `nodes` nodes: one node without a cluster runs
one testbed for every unit; on a cluster each task builds its own and LPT spreads them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from congestlab.errors import RunDirError
from congestlab.planner.makespan import Schedule, Task, lpt
from congestlab.rundir import read_manifest


@dataclass
class RunTimes:
    run_dir: Path
    study: str
    source: str  # "time budget", "repetition timestamps" or "cluster tasks"
    tasks: list[Task]
    per_testbed_s: float
    serial_s: float
    wall_s: float  # as recorded
    on_cluster: bool
    overhead_s: float = 0.0  # per task: the recorded wall time the parts above do not explain
    notes: list[str] = field(default_factory=list)
    complete: bool = True  # False: an unfinished run's recorded units plus its rest priced (planner/remaining.py)

    @property
    def tasks_s(self) -> float:
        return sum(t.seconds for t in self.tasks)


@dataclass
class Prediction:
    nodes: int
    wall_s: float
    schedule: Schedule
    serial_s: float
    model: str


def _epoch(utc: str) -> float:
    return datetime.strptime(utc, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def run_times(run_dir: Path) -> RunTimes:
    """The times of a complete run directory; RunDirError (exit 7) when it holds too little."""
    run_dir = Path(run_dir)
    m = read_manifest(run_dir, require_complete=False)
    if m.get("status") != "complete":
        raise RunDirError(f"{run_dir}: the run is {m.get('status')!r}; the planner needs a complete run")
    wall = float((m.get("timing") or {}).get("wall_s") or 0.0)
    budget = m.get("time_budget") or {}
    cats = budget.get("categories_s") or {}
    cluster = m.get("cluster") or {}
    analysis_s = float(cats.get("analysis") or (m.get("analysis") or {}).get("analysis_s") or 0.0)
    tb = m.get("testbed") or {}
    per_testbed = float(cats.get("setup", 0.0) + cats.get("teardown", 0.0)) if cats and not cluster else \
        float(tb.get("setup_s") or 0.0) + float(tb.get("teardown_s") or 0.0)
    if cluster.get("tasks"):
        done = [t for t in cluster["tasks"] if t.get("node_wall_s") is not None]
        tasks = [Task(f"{t['unit']}a{t.get('attempt', 1)}", float(t["node_wall_s"])) for t in done]
        times = RunTimes(run_dir, m.get("study", "?"), "cluster tasks", tasks, 0.0, analysis_s, wall, True)
        # the tasks' own times include their testbeds; the rest is scheduling and transfer,
        # overlapped when several nodes ran: only a one-node run measures it per task
        nodes = len(cluster.get("nodes") or {}) or 1
        if nodes == 1 and tasks:
            times.overhead_s = max(0.0, (wall - times.tasks_s - analysis_s) / len(tasks))
        else:
            times.notes.append(f"ran on {nodes} nodes: its per-task overhead is not measured (taken as 0)")
        return times
    if budget.get("units"):
        tasks = [Task(u, float(per["wall_s"])) for u, per in budget["units"].items()]
        source = "time budget"
    else:
        tasks = _units_from_timestamps(run_dir, m, float(cats.get("setup") or tb.get("setup_s") or 0.0))
        source = "repetition timestamps"
    # (no overhead is fitted here: a one-node prediction of this very run then tests whether
    # its units, set-up and analysis account for its wall time)
    return RunTimes(run_dir, m.get("study", "?"), source, tasks, per_testbed, analysis_s, wall, False)


def _units_from_timestamps(run_dir: Path, m: dict, setup_s: float) -> list[Task]:
    """Units of a run without a time budget: the points of a unit run back to back, so each
    repetition's time since the one before it finished (its servers' restart and warm-up
    included) is its unit's; the first unit starts when the testbed is up. Timestamps are
    whole seconds (rep.json), so each unit's time is within about 1 s."""
    unit_of = {p["id"]: p.get("unit", 0) for p in m.get("points") or []}
    reps = []
    for path in (run_dir / "points").glob("*/r*/rep.json"):
        info = json.loads(path.read_text())
        if info.get("point") in unit_of and info.get("finished_utc"):
            reps.append((_epoch(info["finished_utc"]), unit_of[info["point"]]))
    if not reps:
        raise RunDirError(f"{run_dir}: no finished repetition to take unit times from")
    reps.sort()
    if m.get("resumes"):
        raise RunDirError(f"{run_dir}: resumed, recorded before time budgets: its units' times are not recoverable")
    last = _epoch(m["started_utc"]) + setup_s
    units: dict[int, float] = {}
    for finished, unit in reps:
        units[unit] = units.get(unit, 0.0) + max(0.0, finished - last)
        last = finished
    return [Task(f"u{u}", s) for u, s in units.items()]


def predict(times: RunTimes, nodes: int, cluster: bool | None = None, task_overhead_s: float | None = None) -> Prediction:
    """Wall time on `nodes` nodes. `cluster` (default: nodes > 1 or the run was a cluster
    run): each task builds its own testbed and pays the per-task overhead (measured on a
    one-node cluster run, else `task_overhead_s`)."""
    cluster = (nodes > 1 or times.on_cluster) if cluster is None else cluster
    if cluster:
        overhead = times.overhead_s if times.on_cluster or task_overhead_s is None else task_overhead_s
        tasks = [Task(t.name, t.seconds + times.per_testbed_s + overhead) for t in times.tasks]
        schedule = lpt(tasks, nodes)
        return Prediction(nodes, schedule.makespan_s + times.serial_s, schedule, times.serial_s,
                          "cluster: LPT over tasks (unit + testbed + overhead), then the analysis")
    schedule = lpt(list(times.tasks), 1)
    return Prediction(1, times.per_testbed_s + schedule.makespan_s + times.serial_s, schedule,
                      times.serial_s, "one node, one testbed: set-up + every unit + the analysis")


def relative_error(predicted_s: float, recorded_s: float) -> float:
    return (predicted_s - recorded_s) / recorded_s if recorded_s > 0 else math.inf
