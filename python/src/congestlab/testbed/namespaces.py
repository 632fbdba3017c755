"""Namespace lifecycle: ownership records, killing by PID, deletion, and `clean`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.testbed.cgroups import ServerCgroup, run_cgroups
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
    """Who owns the testbed `prefix`: PID, run directory and the process's start time (so a
    PID the kernel hands to another process later does not keep the record alive)."""
    OWNERS_DIR.mkdir(parents=True, exist_ok=True)
    (OWNERS_DIR / prefix).write_text(f"{os.getpid()}\n{run_dir}\n{process_start_time(os.getpid())}\n")


def set_owner_field(prefix: str, name: str, value: str) -> None:
    """An extra `name value` line of the owner record (after its three lines); an empty value
    removes it. `probes`: the BPF samplers' "pid:start time" (runner/captures.py), so `clean`
    finds a sampler that outlived its run."""
    path = OWNERS_DIR / prefix
    try:
        lines = path.read_text().split("\n")
    except OSError:
        return
    head = (lines[:3] + [""] * 3)[:3]
    extra = [line for line in lines[3:] if line.strip() and line.split(" ", 1)[0] != name]
    if value:
        extra.append(f"{name} {value}")
    path.write_text("\n".join(head + extra) + "\n")


def owner_field(prefix: str, name: str) -> str:
    """An extra line's value of the owner record ("" when absent)."""
    try:
        lines = (OWNERS_DIR / prefix).read_text().split("\n")
    except OSError:
        return ""
    for line in lines[3:]:
        key, _, value = line.partition(" ")
        if key == name:
            return value.strip()
    return ""


def process_tag(pid: int) -> str:
    """"pid:start time": names one process, never a later one that reuses the PID."""
    return f"{pid}:{process_start_time(pid)}"


def kill_tagged(tags: str) -> list[str]:
    """Kill the processes of space-separated process_tag()s that are still those processes."""
    killed = []
    for tag in tags.split():
        pid_text, _, started = tag.partition(":")
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        if pid_alive(pid) and process_start_time(pid) == started:
            kill_pids([pid])
            killed.append(tag)
    return killed


def forget_owner(prefix: str) -> None:
    (OWNERS_DIR / prefix).unlink(missing_ok=True)


def owner_alive(prefix: str) -> bool:
    try:
        lines = (OWNERS_DIR / prefix).read_text().split("\n")
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return False
    started = lines[2].strip() if len(lines) > 2 else ""
    return process_alive(pid, started)


def process_alive(pid: int, started: str = "") -> bool:
    """The process `pid` lives and, if `started` is given, is the one that started then (not a
    later process the kernel gave the same PID)."""
    return pid_alive(pid) and (not started or started == process_start_time(pid))


def process_start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


@dataclass
class Cleaned:
    """What `clean` removed."""

    namespaces: list[str] = field(default_factory=list)
    owner_records: list[str] = field(default_factory=list)
    temp_dirs: list[str] = field(default_factory=list)
    samplers: list[str] = field(default_factory=list)  # "pid:start time" of BPF samplers killed
    cgroups: list[str] = field(default_factory=list)  # server cgroups removed, their tasks killed

    def all(self) -> list[str]:
        return (self.namespaces + [f"owner record {p}" for p in self.owner_records] + self.temp_dirs
                + [f"sampler {t}" for t in self.samplers] + [f"cgroup {c}" for c in self.cgroups])


def clean_dead_runs(include_running: bool = False) -> Cleaned:
    """Delete what congestlab runs whose owning process is gone left on the host: their
    namespaces (with every process in them), their owner records (also the ones without a
    namespace: an owner killed between recording itself and building, or between deleting
    its namespaces and its record) and the servers' temporary docroots. A live run's are
    kept unless `include_running`."""
    out = Cleaned()
    dead: set[str] = set()
    for ns in list_namespaces():
        match = NAMESPACE_RE.match(ns)
        if not match:
            continue
        prefix = match.group(1)
        if not include_running and owner_alive(prefix):
            continue
        delete_namespace(ns)
        out.namespaces.append(ns)
        dead.add(prefix)
    records = sorted(p.name for p in OWNERS_DIR.iterdir() if p.is_file()) if OWNERS_DIR.is_dir() else []
    for prefix in records:
        if prefix in dead or include_running or not owner_alive(prefix):
            # a BPF sampler holds its programs while it lives (runner/captures.py)
            out.samplers += kill_tagged(owner_field(prefix, "probes"))
            forget_owner(prefix)
            out.owner_records.append(prefix)
            dead.add(prefix)
    # the servers' cgroups (testbed/cgroups.py), with any task left in them (a daemonized child)
    for prefix, names in run_cgroups().items():
        if prefix in dead or not owner_alive(prefix):
            for name in names:
                ServerCgroup(name).remove()
                out.cgroups.append(name)
    # the web servers' temporary docroots (runner/servers.py): of the runs cleaned, and
    # of any run that has no live owner any more
    for docroot in sorted(Path(tempfile.gettempdir()).glob("congestlab-*-docroot-*")):
        prefix = docroot.name.removeprefix("congestlab-").split("-docroot-")[0]
        if prefix in dead or not owner_alive(prefix):
            shutil.rmtree(docroot, ignore_errors=True)
            out.temp_dirs.append(str(docroot))
    return out


def clean_leftovers(include_running: bool = False) -> list[str]:
    """clean_dead_runs, as one list of what was removed (namespaces first)."""
    return clean_dead_runs(include_running).all()
