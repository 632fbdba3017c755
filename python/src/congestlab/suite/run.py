"""Run a suite (suite/spec.py) into one parent directory: studies/<key>/ is each study's
ordinary run directory (report, compare, distance and --resume take it as it is), run by
study.run_children like sensitivity's configurations; suite.json names the suite and records
each study's outcome and times; index.md/.html (suite/index.py) sum them up.

Run again with `--resume PARENT`: complete studies are kept, an interrupted or failed one
is resumed, the rest run. `only` runs a subset now (e.g. one chapter a night); the others
wait for a later `--resume` and the index shows them as not run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Console

from congestlab.errors import RunDirError, SpecError
from congestlab.report import build_report
from congestlab.report.terminal import print_report
from congestlab.rundir import new_out_dir, read_json_file
from congestlab.spec.sweep import expand
from congestlab.study import Child, decidability_warnings, passes_line, run_children, write_parent_state
from congestlab.suite.spec import SuiteMember, SuiteSpec
from congestlab.testbed import new_prefix

STATE = "suite.json"
FORMAT = 1


def study_dir(parent: Path, member: SuiteMember) -> Path:
    return parent / "studies" / member.key


def suite_state(suite: SuiteSpec, members: list[SuiteMember], quick: bool) -> dict:
    return {"format": FORMAT, "suite": suite.name, "title": suite.title, "quick": quick,
            "studies": [{"key": m.key, "label": m.label, "source": m.source, "dir": f"studies/{m.key}"}
                        for m in members]}


def open_parent(suite: SuiteSpec, members: list[SuiteMember], quick: bool, out: Path | None,
                resume: Path | None) -> Path:
    """A new parent (default runs/suite-NAME-TIME-ID, or `out`: new or empty), or `resume`'s,
    which must hold this suite with the same studies and --quick (RunDirError, exit 7)."""
    fresh = suite_state(suite, members, quick)
    if resume is not None:
        if out is not None:
            raise RunDirError("--resume continues its own directory; drop --out")
        return resumable_parent(suite, members, quick, resume)
    if out is None:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        parent = (Path("runs") / f"suite-{suite.name}-{stamp}-{new_prefix()}").absolute()
        parent.mkdir(parents=True)
    else:  # new or empty, no link, its folder there (rundir/out_paths.py)
        parent = new_out_dir(out)
    state = fresh | {"started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": {}}
    write_parent_state(parent / STATE, state)
    return parent


def resumable_parent(suite: SuiteSpec, members: list[SuiteMember], quick: bool, resume: Path) -> Path:
    """`resume` absolute, when it holds this suite with the same studies and --quick (what
    --dry-run checks of --resume too; RunDirError, exit 7, otherwise)."""
    fresh = suite_state(suite, members, quick)
    parent = resume.absolute()
    path = parent / STATE
    if not path.exists():
        raise RunDirError(f"{parent}: holds no {STATE} (not a suite run)")
    stored = read_json_file(path)
    if not isinstance(stored, dict):
        raise RunDirError(f"{path}: a JSON {type(stored).__name__}, not a suite's state")
    mine = {k: fresh[k] for k in ("suite", "quick")} | {"studies": [s["key"] for s in fresh["studies"]]}
    theirs = {k: stored.get(k) for k in ("suite", "quick")} | {
        "studies": [s.get("key") if isinstance(s, dict) else s for s in stored.get("studies") or []]}
    if mine != theirs:
        raise RunDirError(f"{parent}: holds suite {theirs['suite']!r} ({', '.join(map(str, theirs['studies']))}"
                          f"{', --quick' if theirs['quick'] else ''}); resume it with the same suite, "
                          "--seed-fit and --quick")
    return parent


def record(parent: Path, key: str, entry: dict) -> None:
    path = parent / STATE
    state = json.loads(path.read_text())
    runs = state.setdefault("runs", {})
    # a resumed study keeps what its earlier attempts took (the suite's total is their sum)
    earlier = runs.get(key) or {}
    entry["attempts_wall_s"] = [*earlier.get("attempts_wall_s", []), entry.get("wall_s", 0.0)]
    runs[key] = entry
    write_parent_state(path, state)


def selected(members: list[SuiteMember], only: list[str] | None) -> list[SuiteMember]:
    """The studies `--only` names, in the suite's order (all without it); an unknown or
    repeated name is a SpecError."""
    if not only:
        return members
    keys = [m.key for m in members]
    for name in only:
        if name not in keys:
            raise SpecError("--only", f"{name!r} is not a study of this suite (its studies: {', '.join(keys)})")
        if only.count(name) > 1:
            raise SpecError("--only", f"{name!r} is named twice")
    return [m for m in members if m.key in only]


def run_suite(suite: SuiteSpec, members: list[SuiteMember], quick: bool = False, out: Path | None = None,
              resume: Path | None = None, calibrate: bool = False, cluster: str | None = None,
              only: list[str] | None = None, echo=print) -> tuple[Path, list[str]]:
    """Every study not yet complete, in order (study.run_children), or those of them `only`
    names; a study that fails is recorded and the suite goes on; Ctrl-C/SIGTERM stop it.
    Returns the parent and the keys of failed studies."""
    now = selected(members, only)
    parent = open_parent(suite, members, quick, out, resume)
    echo(f"suite run: {parent} ({len(members)} studies{', --quick' if quick else ''}"
         + (f"; now only {', '.join(m.key for m in now)}" if only else "") + ")")
    children = [Child(m.key, m.spec, study_dir(parent, m), {"status": "running"},
                      preset=None if m.source.endswith(".toml") else m.source) for m in now]
    failed = run_children(children, quick, calibrate, cluster, report=_report,
                          record=lambda key, entry: record(parent, key, entry), report_time_apart=True, echo=echo)
    return parent, failed


def _report(run_dir: Path, console: Console) -> None:
    print_report(build_report(run_dir), console)


def dry_run(suite: SuiteSpec, members: list[SuiteMember], quick: bool, echo=print) -> None:
    """Each study's points and repetitions, and its passes with their rounds as the study's own
    dry run shows them (`congestlab reproduce STUDY --dry-run` also shows its testbed commands)."""
    total = 0
    for member in members:
        points = expand(member.spec, quick)
        reps = sum(p.repetitions for p in points)
        total += reps
        units = len({p.unit for p in points})
        echo(f"[study] {member.key}: {len(points)} points in {units} units, {reps} repetitions  # {member.label}")
        echo(f"  # {passes_line(member.spec, points) or f'order {member.spec.order}: no passes'}")
        for line in decidability_warnings(member.spec, quick):
            echo(f"  # warning: {line}")
    echo(f"# suite {suite.name}: {len(members)} studies, {total} repetitions{' (--quick)' if quick else ''}; "
         "sub-runs under PARENT/studies/<study>")
