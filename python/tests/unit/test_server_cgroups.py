"""A server instance's own cgroup (testbed/cgroups.py) on the host's real cgroup v1 hierarchy:
what it starts is inside from its first instruction, a daemonized child cannot escape a stop,
its CPU time counts every task. Each test's cgroups have a random run prefix of their own and
are removed after it; needs root (skipped otherwise)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from congestlab.testbed.cgroups import CGROUP_ROOT, CONTROLLERS, NAME_RE, ServerCgroup, cgroups_available, run_cgroups

pytestmark = pytest.mark.skipif(
    not cgroups_available() or not os.access(CGROUP_ROOT / "pids", os.W_OK),
    reason="needs the cgroup v1 cpuacct, pids and freezer controllers writable under /sys/fs/cgroup (root)")


@pytest.fixture
def make_cgroup():
    """ServerCgroup factory under one random run prefix; every cgroup made is removed after."""
    prefix = f"cl{secrets.token_hex(3)}"
    made: list[ServerCgroup] = []

    def make(server: str = "web-i1") -> ServerCgroup:
        cgroup = ServerCgroup(f"{prefix}-{server}")
        cgroup.create()
        made.append(cgroup)
        return cgroup

    make.prefix = prefix
    yield make
    for cgroup in made:
        cgroup.remove()


def _alive(pid: int) -> bool:
    """Running (a zombie left unreaped by a parent that is not ours counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_for(path: Path, timeout_s: float = 5.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} was not written in {timeout_s} s")


def test_a_process_started_through_wrap_is_in_the_cgroup(make_cgroup):
    cgroup = make_cgroup()
    proc = subprocess.Popen(cgroup.wrap(["sleep", "30"]))
    try:
        deadline = time.monotonic() + 5
        while proc.pid not in cgroup.pids() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert cgroup.pids() == [proc.pid]  # the shell exec'd sleep: one task, the one Popen started
        lines = Path(f"/proc/{proc.pid}/cgroup").read_text().splitlines()
        for controller in CONTROLLERS:
            assert any(line.split(":")[1].split(",").count(controller) and
                       line.split(":")[2] == f"/congestlab/{cgroup.name}" for line in lines), (controller, lines)
        assert Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[0] == b"sleep"
    finally:
        proc.kill()
        proc.wait()


def test_wrap_passes_arguments_through_unchanged(make_cgroup, tmp_path):
    cgroup = make_cgroup()
    out = tmp_path / "argv.txt"
    args = ["a b", "$HOME", "'quoted'", "--flag=1;echo no"]
    code = "import sys; open(sys.argv[1], 'w').write(repr(sys.argv[2:]))"
    subprocess.run(cgroup.wrap([sys.executable, "-c", code, str(out), *args]), check=True)
    assert out.read_text() == repr(args)


def test_a_daemonized_child_is_killed_with_its_cgroup(make_cgroup, tmp_path):
    cgroup = make_cgroup()
    pid_file = tmp_path / "daemon.pid"
    # double fork and a new session: the daemon's parent exits, it is no child of ours
    daemon = f"setsid sh -c 'sleep 300 & echo $! > {pid_file}' & wait"
    subprocess.run(cgroup.wrap(["sh", "-c", daemon]), check=True, timeout=10)
    pid = int(_wait_for(pid_file))
    assert _alive(pid) and pid in cgroup.pids()
    assert os.getsid(pid) != os.getsid(0)
    assert cgroup.kill_all() == [pid]
    assert not _alive(pid) and cgroup.pids() == []
    assert cgroup.kill_all() == []  # nothing left: nothing to freeze or kill


def test_remove_kills_what_is_left_and_leaves_no_directory(make_cgroup, tmp_path):
    cgroup = make_cgroup()
    pid_file = tmp_path / "daemon.pid"
    subprocess.run(cgroup.wrap(["sh", "-c", f"setsid sh -c 'sleep 300 & echo $! > {pid_file}' & wait"]), check=True,
                   timeout=10)
    pid = int(_wait_for(pid_file))
    assert all(cgroup.path(c).is_dir() for c in CONTROLLERS)
    cgroup.remove()
    assert not _alive(pid)
    assert not any(cgroup.path(c).exists() for c in CONTROLLERS)
    assert cgroup.usage_ns() is None and cgroup.pids() == []
    cgroup.remove()  # a second remove (clean after a stop) finds nothing to do


def test_usage_grows_with_the_cpu_work_of_every_task(make_cgroup):
    cgroup = make_cgroup()
    before = cgroup.usage_ns()
    assert before is not None
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    # two tasks, one of them a child of the other: the cgroup counts both
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {busy!r}]); exec({busy!r})"
    subprocess.run(cgroup.wrap([sys.executable, "-c", parent]), check=True, timeout=30)
    used_ns = cgroup.usage_ns() - before
    assert used_ns >= 0.55e9, used_ns
    idle = make_cgroup("idle-i1")
    subprocess.run(idle.wrap(["sleep", "0.3"]), check=True)
    assert idle.usage_ns() < 0.1e9  # waiting costs (next to) nothing


@pytest.mark.parametrize("name", [
    "cl12345-web",  # the run prefix is 6 hex digits
    "cl1234567-web",
    "cl12345g-web",
    "CL123456-web",
    "cl123456web",  # no separator
    "cl123456-",  # no server
    "cl123456-Web",
    "cl123456-web/../../x",
    "../cl123456-web",
    "cl123456-web i1",
])
def test_a_bad_name_is_refused(name):
    assert not NAME_RE.match(name)
    with pytest.raises(ValueError, match="is not <run prefix>-<server>-<instance>"):
        ServerCgroup(name)


def test_a_good_name_names_its_run_prefix():
    assert NAME_RE.match("cl0a1b2c-web-i1.2_x").group(1) == "cl0a1b2c"
    assert ServerCgroup("cl0a1b2c-web").path("pids") == CGROUP_ROOT / "pids" / "congestlab" / "cl0a1b2c-web"


def test_run_cgroups_lists_each_runs_cgroups_by_prefix(make_cgroup):
    mine = {make_cgroup(server).name for server in ("web-i1", "web-i2", "lean-i1")}
    other_prefix = f"cl{secrets.token_hex(3)}"
    other = ServerCgroup(f"{other_prefix}-web-i1")
    other.create()
    try:
        listed = run_cgroups()
        assert sorted(listed[make_cgroup.prefix]) == sorted(mine)
        assert listed[other_prefix] == [other.name]
    finally:
        other.remove()
    assert other_prefix not in run_cgroups()
    # a directory under congestlab/ that is no server's cgroup is not listed
    stray = CGROUP_ROOT / "pids" / "congestlab" / f"not-{make_cgroup.prefix}"
    stray.mkdir()
    try:
        assert all(f"not-{make_cgroup.prefix}" not in names for names in run_cgroups().values())
    finally:
        stray.rmdir()
