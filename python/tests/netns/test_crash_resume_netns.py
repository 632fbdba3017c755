"""A run survives being SIGKILLed at any moment: one two-point study (apache at C0 and at
20 Mbit/s of MGEN, 2 repetitions) is killed at 10 moments: set-up, a server's start (before its
ready check), a measured GET, warm-up, the capture's stop, the repetition's record write
(records.jsonl written, rep.json not), between two repetitions, the testbed's teardown (some
namespaces deleted), analysis and the report; each time `congestlab clean` then `--resume`. The
result equals an uninterrupted run's, its time budget counts every repetition once, and clean
leaves nothing of any kill.

Most moments are recognised from outside (namespaces, files of the run directory, the
manifest, a curl or mgen process of the run). Three are too short to catch by polling (the
capture's stop follows the last GET by 0.2 s; a server's start and a record write take
milliseconds): there the run pauses itself (CONGESTLAB_PAUSE_AT, read only in
runner/host.py)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path

import cli_fork
import pytest
from spine_helpers import mini_spec_text, namespaces_with

pytestmark = pytest.mark.netns

OWNERS_DIR = Path("/run/congestlab")
POLL_S = 0.005


def _two_point_spec(directory: Path) -> Path:
    # the largest file apache serves (504 KiB, ~45 ms at 100 Mbit/s) so the test sees its curl run
    text = mini_spec_text(repetitions=2).replace('values = ["apache", "lean"]', 'values = ["apache"]', 1)
    text = text.replace('server = "apache", file_kib = 320', 'server = "apache", file_kib = 504', 1)
    assert 'values = ["apache"]' in text and "file_kib = 504" in text
    path = directory / "two.toml"
    path.write_text(text)
    return path


def _manifest(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):  # not there yet, or being replaced
        return {}


def _start_time(pid: int) -> str | None:
    """Start time in clock ticks (/proc/PID/stat field 22); None for a gone or zombie process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]


def _processes() -> dict[int, tuple[int, str]]:
    """PID -> (parent PID, command name) of every process, from one pass over /proc."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                head, tail = (entry / "stat").read_text().rsplit(") ", 1)
            except (OSError, ValueError):
                continue
            out[int(entry.name)] = (int(tail.split()[1]), head.split(" (", 1)[1])
    return out


def _descendants(root: int) -> dict[int, str]:
    """PID -> command name of every process under `root`."""
    procs = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = procs[child][1]
            todo.append(child)
    return found


def _testbed_pids(prefix: str) -> set[int]:
    pids: set[int] = set()
    for ns in namespaces_with(prefix):
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
        pids |= {int(p) for p in out.split()}
    return pids


class Attempt:
    """One `congestlab run` process (fresh or --resume) and the testbed it builds; forked
    from a process that imported the command line already (cli_fork.py: the imports of this
    test's 23 commands took about 50 s)."""

    def __init__(self, tmp: Path, spec: Path, run_dir: Path, n: int, env: dict | None = None):
        self.run_dir = run_dir
        self.log = tmp / f"attempt{n}.log"
        resumes = len(_manifest(run_dir).get("resumes", [])) if n else 0
        where = ["--resume", str(run_dir)] if n else ["--out", str(run_dir)]
        self.proc = cli_fork.start(["run", str(spec), *where], self.log, env)
        # the prefix this process builds with: in the manifest it writes before the testbed
        self.prefix = ""
        self.most_namespaces = 0
        self.wait_for(lambda: len(_manifest(run_dir).get("resumes", [])) == resumes + (1 if n else 0)
                      and _manifest(run_dir).get("status") == "running", 30, "its manifest")
        self.prefix = _manifest(run_dir)["testbed"]["prefix"]

    def saw_namespaces(self, now: int) -> bool:
        """True once the testbed, seen whole, has lost some but not all of its namespaces."""
        self.most_namespaces = max(self.most_namespaces, now)
        return 0 < now < self.most_namespaces

    def wait_for(self, predicate, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert self.proc.is_alive(), f"ended before {what}: " + self.log.read_text()[-2000:]
            assert time.monotonic() < deadline, f"{what} not reached in {timeout_s} s"
            time.sleep(POLL_S)

    def kill(self) -> set[tuple[int, str]]:
        """SIGKILL (no teardown at all); returns every process of the run as (PID, start time)."""
        pids = set(_descendants(self.proc.pid)) | _testbed_pids(self.prefix) | {self.proc.pid}
        known = {(pid, start) for pid in pids if (start := _start_time(pid))}
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.join()
        return known


def _clean_and_check(prefix: str, processes: set[tuple[int, str]], log: Path) -> None:
    cleaned = cli_fork.run(["clean"], log, 60)
    assert cleaned.returncode == 0 and "Traceback" not in cleaned.stderr, cleaned.stderr
    assert namespaces_with(prefix) == [], cleaned.stdout
    assert not (OWNERS_DIR / prefix).exists(), cleaned.stdout
    alive = [pid for pid, start in processes if _start_time(pid) == start]
    assert alive == [], [Path(f"/proc/{p}/cmdline").read_bytes() for p in alive]
    assert list(Path(tempfile.gettempdir()).glob(f"congestlab-{prefix}-docroot-*")) == []
    assert list(Path(tempfile.gettempdir()).glob("congestlab-work-*")) == [] or all(
        prefix not in str(w) for w in Path(tempfile.gettempdir()).glob("congestlab-work-*"))


def _incomplete_rep_dirs(run_dir: Path) -> list[Path]:
    return [d for d in (run_dir / "points").glob("*/r*") if not (d / "rep.json").exists()]


def _request_table(run_dir: Path) -> tuple[list[str], Counter]:
    with open(run_dir / "results" / "request.csv") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    return list(reader.fieldnames or []), Counter((r["point_id"], r["repetition"], r["family"]) for r in rows)


def test_killed_at_every_moment_then_resumed(tmp_path):
    spec = _two_point_spec(tmp_path)
    t0 = time.monotonic()
    reference = tmp_path / "reference"
    done = cli_fork.run(["run", str(spec), "--out", str(reference)], tmp_path / "reference.log", 120)
    assert done.returncode == 0, done.stderr[-3000:]
    timings = {"uninterrupted": time.monotonic() - t0}
    ref_columns, ref_keys = _request_table(reference)
    assert len(ref_keys) == 2 * 2 * 2 and set(ref_keys.values()) == {1}, ref_keys

    run_dir = tmp_path / "run"
    outcomes: list[str] = []

    def is_l20(d: Path) -> bool:
        return "level-L20" in d.parent.name

    moments = [
        # set-up: the testbed's namespaces are being built (the first ones exist, no server yet)
        ("set-up", {}, lambda a: namespaces_with(a.prefix) and not any((run_dir / "points").glob("*/r*"))),
        # a server's start: apache runs in the testbed, its ready check not made yet
        ("server start", {"CONGESTLAB_PAUSE_AT": "server-start"},
         lambda a: "paused at server-start" in a.log.read_text()),
        # a measured GET: curl runs in the testbed while the repetition's capture is open
        ("GET", {}, lambda a: "curl" in _descendants(a.proc.pid).values()
         and any(any((d / "pcap").glob("*.pcap")) for d in _incomplete_rep_dirs(run_dir))),
        # warm-up: MGEN runs, the L20 repetition's directory is made, its capture not started yet
        ("warm-up", {}, lambda a: any(is_l20(d) and (d / "pcap").is_dir() and not any((d / "pcap").iterdir())
                                      for d in _incomplete_rep_dirs(run_dir))
         and "mgen" in _descendants(a.proc.pid).values()),
        # the capture's stop: after the repetition's last GET, before tcpdump stops
        ("capture stop", {"CONGESTLAB_PAUSE_AT": "capture-stop"},
         lambda a: "paused at capture-stop" in a.log.read_text()),
        # the record write: a repetition's records.jsonl written, its rep.json not yet
        ("record write", {"CONGESTLAB_PAUSE_AT": "repetition-write"},
         lambda a: "paused at repetition-write" in a.log.read_text()),
        # between repetitions: the third recorded (rep.json, runs_done), the fourth not begun
        ("between repetitions", {}, lambda a: _manifest(run_dir).get("runs_done") == 3
         and not _incomplete_rep_dirs(run_dir)),
        # teardown: after the last repetition, some of the testbed's namespaces deleted, not all
        ("teardown", {}, lambda a: a.saw_namespaces(len(namespaces_with(a.prefix)))),
        # analysis: every repetition recorded, the testbed torn down (its owner record gone)
        ("analysis", {}, lambda a: _manifest(run_dir).get("runs_done") == _manifest(run_dir).get("runs_total")
         and _manifest(run_dir).get("status") == "running" and not (OWNERS_DIR / a.prefix).exists()),
        # the report: the manifest says complete, report.md is not there yet
        ("report", {}, lambda a: _manifest(run_dir).get("status") == "complete"
         and not (run_dir / "report.md").exists()),
    ]
    for n, (moment, env, reached) in enumerate(moments):
        t = time.monotonic()
        attempt = Attempt(tmp_path, spec, run_dir, n, env)
        attempt.wait_for(partial(reached, attempt), 60, moment)
        before = _manifest(run_dir)
        processes = attempt.kill()
        _clean_and_check(attempt.prefix, processes, tmp_path / f"clean{n}.log")
        timings[moment] = time.monotonic() - t
        outcomes.append(f"{moment}: killed with {before.get('runs_done')}/{before.get('runs_total')} repetitions, "
                        f"status {before.get('status')}, {len(processes)} processes; clean left nothing")

    t = time.monotonic()
    last = cli_fork.run(["run", str(spec), "--resume", str(run_dir)], tmp_path / "last.log", 120)
    timings["final resume"] = time.monotonic() - t
    print("\n" + "\n".join(outcomes))
    print("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    assert last.returncode == 0, last.stderr[-3000:]
    manifest = _manifest(run_dir)
    assert manifest["status"] == "complete" and manifest["runs_done"] == manifest["runs_total"] == 4
    # a killed attempt's entry has no status (nothing ran after the kill), but the one killed in
    # the report: its run had completed
    assert [r.get("status") for r in manifest["resumes"]] == [None] * (len(moments) - 2) + ["complete"] * 2
    # every repetition's time is in the budget exactly once, those of killed attempts too: a
    # running attempt rewrites its budget after each repetition (runner/time_budget.py IN_PROGRESS)
    assert sum(u["runs"] for u in manifest["time_budget"]["units"].values()) == 4
    assert any(s.get("killed") for s in manifest["time_budget_sessions"]) and "time_budget_in_progress" not in manifest
    columns, keys = _request_table(run_dir)
    assert columns == ref_columns
    assert keys == ref_keys  # the same (point, repetition, family) rows, each exactly once
    reps = sorted(p.parent for p in (run_dir / "points").glob("*/r*/rep.json"))
    assert len(reps) == 4 and _incomplete_rep_dirs(run_dir) == []
    assert (run_dir / "report.md").exists()
    _clean_and_check(manifest["testbed"]["prefix"], set(), tmp_path / "clean-last.log")
