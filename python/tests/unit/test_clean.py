"""`congestlab clean` (testbed/namespaces.py clean_dead_runs): what a dead run left goes,
owner records included when no namespace is left; a live run's stays."""

from __future__ import annotations

import os
import subprocess

import pytest

from congestlab.cc import ownership
from congestlab.testbed import namespaces


@pytest.fixture
def state(tmp_path, monkeypatch):
    owners = tmp_path / "owners"
    owners.mkdir()
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(namespaces, "OWNERS_DIR", owners)
    monkeypatch.setattr(namespaces.tempfile, "tempdir", str(temp))
    monkeypatch.setattr(namespaces, "list_namespaces", lambda: [])  # never touch the machine's namespaces
    # nor its cgroups: a cgroup of test_server_cgroups.py on the other xdist worker has no owner
    # record, and a clean of the real hierarchy removed it under that test (flaky)
    monkeypatch.setattr(namespaces, "run_cgroups", lambda: {})
    return owners, temp


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_owner_records_without_namespaces_go_when_their_owner_is_dead(state):
    owners, temp = state
    namespaces.record_owner("cl00live", "/runs/live")  # this process: alive
    (owners / "cl00dead").write_text(f"{_dead_pid()}\n/runs/dead\n")  # killed between record and build
    # our PID, but another process's start time: the PID was handed on, the owner is gone
    (owners / "cl00reuse").write_text(f"{os.getpid()}\n/runs/reuse\n1\n")
    (owners / "cl00old").write_text(f"{os.getpid()}\n/runs/old\n")  # a record from before start times
    for prefix in ("cl00live", "cl00dead", "cl00gone"):
        (temp / f"congestlab-{prefix}-docroot-abc").mkdir()
    cleaned = namespaces.clean_dead_runs()
    assert cleaned.namespaces == []
    assert cleaned.owner_records == ["cl00dead", "cl00reuse"]
    assert sorted(p.name for p in owners.iterdir()) == ["cl00live", "cl00old"]
    assert sorted(os.path.basename(p) for p in cleaned.temp_dirs) == ["congestlab-cl00dead-docroot-abc",
                                                                       "congestlab-cl00gone-docroot-abc"]
    assert (temp / "congestlab-cl00live-docroot-abc").is_dir()
    assert "owner record cl00live" in namespaces.clean_leftovers(include_running=True)  # --all
    assert list(owners.iterdir()) == [] and list(temp.iterdir()) == []


def test_owner_alive_checks_the_start_time(state):
    namespaces.record_owner("cl00me", "/runs/me")
    lines = (state[0] / "cl00me").read_text().split("\n")
    assert lines[0] == str(os.getpid()) and lines[2].isdigit()
    assert namespaces.owner_alive("cl00me")
    assert not namespaces.owner_alive("cl00none")


def test_a_dead_runs_struct_ops_goes_unless_a_live_run_uses_it_or_it_was_registered_again(tmp_path, monkeypatch):
    """cc/ownership.py's decisions, with the kernel's registrations faked (the real ones:
    python/tests/netns/test_clean_bpf_netns.py)."""
    registered = {"ccdead": 7, "ccshared": 8, "ccagain": 12}  # kernel name -> map id now
    removed: list[str] = []
    monkeypatch.setattr(ownership, "NOTES_DIR", tmp_path / "bpf")
    monkeypatch.setattr(ownership.registry, "struct_ops_id", lambda name: registered.get(name))
    monkeypatch.setattr(ownership.registry, "remove", lambda name: removed.append(name) or True)

    def note(prefix: str, pid: int, *entries: tuple[str, bool, int | None]) -> None:
        ownership._write(prefix, {"pid": pid, "started": "", "run_dir": "", "struct_ops": [
            {"name": n, "registered": r, "map_id": m} for n, r, m in entries]})

    dead = _dead_pid()
    note("cl00a", dead, ("ccdead", True, 7))
    note("cl00b", dead, ("ccshared", True, 8))
    note("cl00c", os.getpid(), ("ccshared", False, 8))  # live, uses it
    note("cl00d", dead, ("ccagain", True, 11))  # registered again since (id 12)
    note("cl00e", dead, ("ccnoted", True, None))  # killed before registering: nothing there
    note("cl00f", dead, ("ccdead", False, 7))  # used, not registered: never removed by this note
    cleaned = ownership.clean_dead_registrations()
    assert removed == ["ccdead"] and cleaned.removed == ["ccdead (map id 7, run cl00a)"]
    assert cleaned.kept == ["ccshared (run cl00b): a live run uses it"]
    assert sorted(p.stem for p in (tmp_path / "bpf").glob("*.json")) == ["cl00b", "cl00c"]
