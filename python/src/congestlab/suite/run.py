"""Run a suite (suite/spec.py) into one parent directory: studies/<key>/ is each study's
ordinary run directory (report, compare, distance and --resume take it as it is), run by
study.run_child like sensitivity's configurations; suite.json names the suite and records
each study's outcome and times; index.md/.html (suite/index.py) sum them up.

Run again with `--resume PARENT`: complete studies are kept, an interrupted or failed one
is resumed, the rest run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from rich.console import Console

from congestlab.errors import CongestlabError, Interrupted, RunDirError
from congestlab.report import build_report
from congestlab.report.terminal import print_report
from congestlab.spec.sweep import expand
from congestlab.study import child_status, run_child
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
        parent = resume.absolute()
        path = parent / STATE
        if not path.is_file():
            raise RunDirError(f"{parent}: holds no {STATE} (not a suite run)")
        try:
            stored = json.loads(path.read_text())
        except ValueError as err:
            raise RunDirError(f"{path}: not valid JSON ({err})") from None
        mine = {k: fresh[k] for k in ("suite", "quick")} | {"studies": [s["key"] for s in fresh["studies"]]}
        theirs = {k: stored.get(k) for k in ("suite", "quick")} | {
            "studies": [s.get("key") for s in stored.get("studies") or []]}
        if mine != theirs:
            raise RunDirError(f"{parent}: holds suite {theirs['suite']!r} ({', '.join(map(str, theirs['studies']))}"
                              f"{', --quick' if theirs['quick'] else ''}); resume it with the same suite, "
                              "--seed-fit and --quick")
        return parent
    if out is None:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        parent = Path("runs") / f"suite-{suite.name}-{stamp}-{new_prefix()}"
    else:
        parent = Path(out)
    parent = parent.absolute()
    if parent.exists() and any(parent.iterdir()):
        raise RunDirError(f"{parent}: exists and is not empty; choose a new --out, or --resume a suite run")
    parent.mkdir(parents=True, exist_ok=True)
    state = fresh | {"started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": {}}
    _write_state(parent, state)
    return parent


def _write_state(parent: Path, state: dict) -> None:
    tmp = parent / (STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    tmp.replace(parent / STATE)


def record(parent: Path, key: str, entry: dict) -> None:
    state = json.loads((parent / STATE).read_text())
    runs = state.setdefault("runs", {})
    # a resumed study keeps what its earlier attempts took (the suite's total is their sum)
    earlier = runs.get(key) or {}
    entry["attempts_wall_s"] = [*earlier.get("attempts_wall_s", []), entry.get("wall_s", 0.0)]
    runs[key] = entry
    _write_state(parent, state)


def run_suite(suite: SuiteSpec, members: list[SuiteMember], quick: bool = False, out: Path | None = None,
              resume: Path | None = None, calibrate: bool = False, cluster: str | None = None,
              echo=print) -> tuple[Path, list[str]]:
    """Every study not yet complete, in order; a study that fails is recorded and the suite
    goes on; Ctrl-C/SIGTERM stop it. Returns the parent and the keys of failed studies."""
    parent = open_parent(suite, members, quick, out, resume)
    echo(f"suite run: {parent} ({len(members)} studies{', --quick' if quick else ''})")
    failed = []
    for i, member in enumerate(members, start=1):
        run_dir = study_dir(parent, member)
        status = child_status(run_dir)
        if status == "complete":
            echo(f"[{i}/{len(members)}] {member.key}: complete, kept")
            continue
        echo(f"[{i}/{len(members)}] {member.key}: " + ("resuming" if status else "running"))
        started = time.monotonic()
        entry = {"status": "running", "load_avg_1m_start": round(os.getloadavg()[0], 2)}
        try:
            console = Console()
            run_child(member.spec, run_dir, quick, calibrate, cluster, console)
            entry["wall_s"] = round(time.monotonic() - started, 1)
            report0 = time.monotonic()
            print_report(build_report(run_dir), console)
            entry["report_s"] = round(time.monotonic() - report0, 1)
            entry["status"] = "complete"
        except Interrupted:
            record(parent, member.key, entry | {"status": "interrupted",
                                                "wall_s": round(time.monotonic() - started, 1)})
            raise
        except CongestlabError as err:
            entry |= {"status": "failed", "error": str(err), "wall_s": round(time.monotonic() - started, 1)}
            failed.append(member.key)
            echo(f"  {member.key} failed: {err}")
        entry["load_avg_1m"] = round(os.getloadavg()[0], 2)
        record(parent, member.key, entry)
    return parent, failed


def dry_run(suite: SuiteSpec, members: list[SuiteMember], quick: bool, echo=print) -> None:
    """Each study's points and repetitions (`congestlab reproduce STUDY --dry-run` shows its
    testbed commands)."""
    total = 0
    for member in members:
        points = expand(member.spec, quick)
        reps = sum(p.repetitions for p in points)
        total += reps
        units = len({p.unit for p in points})
        echo(f"[study] {member.key}: {len(points)} points in {units} units, {reps} repetitions  # {member.label}")
    echo(f"# suite {suite.name}: {len(members)} studies, {total} repetitions{' (--quick)' if quick else ''}; "
         "sub-runs under PARENT/studies/<study>")
