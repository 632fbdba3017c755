"""Namespace lifecycle: ownership records, killing by PID, deletion, and `clean`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from congestlab.testbed.layout import NAMESPACE_RE

OWNERS_DIR = Path(os.environ.get("CONGESTLAB_STATE_DIR", "/run/congestlab"))


def list_namespaces() -> list[str]:
    proc = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def namespace_pids(ns: str) -> list[int]:
    proc = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def kill_pids(pids: list[int], grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL whatever is still alive after `grace_s`."""
    alive = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            alive.append(pid)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if pid_alive(p)]
        if alive:
            time.sleep(0.02)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def stop_processes(procs: list[subprocess.Popen]) -> None:
    """Kill the live ones of our own processes by PID, reap them all, empty the list."""
    kill_pids([p.pid for p in procs if p.poll() is None])
    for proc in procs:
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
    procs.clear()


def pid_alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)  # reap our own children
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def delete_namespace(ns: str) -> None:
    """Kill every process in `ns` by PID, then delete it (a deleted namespace keeps
    its processes running otherwise)."""
    for _ in range(3):
        pids = namespace_pids(ns)
        if not pids:
            break
        kill_pids(pids)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True)


def record_owner(prefix: str, run_dir: str) -> None:
    OWNERS_DIR.mkdir(parents=True, exist_ok=True)
    (OWNERS_DIR / prefix).write_text(f"{os.getpid()}\n{run_dir}\n")


def forget_owner(prefix: str) -> None:
    (OWNERS_DIR / prefix).unlink(missing_ok=True)


def owner_alive(prefix: str) -> bool:
    try:
        pid = int((OWNERS_DIR / prefix).read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return False
    return pid_alive(pid)


def clean_leftovers(include_running: bool = False) -> list[str]:
    """Delete namespaces of congestlab runs whose owning process is gone."""
    removed = []
    prefixes = set()
    for ns in list_namespaces():
        match = NAMESPACE_RE.match(ns)
        if not match:
            continue
        prefix = match.group(1)
        if not include_running and owner_alive(prefix):
            continue
        delete_namespace(ns)
        removed.append(ns)
        prefixes.add(prefix)
    for prefix in prefixes:
        forget_owner(prefix)
        # the web servers' temporary docroots of that run (runner/servers.py)
        for docroot in Path(tempfile.gettempdir()).glob(f"congestlab-{prefix}-docroot-*"):
            shutil.rmtree(docroot, ignore_errors=True)
    return removed
