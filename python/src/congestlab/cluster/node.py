"""What a cluster node does with one unit of points (a Ray task; cluster/driver.py).

It first removes its own stale testbeds (namespaces whose owning process died, e.g. a
worker killed mid-point), then runs the unit's (point, repetition) pairs with the
ordinary StudyRun (runner/orchestrator.py) into a node-local work directory, and streams the result back
as a generator: first a description of the node and what ran, then the bytes of one tar
of points/ and logs/ in chunks (the head writes them into the study directory). The work
directory is removed at the end, whatever happened. No Ray import here.
"""

from __future__ import annotations

import io
import json
import os
import platform
import shutil
import socket
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from congestlab.errors import CongestlabError, Interrupted
from congestlab.runner import StudyRun
from congestlab.testbed.namespaces import clean_leftovers, pid_alive

CHUNK_BYTES = 4 << 20  # pcaps can be large: never one object for a whole unit
WORKDIR_ENV = "CONGESTLAB_WORKDIR"  # node-local parent of the work directories (default: the temp dir)


WORK_PREFIX = "congestlab-unit-"
OWNER_FILE = ".owner"  # the PID of the task's worker process


def work_parent() -> Path:
    return Path(os.environ.get(WORKDIR_ENV) or tempfile.gettempdir())


def clean_work_dirs() -> list[Path]:
    """Work directories of tasks whose worker process died (killed with its driver, or a
    crash): a node removes them before it takes new work; `congestlab clean` too."""
    removed = []
    for work in sorted(work_parent().glob(WORK_PREFIX + "*")):
        if work.suffix == ".tar":
            continue
        pid = _owner_pid(work)
        if pid is not None and not pid_alive(pid):
            shutil.rmtree(work, ignore_errors=True)
            work.with_name(work.name + ".tar").unlink(missing_ok=True)
            removed.append(work)
    return removed


def _owner_pid(work: Path) -> int | None:
    """The PID of the worker that made a work directory: in its name, which it gets as it is
    made (a worker killed between making it and writing its .owner left one nobody removed);
    else, for a directory named before, its .owner file."""
    head = work.name[len(WORK_PREFIX):].split("-", 1)[0]
    if head.isdigit():
        return int(head)
    try:
        return int((work / OWNER_FILE).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def node_identity(node_id: str = "") -> dict:
    if not node_id:

        if "ray" in sys.modules:  # inside a Ray task: the node it runs on
            node_id = sys.modules["ray"].get_runtime_context().get_node_id()
    return {"hostname": socket.gethostname(), "kernel": platform.release(), "machine": platform.machine(),
            "node_id": node_id, "pid": os.getpid()}


def run_unit(study, quick: bool, runs: list[tuple[str, int]], tag: str, calibrate: bool,
             node_id: str = "", chunk_bytes: int = CHUNK_BYTES) -> Iterator[object]:
    """`study`: the StudySpec itself (pickled by Ray; its JSON dump, with every default
    filled in, does not validate again). Yields: one dict (node, the node run's manifest, error or None), then bytes chunks
    of a tar holding points/ and logs/ of the work directory."""
    cleaned = clean_leftovers()  # the node's testbeds whose owner died (never a live one)
    cleaned += [str(p) for p in clean_work_dirs()]
    parent = work_parent()
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-", dir=parent))
    try:
        (work / OWNER_FILE).write_text(f"{os.getpid()}\n")
        (work / "logs").mkdir()
        study_run = StudyRun(study, work, quick=quick, calibrate=calibrate, runs=[tuple(r) for r in runs],
                             analyze=False, tag=tag, argv=["congestlab-node", tag],
                             console=Console(file=io.StringIO()))
        error = None
        try:
            study_run.run()
        except Interrupted:
            raise  # cancelled: torn down by the StudyRun, nothing shipped
        except CongestlabError as err:  # its finished repetitions still count
            error = f"{type(err).__name__}: {err}"
        identity = node_identity(node_id) | {"work_dir": str(work), "cleaned_namespaces": cleaned,
                                             "environment": study_run.manifest.get("environment"),
                                             "tools": study_run.manifest.get("tools"),
                                             "calibration": study_run.manifest.get("calibration")}
        yield {"node": identity, "manifest": json.loads(json.dumps(study_run.manifest, default=str)), "error": error}
        bundle = work.parent / (work.name + ".tar")
        try:
            with tarfile.open(bundle, "w") as tar:
                for top in ("points", "logs"):  # (not the owner file)
                    if (work / top).exists():
                        tar.add(work / top, arcname=top)
            with open(bundle, "rb") as fh:
                while chunk := fh.read(chunk_bytes):
                    yield chunk
        finally:
            bundle.unlink(missing_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
