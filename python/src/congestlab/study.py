"""One public way to run a study: load a preset or a spec file, show its plan (`dry_run`),
run it into a run directory (`run_study`: new, `--out`, `--resume`, on a Ray cluster), or
run it as one child of a parent directory (`run_child`), or run a parent's children in turn
(`run_children`: sensitivity's configurations, a suite's studies). The command line,
sensitivity, suites, `cc share`, `simulate` and the tests all come through here; the StudyRun
(runner/) does one testbed's lifecycle.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from congestlab.errors import ClusterError, CongestlabError, Interrupted, RunDirError, SpecError
from congestlab.input_files import InputFileError, load_json, read_regular
from congestlab.rundir import MANIFEST, new_run_dir, prepare_out_dir
from congestlab.runner import StudyRun, require_root, wanted_cc
from congestlab.servers.factory import network_steps
from congestlab.spec import load_preset, load_spec
from congestlab.spec.decidable import undecidable
from congestlab.spec.request_timeouts import describe_timeout
from congestlab.spec.models import StudySpec
from congestlab.spec.shaping import unshaped_links
from congestlab.spec.sweep import expand, experiment_passes, longest_streaks, planned_runs, rounds_per_pass
from congestlab.testbed import Testbed, new_prefix
from congestlab.stored import StoredRun
from congestlab.testbed.namespaces import list_namespaces, owner_alive

RUNS_PARENT = Path("runs")


def load_study(spec_path: Path | None = None, preset: str | None = None) -> StudySpec:
    """A preset by name, else a spec file; a bad one is one SpecError line (exit 2)."""
    return load_preset(preset) if preset else load_spec(spec_path)


def passes_line(spec: StudySpec, points: list) -> str | None:
    """'passes (rounds per pass): EXP N (R+R), ...' for the dry runs of a study and of a suite;
    None for a sequential order (no passes)."""
    if spec.order == "sequential":
        return None
    passes, per_pass = experiment_passes(points), rounds_per_pass(points)
    return "passes (rounds per pass): " + ", ".join(
        f"{exp} {passes[exp]} ({'+'.join(map(str, per_pass[exp]))})" for exp in passes)


def decidability_warnings(spec: StudySpec, quick: bool) -> list[str]:
    """The study's claims that cannot decide at the repetitions it plans (spec/decidable.py),
    one line each: shown before a run and in its dry run, never a reason to stop it."""
    return [f"{w}" for w in undecidable(spec, quick)]


def dry_run(spec: StudySpec, quick: bool) -> None:
    """The testbed's commands, then every point with what it sets, in the order they run; the
    claims that cannot decide at the planned repetitions, as warnings."""
    points = expand(spec, quick)
    tb = Testbed(points[0].study.topology, kernel_cc=wanted_cc(points[0].study))
    for step in tb.plan:
        print(f"[{step.phase}] {step}")
    servers = {(p.study.server(name).node, p.study.server(name).kind): p.study.server(name)
               for p in points for name in p.servers}
    for server in servers.values():  # made when a server starts (every start), removed when it stops
        for step in network_steps(server, tb):
            print(f"[{step.phase}] {step}  # server {server.name}")
    for imp in tb.impairments:
        iface = imp.iface
        print(f"[impairments] {imp.label}: delay {iface.delay_ms:g} ms, jitter {iface.jitter_ms:g} ms, "
              f"loss {iface.loss:g} (netem if this kernel has it, else linkem; "
              f"link_emulator = {spec.topology.link_emulator})")
    for link in unshaped_links(points):  # (the StudyRun records them in the manifest's fidelity checks)
        print(f"# warning: {link.message}")
    print(f"# {len(tb.plan)} commands; teardown kills every process in, then deletes: "
          + " ".join(tb.layout.namespaces()))
    planned = planned_runs(points, spec.order, spec.seed)
    runs = [(r.point, r.repetition) for r in planned]
    print(f"# {len(points)} points, {len(runs)} runs (point x repetition), order {spec.order}"
          f"{' (--quick)' if quick else ''}")
    if (passes := passes_line(spec, points)) is not None:
        print(f"# {passes}")
    shown: set[str] = set()  # each timeout's reason once, at its first point (rto: 3 for 113 points)
    for point in points:
        settings = ", ".join(f"{k} = {v!r}" for k, v in point.settings.items()) or "the spec as written"
        print(f"[point] {point.id}  unit {point.unit}  x{point.repetitions}  servers {','.join(point.servers) or '-'}"
              f"  workloads {','.join(point.workloads)}  sets: {settings}")
        for t in point.timeouts:
            if (line := f"  # timeout {t['workload']}: {describe_timeout(t)}") not in shown:
                shown.add(line)
                print(line + "  (and every later point with this timeout)")
    streaks = longest_streaks(runs)
    print(f"# longest streak of one point: {streaks['point']} runs; of one server: {streaks['server']} runs")
    for line in decidability_warnings(spec, quick):
        print(f"# warning: {line}")
    print("# run order (run: point#repetition round block): " + " ".join(
        f"{r.index}:{r.point.id}#{r.repetition}@{r.round}/b{r.block}" for r in planned))


def resumable(spec: StudySpec, quick: bool, resume: Path) -> dict:
    """The stored manifest of a run directory this very spec and --quick may continue (what
    --dry-run checks of --resume too); refuses (RunDirError, exit 7) a directory that is no
    run, another spec or another --quick."""
    run = StoredRun(resume, require_complete=False)
    stored = run.raw
    if not run.ran(spec, quick):
        raise RunDirError(f"{resume}: its manifest holds another spec than the one given; resume it with the "
                          f"spec it ran ({stored.get('preset') or stored.get('study')!r})")
    if bool(stored.get("quick")) != quick:
        raise RunDirError(f"{resume}: it ran {'with' if stored.get('quick') else 'without'} --quick; "
                          "resume it the same way")
    return stored


def resume_manifest(spec: StudySpec, quick: bool, resume: Path, cluster: str | None = None) -> dict:
    """The stored manifest of a run directory to continue with this very spec (resumable);
    refuses (RunDirError, exit 7) also a run whose process still lives or whose testbed remains."""
    stored = resumable(spec, quick, resume)
    prefix = stored.get("testbed", {}).get("prefix", "")
    if prefix and stored.get("status") == "running" and owner_alive(prefix):
        raise RunDirError(f"{resume}: its run is still in progress (testbed {prefix})")
    if not cluster and prefix and any(ns.startswith(prefix + "-") for ns in list_namespaces()):
        # (on a cluster every node removes its own stale testbeds before it takes work: cluster/node.py)
        raise RunDirError(f"{resume}: namespaces of its crashed testbed {prefix} remain; run `congestlab clean` first")
    return stored


def run_study(spec: StudySpec, quick: bool = False, out: Path | None = None, calibrate: bool = False,
              preset: str | None = None, resume: Path | None = None, cluster: str | None = None,
              argv: list[str] | None = None, console: Console | None = None, repetitions: int | None = None,
              runs: list[tuple[str, int]] | None = None, scheduler=None,
              order_from: tuple[str, dict[str, float]] | None = None) -> Path:
    """Run `spec` into a run directory and return it: a new one under runs/ (or `out`, new or
    empty), or `resume`'s (only its repetitions without results run). `cluster`: the units
    of points run on a Ray cluster at this address (docs/cluster.md). `repetitions`, `runs`,
    `scheduler`: as the StudyRun takes them (`--until-decisive`, congestlab/decisive/driver.py).
    `order_from`: (a previous run, its task times): on a cluster, submit the longest first by
    them (cluster/submit_order.py); without it, by planned repetitions."""
    if cluster is None:
        require_root()  # on a cluster, the nodes build the testbeds; the head only gathers
    if calibrate and spec.calibrate is None:
        raise SpecError("calibrate", f"study {spec.name!r} names no (sender, receiver) pair; --calibrate has "
                        "nothing to measure")
    console = console or Console()
    argv = argv if argv is not None else sys.argv
    if resume is not None:
        if out is not None:
            raise RunDirError("--resume continues its own directory; drop --out")
        run_dir = resume.absolute()
        stored = resume_manifest(spec, quick, run_dir, cluster)
        for partial in run_dir.glob(".incoming-*.tar"):  # a cluster transfer cut off (cluster/driver.py)
            partial.unlink()
        study_run = StudyRun(spec, run_dir, quick=quick, calibrate=calibrate, argv=argv, preset=preset,
                             resume=stored, repetitions=repetitions, runs=runs, scheduler=scheduler)
        console.print(f"resuming {run_dir}: {study_run.manifest['resumes'][-1]['kept']} repetitions kept, "
                      f"{len(study_run.runs)} to run")
    else:
        run_dir = prepare_out_dir(out) if out else new_run_dir(RUNS_PARENT, spec.name, new_prefix())
        console.print(f"run directory: {run_dir}")
        study_run = StudyRun(spec, run_dir, quick=quick, calibrate=calibrate, argv=argv, preset=preset,
                             repetitions=repetitions, runs=runs, scheduler=scheduler)
    if cluster is None:
        study_run.run()
    else:
        _run_on_cluster(study_run, cluster, calibrate, console, order_from)
    return run_dir


def child_status(run_dir: Path) -> str | None:
    """A sweep child's state: complete, another recorded status, or None (no manifest:
    nothing to keep)."""
    path = run_dir / MANIFEST
    if not path.exists():
        return None
    try:
        data = read_regular(path)
    except InputFileError as err:
        raise RunDirError(f"{path}: {err}") from None
    try:
        manifest = load_json(data)
    except ValueError:  # damaged (invalid JSON, or nested too deep): nothing to keep
        return None
    return (manifest.get("status") if isinstance(manifest, dict) else None) or "unknown"


def run_child(spec: StudySpec, run_dir: Path, quick: bool = False, calibrate: bool = False,
              cluster: str | None = None, console: Console | None = None, preset: str | None = None) -> Path:
    """One run of a sweep, at `run_dir` inside the sweep's parent directory: continued when
    it has a manifest, else started afresh (a directory without one holds nothing to keep).
    `preset`: the preset `spec` is, unchanged (a suite's study), recorded in its manifest."""
    if child_status(run_dir) is None:
        if run_dir.exists():
            shutil.rmtree(run_dir)
        # the folder of the parent's runs (studies/, runs/) is the parent's own, not a folder
        # the user named: made here, as --out would refuse to (rundir/out_paths.py)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        return run_study(spec, quick, out=run_dir, calibrate=calibrate, preset=preset, cluster=cluster,
                         console=console)
    return run_study(spec, quick, calibrate=calibrate, resume=run_dir, cluster=cluster, console=console)


@dataclass
class Child:
    """One run of a parent directory: its key in the parent's state file, its spec, its run
    directory, and the fields its state entry starts with."""

    key: str
    spec: StudySpec
    run_dir: Path
    entry: dict = field(default_factory=dict)
    preset: str | None = None  # the preset `spec` is, unchanged


def run_children(children: list[Child], quick: bool, calibrate: bool, cluster: str | None, *,
                 report: Callable[[Path, Console], None], record: Callable[[str, dict], None],
                 report_time_apart: bool = False, echo=print) -> list[str]:
    """Every child not yet complete, in order: run (run_child: continued or afresh), then
    `report(run_dir, console)` (the caller's: the report layer sits above this one). Each
    attempt goes to `record(key, entry)`: status (complete, failed with its error,
    interrupted), wall_s and the 1-minute load average before and after (the machine is
    shared: the load beside every wall time). `report_time_apart`: wall_s is the run alone
    and report_s the report; else wall_s holds both. A child that fails is recorded and the
    rest run; Ctrl-C/SIGTERM (Interrupted) is recorded and stops them. Returns the keys of the
    children that failed."""
    failed = []
    for i, child in enumerate(children, start=1):
        where = f"[{i}/{len(children)}] {child.key}"
        status = child_status(child.run_dir)
        if status == "complete":
            echo(f"{where}: complete, kept")
            continue
        echo(f"{where}: " + ("resuming" if status else "running"))
        started = time.monotonic()
        entry = child.entry | {"load_avg_1m_start": round(os.getloadavg()[0], 2)}
        try:
            console = Console()
            run_child(child.spec, child.run_dir, quick, calibrate, cluster, console, child.preset)
            if report_time_apart:
                entry["wall_s"] = round(time.monotonic() - started, 1)
            report_started = time.monotonic()
            report(child.run_dir, console)
            if report_time_apart:
                entry["report_s"] = round(time.monotonic() - report_started, 1)
            entry["status"] = "complete"
        except Interrupted:
            record(child.key, entry | {"status": "interrupted", "wall_s": round(time.monotonic() - started, 1)})
            raise
        except CongestlabError as err:
            entry |= {"status": "failed", "error": str(err)}
            failed.append(child.key)
            echo(f"  {child.key} failed: {err}")
        if not (report_time_apart and entry["status"] == "complete"):
            entry["wall_s"] = round(time.monotonic() - started, 1)
        entry["load_avg_1m"] = round(os.getloadavg()[0], 2)
        record(child.key, entry)
    return failed


def write_parent_state(path: Path, state: dict) -> None:
    """A parent directory's state file, replaced whole (a crash leaves the old or the new one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    tmp.replace(path)


def _run_on_cluster(study_run: StudyRun, address: str, calibrate: bool, console: Console,
                    order_from: tuple[str, dict[str, float]] | None = None) -> None:
    """--cluster: the only place Ray is imported (an optional extra: .[cluster])."""
    try:
        from congestlab.cluster.driver import run_on_cluster  # imports ray
    except ImportError as err:
        raise ClusterError(f"--cluster needs Ray: pip install -e '.[cluster]' ({err})") from None
    console.print(f"cluster {address}: {len(study_run.runs)} repetitions in "
                  f"{len({p.unit for p, _ in study_run.runs})} units")
    try:
        previous_run, previous_s = order_from or (None, None)
        run_on_cluster(study_run, "auto" if address == "auto" else address, calibrate, previous_s, previous_run)
    except CongestlabError as err:
        # The run directory already says how the run ended (cluster/driver.py). End the
        # process here: Ray's core worker aborts an interpreter exit (status 1) when an
        # object reference of a cancelled task is collected after ray.shutdown().
        print(f"congestlab: {err}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(err.exit_code)
