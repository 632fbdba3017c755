"""--resume after the worst crash: the run's process SIGKILLed half way (no teardown at
all), `congestlab clean`, then `--resume` runs exactly the missing repetitions."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

import cli_fork
import pytest
from spine_helpers import namespaces_with, processes_mentioning, write_mini_spec

pytestmark = pytest.mark.netns


def _snapshot(rep_dir: Path) -> dict[str, tuple[int, str]]:
    """Every file of a repetition: mtime (ns) and sha256."""
    return {str(f.relative_to(rep_dir)): (f.stat().st_mtime_ns, hashlib.sha256(f.read_bytes()).hexdigest())
            for f in sorted(rep_dir.rglob("*")) if f.is_file()}


def _complete(run_dir: Path) -> list[Path]:
    return sorted(p.parent for p in (run_dir / "points").glob("*/r*/rep.json"))


def test_resume_after_sigkill(tmp_path):
    spec_path = write_mini_spec(tmp_path, repetitions=2)  # 4 points x 2 repetitions
    run_dir = tmp_path / "run"
    proc = cli_fork.start(["run", str(spec_path), "--out", str(run_dir)], tmp_path / "first.log")
    try:
        deadline = time.monotonic() + 150
        while (run_dir.exists() and len(_complete(run_dir)) < 3) or not run_dir.exists():
            assert proc.is_alive(), (tmp_path / "first.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "3 repetitions did not complete in time"
            time.sleep(0.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the worst case: no finally, no teardown
        proc.join()
    first = json.loads((run_dir / "manifest.json").read_text())
    assert first["status"] == "running"  # what a crash leaves
    prefix = first["testbed"]["prefix"]
    kept = {d: _snapshot(d) for d in _complete(run_dir)}
    assert 3 <= len(kept) < 8

    # the crashed testbed is still there; resume refuses until it is cleaned
    refused = cli_fork.run(["run", str(spec_path), "--resume", str(run_dir)], tmp_path / "refused.log", 120)
    if namespaces_with(prefix):
        assert refused.returncode == 7 and "congestlab clean" in refused.stderr, refused.stderr
    cleaned = cli_fork.run(["clean"], tmp_path / "clean.log", 120)
    assert cleaned.returncode == 0, cleaned.stderr
    assert namespaces_with(prefix) == []
    assert processes_mentioning(str(run_dir)) == []

    # another spec is refused in one line, exit 7, and nothing is touched
    other = tmp_path / "other.toml"
    other.write_text(spec_path.read_text().replace("warmup_s = 1.0", "warmup_s = 1.5", 1))
    wrong = cli_fork.run(["run", str(other), "--resume", str(run_dir)], tmp_path / "wrong.log", 120)
    assert wrong.returncode == 7 and len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr
    assert "another spec" in wrong.stderr

    t0 = time.monotonic()
    resumed = cli_fork.run(["run", str(spec_path), "--resume", str(run_dir)], tmp_path / "resumed.log", 300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    print(f"resume of {8 - len(kept)} repetitions: {time.monotonic() - t0:.1f} s")

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert manifest["runs_done"] == manifest["runs_total"] == 8
    (entry,) = manifest["resumes"]
    assert entry["previous_status"] == "running" and entry["previous_prefix"] == prefix
    assert entry["kept"] == len(kept) and len(entry["ran"]) == 8 - len(kept) and entry["status"] == "complete"
    # every repetition exactly once; the kept ones untouched
    reps = _complete(run_dir)
    assert len(reps) == 8 and {(d.parent.name, d.name) for d in reps} == {
        (p["id"], f"r{r}") for p in manifest["points"] for r in (1, 2)}
    for rep_dir, snapshot in kept.items():
        assert _snapshot(rep_dir) == snapshot, rep_dir
    assert all(not any(d.glob("*.tmp")) for d in reps)
    with open(run_dir / "results" / "request.csv") as fh:
        rows = list(csv.DictReader(fh))
    counts = Counter((r["point_id"], r["repetition"], r["family"]) for r in rows)
    assert len(counts) == 4 * 2 * 2 and set(counts.values()) == {1}, counts
    assert all(r["ok"] == "True" for r in rows)
    assert (run_dir / "report.md").exists()
    # nothing left behind by either process
    assert namespaces_with(prefix) == [] and namespaces_with(entry["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == []
    assert list(Path(tempfile.gettempdir()).glob(f"congestlab-{prefix}-docroot-*")) == []
    assert list(Path(tempfile.gettempdir()).glob(f"congestlab-{entry['prefix']}-docroot-*")) == []
