"""Where commands write (docs/testing.md, "Hostile inputs"): every --out by one set of rules
(congestlab/rundir/out_paths.py: new or empty, no symbolic link, its folder there), a full disk
or a read-only mount under a run (root: a small tmpfs of the test's own), and a user without
root reading a root-owned run directory."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from series_fixtures import panels_run
from hostile_fixtures import DATA, PRESET, one_line, run_cli

from congestlab import study
from congestlab.cli.os_errors import os_error_line
from congestlab.errors import RunDirError
from congestlab.rundir import prepare_out_dir
from congestlab.runner import StudyRun, orchestrator
from congestlab.spec import load_preset

POINT = "main.server-apache.level-C1B"
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs of its own (root)")


@pytest.fixture(scope="module")
def panels(tmp_path_factory):
    return panels_run(tmp_path_factory.mktemp("panels") / "run", {("apache", "v4"): [50.0, 60.0]})


def test_plot_never_writes_through_a_link_nor_makes_folders(panels, tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("mine")
    link = tmp_path / "link.png"
    link.symlink_to(target)
    one_line(*run_cli("plot", str(panels), POINT, "--out", str(link))[::2], 7, "is a symbolic link")
    assert target.read_text() == "mine"
    one_line(*run_cli("plot", str(panels), POINT, "--out", str(tmp_path / "no" / "dir" / "x.png"))[::2], 7,
             "does not exist; create it first")
    assert not (tmp_path / "no").exists()
    (tmp_path / "d.png").mkdir()
    one_line(*run_cli("plot", str(panels), POINT, "--out", str(tmp_path / "d.png"))[::2], 7, "not a regular file")
    assert run_cli("plot", str(panels), POINT, "--out", str(tmp_path / "ok.svg"))[0] == 0
    assert (tmp_path / "ok.svg").read_text().startswith("<?xml")


def test_compare_out_is_new_or_empty_and_no_link(tmp_path):
    run = DATA / "ipv6-quick-run"
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    for out, words in [(full, "not empty"), (tmp_path / "link", "is a symbolic link"),
                       (tmp_path / "no" / "cmp", "does not exist")]:
        one_line(*run_cli("compare", str(run), str(run), "--out", str(out))[::2], 7, words)
    assert [p.name for p in full.iterdir()] == ["keep.txt"] and not any(elsewhere.iterdir())
    assert not (tmp_path / "no").exists()


def test_a_runs_out_makes_one_directory_not_its_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunDirError, match="does not exist"):
        prepare_out_dir(Path("a/b/c"))
    assert not (tmp_path / "a").exists()
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    with pytest.raises(RunDirError, match="symbolic link"):
        prepare_out_dir(Path("link"))
    assert prepare_out_dir(Path("empty")) == tmp_path / "empty" and (tmp_path / "empty" / "logs").is_dir()


def test_sensitivity_and_suite_out_follow_the_same_rules(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path)
    one_line(*run_cli("reproduce", "dissertation", "--quick", "--dry-run", "--out", str(tmp_path / "link"))[::2], 7,
             "symbolic link")
    from congestlab.sensitivity.sweep_run import _open_parent, sensitivity_sweep
    from congestlab.sensitivity.configurations import parse_axis_option

    sweep = sensitivity_sweep("cc-share", [parse_axis_option("warmup_s=0,1")], True)
    for out, words in [(tmp_path / "link", "symbolic link"), (tmp_path / "no" / "x", "does not exist")]:
        with pytest.raises(RunDirError, match=words):
            _open_parent(out, sweep)


# --- a full disk, a read-only mount: the run says how it ended, no manifest.json.tmp ----------

@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def started_run(run_dir: Path, monkeypatch, testbed) -> StudyRun:
    """A StudyRun of cc-share whose testbed part is `testbed(run)` (no namespaces)."""
    run_dir.mkdir()
    run = StudyRun(load_preset("cc-share"), run_dir, quick=True, analyze=False)
    monkeypatch.setattr(orchestrator, "require_root", lambda: None)
    monkeypatch.setattr(run, "_run_testbed", lambda: testbed(run))
    return run


def fill(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        while True:
            fh.write(b"\0" * 65536)  # until ENOSPC


@as_root
def test_a_full_disk_marks_the_run_failed_and_leaves_no_temporary_file(small_disk, monkeypatch):
    run_dir = small_disk / "run"

    def capture_fills_the_disk(run):  # a repetition's capture takes the last byte
        point, rep = run.runs[0]
        fill(run_dir / "points" / point.id / f"r{rep}" / "pcap" / "s1.pcap")

    run = started_run(run_dir, monkeypatch, capture_fills_the_disk)
    with pytest.raises(RunDirError) as err:
        run.run()
    assert "No space left on device" in str(err.value) and "--resume" in str(err.value)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "No space left on device" in manifest["error"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["manifest.json", "points"]
    assert not list(run_dir.glob("points/*/r*")), "the unfinished repetition made room for the manifest"


@as_root
def test_a_disk_filled_by_others_still_leaves_no_temporary_file(small_disk, monkeypatch):
    run_dir = small_disk / "run"

    def others_fill_the_disk(run):
        fill(small_disk / "someone-else.bin")

    run = started_run(run_dir, monkeypatch, others_fill_the_disk)
    with pytest.raises(RunDirError, match="cannot be written to say so .* it still says 'running'"):
        run.run()
    assert not (run_dir / "manifest.json.tmp").exists()


@as_root
def test_a_read_only_mount(small_disk, monkeypatch, tmp_path):
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    spec = tmp_path / "spec.toml"
    spec.write_text(PRESET)

    def no_run(*args, **kwargs):
        raise AssertionError("a run started")

    monkeypatch.setattr(study, "StudyRun", no_run)  # nothing may start: the --out cannot be made
    one_line(*run_cli("run", str(spec), "--out", str(small_disk / "x"))[::2], 7, "Read-only file system")
    monkeypatch.undo()
    subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)

    def remounted(run):  # read-only from the middle of a run on
        subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
        (run.run_dir / "points" / "x").mkdir()

    run = started_run(small_disk / "run", monkeypatch, remounted)
    with pytest.raises(RunDirError, match="Read-only file system"):
        run.run()
    assert not (small_disk / "run" / "manifest.json.tmp").exists()


# --- a user without root: one line saying what and how to go on --------------------------------

def test_a_permission_problem_is_one_line_saying_whose_and_how_to_go_on(tmp_path):
    line = os_error_line(PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "plots")))
    assert "permission denied" in line and "it belongs to root" in line and "with sudo" in line and "cp -r" in line
    full = os_error_line(OSError(errno.ENOSPC, "No space left on device", "/x/results"))
    assert full.startswith("/x/results: No space left on device: free space")
    assert os_error_line(OSError(errno.EBADF, "Bad file descriptor")) is None  # a bug: seen whole


def _nobody_runs_this_python() -> bool:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return False
    return subprocess.run(["runuser", "-u", "nobody", "--", sys.executable, "-c", "pass"],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(not _nobody_runs_this_python(), reason="needs root, runuser, and a Python the user nobody may run "
                    "(`congestlab doctor`, non-root: make venv picks one)")
def test_nobody_reads_a_root_owned_run():
    parent = Path(tempfile.mkdtemp(prefix="congestlab-nobody-"))  # (pytest's tmp_path is root's only)
    try:
        parent.chmod(0o755)
        run = parent / "run"
        shutil.copytree(DATA / "ipv6-quick-run", run)
        env = os.environ | {"PYTHONPATH": os.pathsep.join(sys.path), "HOME": "/nonexistent"}
        spec = parent / "spec.toml"
        spec.write_text(PRESET)

        def as_nobody(*argv):
            return subprocess.run(["runuser", "-u", "nobody", "--", sys.executable, "-m", "congestlab.cli", *argv],
                                  capture_output=True, text=True, env=env, cwd=parent, timeout=300)

        done = as_nobody("distance", str(run))
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert as_nobody("run", str(spec), "--dry-run").returncode == 0
        done = as_nobody("report", str(run))
        one_line(done.returncode, done.stderr, 7, "permission denied", "belongs to root", "runs as nobody", "sudo")
    finally:
        shutil.rmtree(parent)
