"""`congestlab clean` (testbed/namespaces.py clean_dead_runs): what a dead run left goes,
owner records included when no namespace is left; a live run's stays."""

from __future__ import annotations

import os
import subprocess

import pytest

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
