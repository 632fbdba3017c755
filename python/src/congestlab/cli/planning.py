"""The command line of the makespan planner (docs/cluster-planning.md): `congestlab plan
RUN_DIR --nodes N`, the wall time of finished (or unfinished) runs and suites on N nodes."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from congestlab.planner.makespan import Schedule
from congestlab.planner.remaining import projected_times
from congestlab.planner.suite_plan import plan_run_full, plan_suite, plan_suite_full
from congestlab.planner.unit_times import predict, relative_error, run_times
from congestlab.rundir import read_manifest
from congestlab.suite.run import STATE as SUITE_STATE


def _print_schedule(schedule: Schedule, indent: str = "  ") -> None:
    for i, (tasks, load) in enumerate(zip(schedule.nodes, schedule.loads_s), start=1):
        order = ", ".join(f"{t.name} {t.seconds:.1f}" for t in tasks) or "idle"
        print(f"{indent}node {i}: {load:.1f} s: {order}")


def estimate_wall_time(
    run_dirs: list[Path] = typer.Argument(..., help="run directories (an unfinished one: its rest priced from its "
                                          "own units), or a suite run's parent"),
    nodes: int = typer.Option(..., "--nodes", min=1, max=10_000, help="number of nodes (one testbed each)"),
    task_overhead_s: float = typer.Option(None, "--task-overhead-s", min=0.0, help="scheduling overhead per task "
                                          "for a run recorded without a cluster (default 0; docs/cluster.md "
                                          "measured 0.17 s)"),
    validate: bool = typer.Option(False, "--validate", help="also predict each run on its own node count and "
                                  "print the error against its recorded wall time"),
    check_against: Path = typer.Option(None, "--check-against", help="a complete run of the same study on --nodes "
                                       "nodes: print the prediction's error against its recorded wall time"),
    full: bool = typer.Option(False, "--full", help="a --quick run or suite run: estimate each study's full run from its "
                              "quick units (an extrapolation; docs/cluster-planning.md)"),
) -> None:
    """Estimate the wall time on N nodes from finished runs' per-unit times: longest units
    first (LPT), and the order per node that achieves it (docs/cluster-planning.md)."""
    worst = 0.0
    for run_dir in run_dirs:
        if (run_dir / SUITE_STATE).is_file() and full:
            estimates, skipped = plan_suite_full(run_dir, nodes, task_overhead_s)
            one = sum(e.one_node_s for e in estimates)
            many = sum(e.on_nodes.wall_s for e in estimates)
            print(f"{run_dir}: full runs estimated from its --quick units: {one:.0f} s ({one / 3600:.2f} h) on one "
                  f"node; {many:.0f} s ({many / 3600:.2f} h) on {nodes} nodes, studies in sequence")
            for e in estimates:
                print(f"  {e.key}: {len(e.tasks)} units, {e.one_node_s:.0f} s on one node, {e.on_nodes.wall_s:.0f} s "
                      f"on {nodes} (longest unit {max(t.seconds for t in e.tasks):.0f} s)")
                for caveat in e.caveats:
                    print(f"    caveat: {caveat}")
            for s in skipped:
                print(f"  skipped {s}")
            continue
        if full:
            e = plan_run_full(run_dir, nodes, task_overhead_s)
            print(f"{run_dir}: {e.key}'s full run estimated from its --quick units: {e.one_node_s:.0f} s "
                  f"({e.one_node_s / 3600:.2f} h) on one node; {e.on_nodes.wall_s:.0f} s "
                  f"({e.on_nodes.wall_s / 3600:.2f} h) on {nodes} nodes, {len(e.tasks)} units "
                  f"(longest unit {max(t.seconds for t in e.tasks):.0f} s)")
            for caveat in e.caveats:
                print(f"  caveat: {caveat}")
            continue
        if (run_dir / SUITE_STATE).is_file():
            sp = plan_suite(run_dir, nodes, task_overhead_s)
            print(f"{run_dir}: suite of {len(sp.studies)} studies on {nodes} nodes: {sp.in_sequence_s:.1f} s "
                  f"({sp.in_sequence_s / 60:.1f} min) studies in sequence; {sp.pooled_s:.1f} s if every unit "
                  "were pooled")
            for times, p in sp.studies:
                print(f"  {times.study}: {p.wall_s:.1f} s from {len(times.tasks)} units ({times.source}; "
                      f"{'recorded' if times.complete else 'projected'} {times.wall_s:.1f} s on 1 node)")
                for note in times.notes:
                    print(f"    note: {note}")
                _print_schedule(p.schedule, "    ")
            for s in sp.skipped:
                print(f"  skipped {s}")
            continue
        times = projected_times(run_dir)  # an unfinished run: its recorded units and the rest priced
        p = predict(times, nodes, task_overhead_s=task_overhead_s)
        print(f"{run_dir}: {times.study}, {len(times.tasks)} tasks ({times.source}), {times.tasks_s:.1f} s of tasks, "
              f"testbed {times.per_testbed_s:.1f} s, analysis {times.serial_s:.1f} s"
              + (f", overhead {times.overhead_s:.2f} s per task" if times.on_cluster else ""))
        print(f"  on {nodes} node(s): {p.wall_s:.1f} s ({p.model}; lower bound of the tasks "
              f"{p.schedule.lower_bound_s:.1f} s)")
        _print_schedule(p.schedule)
        for note in times.notes:
            print(f"  note: {note}")
        if validate and not times.complete:
            print("  validation: none, the run is not complete (its recorded wall time is not a whole run's)")
        elif validate:
            own = len((read_manifest(run_dir).get("cluster") or {}).get("nodes") or {}) or 1
            check = predict(times, own, cluster=times.on_cluster, task_overhead_s=task_overhead_s)
            err = relative_error(check.wall_s, times.wall_s)
            worst = max(worst, abs(err))
            print(f"  validation: predicted {check.wall_s:.1f} s on its own {own} node(s), recorded "
                  f"{times.wall_s:.1f} s: error {100 * err:+.1f} %")
        if check_against is not None:
            recorded = run_times(check_against).wall_s
            err = relative_error(p.wall_s, recorded)
            worst = max(worst, abs(err))
            print(f"  check: {check_against} took {recorded:.1f} s on {nodes} node(s): error {100 * err:+.1f} %")
    if (validate or check_against) and len(run_dirs) > 1:
        print(f"worst |error| {100 * worst:.1f} %", file=sys.stderr)
