"""The anma preset's network and workload, shrunk to one point (Apache, pattern B = 4:1,
200 requests, 20 concurrent, one repetition), through the one runner on real namespaces;
then `congestlab report` rebuilds the report from the run directory as an unprivileged user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from importlib import resources
from pathlib import Path

import pytest
from spine_helpers import namespaces_with, processes_mentioning

from congestlab.results import read_results
from congestlab.study import run_study
from congestlab.spec.loader import validate_spec

pytestmark = pytest.mark.netns

REQUESTS, CONCURRENCY = 200, 20


def tiny_anma_spec():
    data = tomllib.loads((resources.files("congestlab.spec.presets") / "anma.toml").read_text())
    data["repetitions"] = 1
    data["workloads"][0] |= {"requests": REQUESTS, "concurrency": CONCURRENCY}
    server_axis, pattern_axis = data["experiments"][0]["axes"]
    server_axis["values"] = ["apache"]
    pattern_axis |= {"values": [[4, 1]], "labels": ["B"]}
    data["quick"] = {}
    return validate_spec(data, "tiny anma")


def report_as_nobody(run_dir: Path) -> subprocess.CompletedProcess:
    """`congestlab report` on a copy of the run directory, run as `nobody` (no root)."""
    work = Path(tempfile.mkdtemp(prefix="congestlab-anma-report-"))
    work.chmod(0o755)
    copy = work / "run"
    shutil.copytree(run_dir, copy)
    shutil.chown(work, "nobody")
    for path in [copy, *copy.rglob("*")]:
        shutil.chown(path, "nobody")
    env = dict(os.environ, HOME=str(work), MPLCONFIGDIR=str(work / "mpl"))
    try:
        proc = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable,
                               "-m", "congestlab.cli", "report", str(copy)], capture_output=True, text=True,
                              env=env, timeout=120)
        proc.report_md = (copy / "report.md").read_text() if (copy / "report.md").exists() else ""
        proc.plot_bytes = sum(p.stat().st_size for p in (copy / "plots").glob("*.png")) \
            if (copy / "plots").exists() else 0
        return proc
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_tiny_anma_run_and_report_without_root(tmp_path):
    spec = tiny_anma_spec()
    run_dir = tmp_path / "run"
    run_study(spec, out=run_dir, preset="anma")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert namespaces_with(manifest["testbed"]["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == []

    rows = {r["family"]: r for r in read_results(run_dir, "anma")}
    assert set(rows) == {"v6", "v4", "all"}
    # 4:1 round-robin over 200 requests: exactly 160 over IPv6, 40 over IPv4
    assert (int(rows["v6"]["requests"]), int(rows["v4"]["requests"])) == (160, 40)
    for fam, row in rows.items():
        assert row["point_id"] == "main.server-apache.pattern-B" and row["pattern"] == "B"
        assert row["server"] == "apache" and row["repetition"] == "1"
        # a 4 KB file at 20 concurrent over an idle testbed: nothing may fail
        assert int(row["normal"]) == int(row["requests"]), row
        assert 0 < float(row["connect_mean_ms"]) < 1000 and 0 < float(row["continuation_mean_ms"]) < 1000, row
    # the capture at Apache's port saw every one of dualbench's connections
    port = read_results(run_dir, "port")
    assert [r["server"] for r in port] == ["apache"] and int(port[0]["connections"]) == REQUESTS
    logs = run_dir / "points" / "main.server-apache.pattern-B" / "r1" / "logs"
    assert (logs / "anma-anma.addresses").read_text().count("fd00:0:0:4::") == 4
    assert manifest["workloads"]["anma"]["argv"][0][1] == "anma"

    proc = report_as_nobody(run_dir)
    assert proc.returncode == 0, proc.stderr
    # the preset's declared report (one engine): pattern B's row with its 160 IPv6 requests,
    # the findings (claim 20's parts) and plots
    b_rows = [line for line in proc.report_md.splitlines() if line.startswith("| B |")]
    assert b_rows and any("160" in line for line in b_rows), proc.report_md
    assert "## Findings" in proc.report_md and "20a" in proc.report_md
    assert proc.plot_bytes > 1000
