"""The run directory's manifest: its format version, the shape readers rely on, and how it is
read and written (docs/data-format.md)."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from congestlab.errors import RunDirError
from congestlab.input_files import InputFileError, read_json
from congestlab.paths import REPO_ROOT
from congestlab.rundir.layout import MANIFEST

# 3: every record carries the settings it ran with (a GET its timeout_s) and is checked
# against its kind's schema (rundir/records.py); 2: records as each workload wrote them.
# A run is written in FORMAT_VERSION and read in any of READABLE_VERSIONS; an older one
# through rundir/upgrade.py, in memory: nothing on disk changes.
FORMAT_VERSION = 4
READABLE_VERSIONS = (2, 3, 4)


def utc_now() -> str:
    """A manifest's timestamps (started_utc, finished_utc, ...)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_manifest(run_dir: Path, manifest: dict) -> None:
    """Replaced whole: a crash leaves the old manifest or the new one, and a write the file
    system refuses (full, read-only) leaves no manifest.json.tmp behind."""
    tmp = run_dir / (MANIFEST + ".tmp")
    try:
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=False, default=str) + "\n")
        os.replace(tmp, run_dir / MANIFEST)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _PointShape(_Loose):
    id: str
    experiment: str
    axes: dict[str, str | int | float | bool | None] = {}
    settings: dict = {}
    servers: list[str] = []
    workloads: list[str] = []
    repetitions: int = 1
    unit: int = 0


class _CheckShape(_Loose):
    name: str
    ok: bool | None  # None: not checked (fidelity.Check)


class _FidelityShape(_Loose):
    checks: list[_CheckShape] = []
    warnings: list[str] = []
    per_repetition: list[_CheckShape] = []  # the rows behind per-run summaries (fidelity.fold_per_run)


class _SpecShape(_Loose):
    name: str = ""
    published: list[dict[str, str | int | float | bool | None]] = []
    report: dict = {}


class _RunShape(_Loose):
    point: str
    repetition: int


class _LookShape(_Loose):
    round: int
    next_points: list[str] = []


class _SequentialShape(_Loose):
    """`--until-decisive`'s state (decisive/procedure.py): what the plan became."""

    points: list[str] = []
    first_look: int = 0
    looks: list[_LookShape] = []


class _ManifestShape(_Loose):
    """The types of what the readers (analysis, report, distance, compare, resume) take from
    a manifest, so that a damaged one is one line naming the key, not a traceback later."""

    format_version: int
    status: str | None = None
    study: str | None = None
    quick: bool = False
    spec: _SpecShape = _SpecShape()
    axes: list[str] = []
    points: list[_PointShape] = []
    run_order: list[_RunShape] = []
    sequential: _SequentialShape | None = None
    runs_done: int = 0
    environment: dict = {}
    testbed: dict = {}
    servers: dict[str, list[dict]] = {}
    workloads: dict[str, dict] = {}
    reconfigurations: list = []
    tools: dict = {}
    qdiscs: dict = {}
    timing: dict = {}
    fidelity: _FidelityShape = _FidelityShape()
    analysis: dict = {}
    calibration: dict | None = None
    error: str | None = None


def _shape_problem(manifest: object) -> str | None:
    if not isinstance(manifest, dict):
        return f"holds a JSON {type(manifest).__name__}, not an object"
    try:
        _ManifestShape.model_validate(manifest)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}"
    return None


def read_json_file(path: Path) -> Any:
    """A JSON file of a run directory or of a parent one (a suite's or a sweep's state): a
    RunDirError naming it when it is not a regular file, not JSON or nested too deep."""
    try:
        return read_json(path)
    except InputFileError as err:
        raise RunDirError(f"{path}: {err}") from None


def read_manifest(run_dir: Path, require_complete: bool = True) -> dict:
    """The manifest as stored (a writer's copy: `analyze` and `--resume` write it back as they
    found it). Readers take the upgraded view through congestlab.stored instead."""
    path = Path(run_dir) / MANIFEST
    if not Path(run_dir).is_dir():
        raise RunDirError(f"{run_dir}: no such directory")
    if not path.exists():
        raise RunDirError(f"{run_dir}: no manifest.json (not a congestlab run directory)")
    manifest = read_json_file(path)  # a regular file, nested at most MAX_NESTING deep
    return checked_manifest(run_dir, manifest, require_complete)


def checked_manifest(run_dir: Path, manifest: object, require_complete: bool = True) -> dict:
    """A manifest whose version this congestlab reads, in the shape its readers rely on
    (RunDirError naming the key otherwise), complete when `require_complete`."""
    path = Path(run_dir) / MANIFEST
    if not isinstance(manifest, dict):
        raise RunDirError(f"{path}: damaged manifest: {_shape_problem(manifest)}")
    version = manifest.get("format_version")
    if version not in READABLE_VERSIONS:
        *rest, last = map(str, READABLE_VERSIONS)
        readable = f"{', '.join(rest)} or {last}" if rest else last
        raise RunDirError(f"{path}: format_version {version!r}, this congestlab reads {readable}")
    problem = _shape_problem(manifest)
    if problem:
        raise RunDirError(f"{path}: damaged manifest: {problem}")
    if require_complete and manifest.get("status") != "complete":
        raise RunDirError(f"{run_dir}: run status is {manifest.get('status')!r}, not complete "
                          f"({manifest.get('error', 'no error recorded')})")
    return manifest


def environment() -> dict:
    return {
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "git_revision": git_revision(),
    }


def git_revision() -> str:
    """The checkout's commit, "-dirty" with uncommitted changes; "unknown" outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain"], capture_output=True,
                               text=True, timeout=5)
        rev = out.stdout.strip() or "unknown"
        return rev + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def planned_repetitions(manifest: dict) -> int:
    """The repetitions a run's points plan (its manifest's `points`)."""
    return sum(p.get("repetitions", 0) for p in manifest.get("points") or [])


def planned_runs(manifest: dict) -> list[tuple[str, int]]:
    """Every (point, repetition) the run planned, in its order: under `--until-decisive` the
    rounds its looks asked for (decisive/procedure.py: every point's first `first_look`, then
    each look's next points for the next round); else the manifest's `run_order`; for a run
    from before it recorded one, every point's repetitions."""
    sequential = manifest.get("sequential")
    if isinstance(sequential, dict) and "looks" in sequential:
        first = sequential.get("first_look") or 0
        runs = [(point, rep) for rep in range(1, first + 1) for point in sequential.get("points") or []]
        for look in sequential.get("looks") or []:
            runs += [(point, look["round"] + 1) for point in look.get("next_points") or []]
        return list(dict.fromkeys(runs))
    if manifest.get("run_order"):
        return list(dict.fromkeys((run["point"], run["repetition"]) for run in manifest["run_order"]))
    return [(p["id"], rep) for p in manifest.get("points") or [] for rep in range(1, p.get("repetitions", 1) + 1)]

