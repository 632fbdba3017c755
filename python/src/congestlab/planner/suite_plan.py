"""The planner over a suite run (suite/run.py): each study's sub-run's unit times. A suite
on a cluster runs its studies one after another (each study's units spread over the
nodes, then its analysis), so its wall time is the sum of the studies' predictions; pooling
every unit of every study in one LPT is the lower figure a suite without that barrier
would reach (docs/cluster-planning.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from congestlab.errors import CongestlabError, RunDirError
from congestlab.planner.full_estimate import full_estimate
from congestlab.planner.makespan import Schedule, Task, lpt
from congestlab.planner.remaining import projected_times
from congestlab.planner.unit_times import Prediction, RunTimes, predict, run_times
from congestlab.rundir import read_json_file, read_manifest
from congestlab.spec import load_preset, load_spec
from congestlab.spec.models import StudySpec
from congestlab.spec.sweep import expand
from congestlab.suite.run import STATE


@dataclass
class SuitePlan:
    nodes: int
    studies: list[tuple[RunTimes, Prediction]]
    skipped: list[str]
    in_sequence_s: float  # studies one after another, as `reproduce SUITE --cluster` runs them
    pooled: Schedule  # every study's tasks in one LPT (plus every study's analysis after)
    pooled_s: float


def suite_run_dirs(parent: Path) -> list[tuple[str, Path]]:
    state_path = Path(parent) / STATE
    if not state_path.is_file():
        raise RunDirError(f"{parent}: holds no {STATE} (not a suite run)")
    state = read_json_file(state_path)
    return [(s["key"], Path(parent) / s["dir"]) for s in state.get("studies") or []]


def plan_suite(parent: Path, nodes: int, task_overhead_s: float | None = None) -> SuitePlan:
    studies, skipped = [], []
    for key, run_dir in suite_run_dirs(parent):
        try:
            times = projected_times(run_dir)  # an unfinished study: its recorded units and the rest priced
        except CongestlabError as err:
            skipped.append(f"{key}: {err}")
            continue
        studies.append((times, predict(times, nodes, task_overhead_s=task_overhead_s)))
    if not studies:
        raise RunDirError(f"{parent}: no complete study to plan from ({'; '.join(skipped)})")
    pooled_tasks = [Task(f"{times.study}/{t.name}", t.seconds) for times, p in studies
                    for node in p.schedule.nodes for t in node]
    pooled = lpt(pooled_tasks, nodes)
    serial = sum(p.serial_s for _, p in studies) + (sum(t.per_testbed_s for t, _ in studies) if nodes == 1 else 0.0)
    return SuitePlan(nodes, studies, skipped, sum(p.wall_s for _, p in studies), pooled, pooled.makespan_s + serial)


@dataclass
class FullStudyEstimate:
    key: str
    tasks: list[Task]
    one_node_s: float
    on_nodes: Prediction
    caveats: list[str]  # what the extrapolation rests on unmeasured (planner/full_estimate.py)


def estimate_full(key: str, run_dir: Path, spec: StudySpec, nodes: int,
                  task_overhead_s: float | None = None) -> FullStudyEstimate:
    """One study's full run estimated from its --quick run's units (planner/full_estimate.py):
    on one node, and on `nodes` nodes with LPT."""
    quick = run_times(run_dir)
    units = full_estimate(run_dir, spec)
    tasks = units.tasks
    reps_ratio = (sum(p.repetitions for p in expand(spec, False))
                  / max(1, sum(p.repetitions for p in expand(spec, True))))
    full = RunTimes(run_dir, quick.study, "estimated from --quick", tasks, quick.per_testbed_s,
                    quick.serial_s * reps_ratio, 0.0, False)
    one = predict(full, 1)
    return FullStudyEstimate(key, tasks, one.wall_s, predict(full, nodes, cluster=True, task_overhead_s=task_overhead_s),
                             units.caveats)


def plan_run_full(run_dir: Path, nodes: int, task_overhead_s: float | None = None) -> FullStudyEstimate:
    """A single --quick run of a preset: its full run estimated with the preset as this
    revision has it (as for a suite: today's timeouts and durations)."""
    m = read_manifest(run_dir)
    if not m.get("preset"):
        raise RunDirError(f"{run_dir}: not a run of a preset (`congestlab reproduce PRESET --quick`); a full "
                          "estimate needs the study's full spec")
    return estimate_full(m["preset"], run_dir, load_preset(m["preset"]), nodes, task_overhead_s)


def plan_suite_full(parent: Path, nodes: int, task_overhead_s: float | None = None
                    ) -> tuple[list[FullStudyEstimate], list[str]]:
    """Each study's full run estimated from this --quick suite run's units, with each study's
    spec as this revision has it (its preset or file)."""
    state = read_json_file(Path(parent) / STATE)
    out, skipped = [], []
    for study in state.get("studies") or []:
        run_dir = Path(parent) / study["dir"]
        source = study["source"]
        try:
            spec = load_spec(Path(source)) if source.endswith(".toml") else load_preset(source)
            out.append(estimate_full(study["key"], run_dir, spec, nodes, task_overhead_s))
        except CongestlabError as err:
            skipped.append(f"{study['key']}: {err}")
    return out, skipped
