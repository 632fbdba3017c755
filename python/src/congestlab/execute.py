"""How the command line's `run`, `reproduce`, `suite` and `sensitivity` go on once their options
are parsed: which options go together, a dry run or a run (on this machine, on a Ray cluster,
`--until-decisive`, a suite's studies, a sensitivity sweep's configurations), then its report
on the terminal. congestlab/cli/ parses the options and maps the errors to exit codes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from congestlab import study as studies
from congestlab.cluster.address import check_answers  # (no Ray import there)
from congestlab.cluster.submit_order import previous_times  # (no Ray import there)
from congestlab.decisive.driver import default_max_repetitions, is_until_decisive, run_until_decisive, summary_lines
from congestlab.decisive.procedure import FIRST_LOOK
from congestlab.errors import CongestlabError, RunDirError, SpecError
from congestlab.planner.remaining import left_s
from congestlab.planner.unit_times import run_times
from congestlab.report import build_report
from congestlab.report.terminal import print_report
from congestlab.rundir import check_new_dir
from congestlab.runner import require_root
from congestlab.sensitivity.configurations import load_axes_file, parse_axis_option
from congestlab.sensitivity.sweep_run import dry_run as print_sweep
from congestlab.sensitivity.sweep_run import run_sensitivity, sensitivity_sweep
from congestlab.spec.models import StudySpec
from congestlab.suite.index import build_index
from congestlab.suite.run import dry_run as dry_run_suite
from congestlab.suite.run import resumable_parent, run_suite, selected, study_dir
from congestlab.suite.spec import SuiteSpec, is_suite, load_suite, members


def check_before_start(out: Path | None, resume: Path | None, cluster: str | None) -> None:
    """What a run and its --dry-run check alike before anything starts: --resume goes without
    --out, an --out may be made (rundir/out_paths.py), a --cluster head answers."""
    if resume is not None and out is not None:
        raise RunDirError("--resume continues its own directory; drop --out")
    if out is not None:
        check_new_dir(out)
    if cluster is not None:
        check_answers(cluster)


@dataclass(frozen=True)
class Decisive:
    """`--until-decisive` and its limits (congestlab/decisive/)."""

    on: bool
    max_repetitions: int | None
    budget_min: float | None


def execute_study(spec: StudySpec, quick: bool, out: Path | None, dry_run: bool, calibrate: bool,
                  preset: str | None, resume: Path | None, cluster: str | None, decisive: Decisive,
                  order_from: Path | None = None) -> None:
    """`run` and `reproduce` of a study: its dry run, or its run and then its report."""
    if (decisive.max_repetitions is not None or decisive.budget_min is not None) and not decisive.on:
        raise SpecError("--max-repetitions/--budget-min", "go with --until-decisive")
    if order_from is not None and cluster is None:
        raise SpecError("--order-from", "orders a cluster run's tasks; go with --cluster")
    check_before_start(out, resume, cluster)
    if resume is not None:
        studies.resumable(spec, quick, resume)  # a run of this spec and --quick (also under --dry-run)
    previous = None
    if order_from is not None:  # a finished run's unit times (planner/unit_times.py), read before anything runs
        previous = (str(order_from), previous_times([(t.name, t.seconds) for t in run_times(order_from).tasks]))
    if dry_run:
        studies.dry_run(spec, quick)
        if decisive.on:
            n = decisive.max_repetitions or default_max_repetitions(spec, quick)
            print(f"# --until-decisive: every point runs rounds 1..{min(FIRST_LOOK, n)}, then a round at a time "
                  f"only for the points feeding an undecided claim, up to {n} rounds"
                  + (f" or {decisive.budget_min:g} min" if decisive.budget_min is not None else ""))
        return
    console = Console()
    for line in studies.decidability_warnings(spec, quick):
        console.print(f"[yellow]warning:[/] {line}", highlight=False)
    if resume is not None and not decisive.on and is_until_decisive(resume):
        decisive = Decisive(True, None, None)  # an --until-decisive run goes on as one
    if decisive.on:
        if cluster is not None:
            raise SpecError("--until-decisive", "runs on this machine's testbed; drop --cluster")
        run_dir = run_until_decisive(spec, quick, out, calibrate, preset, resume, decisive.max_repetitions,
                                     decisive.budget_min, console)
    else:
        run_dir = studies.run_study(spec, quick, out, calibrate, preset=preset, resume=resume, cluster=cluster,
                                    console=console, order_from=previous)
    print_report(build_report(run_dir), console)
    if decisive.on:  # after the report (which shows these verdicts: report/sequential_view.py): how it stopped
        for line in summary_lines(run_dir):
            console.print(line, highlight=False)


def execute_reproduce(name: str, quick: bool, out: Path | None, dry_run: bool, calibrate: bool,
                      resume: Path | None, cluster: str | None, seed_fit: bool | None, decisive: Decisive,
                      order_from: Path | None, only: list[str] | None) -> None:
    """`reproduce NAME`: a suite's studies, or a study's preset; refuses the options of the other."""
    if is_suite(name):
        if decisive.on or decisive.max_repetitions is not None or decisive.budget_min is not None:
            raise SpecError("--until-decisive", f"{name!r} is a suite; run its studies with --until-decisive one by one "
                            "(docs/suite.md)")
        if order_from is not None:
            raise SpecError("--order-from", f"{name!r} is a suite; its studies' tasks go longest first by their "
                            "planned repetitions")
        suite, base = load_suite(name=name)
        execute_suite(suite, base, quick, out, dry_run, calibrate, resume, cluster, seed_fit, only)
        return
    if only:
        raise SpecError("--only", f"{name!r} is a study, not a suite; --only picks studies of a suite")
    if seed_fit is not None:
        raise SpecError("--seed-fit", f"{name!r} is a study, not a suite; its variant is the preset {name}-seed-fit")
    execute_study(studies.load_study(preset=name), quick, out, dry_run, calibrate, name, resume, cluster, decisive,
                  order_from)


def execute_suite(suite: SuiteSpec, base: Path | None, quick: bool, out: Path | None, dry: bool, calibrate: bool,
                  resume: Path | None, cluster: str | None, seed_fit: bool | None,
                  only: list[str] | None = None) -> None:
    """`suite FILE` and `reproduce SUITE`: its dry run, or its studies in turn and its index."""
    suite_studies = members(suite, base, seed_fit)
    check_before_start(out, resume, cluster)
    if resume is not None:
        resumable_parent(suite, suite_studies, quick, resume)  # this suite's (also under --dry-run)
    if dry:
        dry_run_suite(suite, selected(suite_studies, only), quick)
        return
    if cluster is None:
        require_root()
    if resume is not None:  # how long each unfinished study takes to finish (planner/remaining.py)
        for m in selected(suite_studies, only):
            if (left := left_s(study_dir(resume, m))) is not None:
                print(f"{m.key}: about {left / 3600:.1f} h left at its own pace")
    parent, failed = run_suite(suite, suite_studies, quick, out, resume, calibrate, cluster, only)
    index = build_index(parent, rest_s=left_s)
    print(f"suite index: {index.markdown_path}  (also {index.html_path.name}); "
          f"{index.total_wall_s} s of runs")
    if failed:
        raise CongestlabError(f"{len(failed)} of {len(suite_studies)} studies did not complete ({', '.join(failed)}); "
                              f"continue with --resume {parent}")
    waiting = [s["key"] for s in index.studies if s["status"] != "complete"]
    if waiting:
        print(f"not yet run: {', '.join(waiting)}; continue with --resume {parent}")


def execute_sensitivity(preset: str, axis: list[str], axes: Path | None, quick: bool, out: Path | None,
                        dry_run: bool, calibrate: bool, cluster: str | None) -> None:
    """`sensitivity PRESET`: its configurations listed, or run in turn and then its report."""
    from congestlab.sensitivity.report import build_sensitivity_report  # matplotlib

    parsed = (load_axes_file(axes) if axes else []) + [parse_axis_option(a) for a in axis]
    sweep = sensitivity_sweep(preset, parsed, quick)
    if cluster is not None:
        check_answers(cluster)
    if dry_run:
        print_sweep(sweep)
        return
    if cluster is None:
        require_root()
    parent = run_sensitivity(sweep, out, calibrate, cluster)
    print_report(build_sensitivity_report(parent), Console())
