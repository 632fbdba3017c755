"""The run directory: the contract between running and reporting (docs/data-format.md)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from congestlab.errors import RunDirError
from congestlab.paths import REPO_ROOT

FORMAT_VERSION = 2
# the records.jsonl kind of a GET as curl saw it (workloads/get.py); the analysis measures it in the capture
RAW_KIND = "get_raw"


def utc_now() -> str:
    """A manifest's timestamps (started_utc, finished_utc, ...)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def new_run_dir(base: Path, name: str, prefix: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    # absolute: servers and tools started in namespaces get these paths (Apache would read a
    # relative config path against its own ServerRoot)
    path = (base / f"{name}-{stamp}-{prefix}").absolute()
    path.mkdir(parents=True, exist_ok=False)
    (path / "logs").mkdir()
    return path


def prepare_out_dir(out: Path) -> Path:
    """`--out DIR`: DIR must be new or empty, so a run never mixes with an older one.
    Returns it absolute (see new_run_dir)."""
    out = out.absolute()
    if out.exists() and any(out.iterdir()):
        raise RunDirError(f"{out}: exists and is not empty; choose a new --out")
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    return out


def write_manifest(run_dir: Path, manifest: dict) -> None:
    tmp = run_dir / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, run_dir / "manifest.json")


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


def read_manifest(run_dir: Path, require_complete: bool = True) -> dict:
    path = Path(run_dir) / "manifest.json"
    if not Path(run_dir).is_dir():
        raise RunDirError(f"{run_dir}: no such directory")
    if not path.exists():
        raise RunDirError(f"{run_dir}: no manifest.json (not a congestlab run directory)")
    try:
        manifest = json.loads(path.read_bytes())
    except (ValueError, OSError) as err:
        raise RunDirError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(manifest, dict):
        raise RunDirError(f"{path}: damaged manifest: {_shape_problem(manifest)}")
    version = manifest.get("format_version")
    if version == FORMAT_VERSION:
        problem = _shape_problem(manifest)
        if problem:
            raise RunDirError(f"{path}: damaged manifest: {problem}")
    if version != FORMAT_VERSION:
        raise RunDirError(f"{path}: format_version {version!r}, this congestlab reads {FORMAT_VERSION}")
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


def completed_repetitions(run_dir: Path) -> list[tuple[str, int, Path]]:
    """(point id, repetition, directory) of every repetition that wrote its rep.json."""
    out = []
    for rep_json in sorted(Path(run_dir).glob("points/*/r*/rep.json")):
        rep_dir = rep_json.parent
        out.append((rep_dir.parent.name, int(rep_dir.name[1:]), rep_dir))
    return out
