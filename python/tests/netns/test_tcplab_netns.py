"""tcp-lab on real namespaces through the one runner: a tiny spec of the preset (two points
of one experiment, a rate change and a delay change between them, 1 s each) gives a
complete run directory with results/iperf.csv, `congestlab report` rebuilds the report
without root, and nothing is left behind."""

from __future__ import annotations

import csv
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

from congestlab.runner import StudyRun
from congestlab.spec.loader import validate_spec

from spine_helpers import namespaces_with, processes_mentioning

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]
NOBODY = 65534


def tiny_tcp_lab() -> dict:
    """The preset with one experiment: tbf 20 Mbit/s and no delay, then 50 Mbit/s and 10 ms."""
    data = tomllib.loads((resources.files("congestlab.spec.presets") / "tcp-lab.toml").read_text())
    data["experiments"] = [{
        "name": "rate", "workloads": ["iperf"], "set": {"workloads.iperf.duration_s": 1},
        "axes": [{"name": "x", "fields": ["nodes.r.links.sb.tbf_rate_bps", "nodes.r.links.sb.delay_ms"],
                  "values": [[20_000_000, 0], [50_000_000, 10]], "labels": ["20000000", "50000000"]}]}]
    data["quick"] = {}
    data["repetitions"] = 1  # one run per point: the test is about the run, not the claims' n
    data["published"] = [p for p in data["published"] if p["experiment"] == "rate"]
    return data


def test_tiny_tcp_lab_run_results_and_report_without_root(within):
    spec = validate_spec(tiny_tcp_lab(), "tiny tcp-lab")
    # a directory `nobody` may write, for the report
    run_dir = Path(tempfile.mkdtemp(prefix="congestlab-test-tcplab-"))
    try:
        runner = StudyRun(spec, run_dir, preset="tcp-lab")
        runner.run()
        prefix = runner.prefix
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "complete" and manifest["runs_done"] == 2
        assert manifest["tools"]["iperf"].startswith("iperf version 2")
        with open(run_dir / "results" / "iperf.csv", newline="") as fh:
            rows = {r["x"]: r for r in csv.DictReader(fh)}
        assert set(rows) == {"20000000", "50000000"}
        for row in rows.values():
            assert (row["experiment"], row["workload"], row["protocol"], row["session"]) == ("rate", "iperf", "tcp", "1")
            assert float(row["seconds"]) >= 0.9
        # the token bucket's rate, less the headers (1448 of 1514 bytes per frame) and slow start
        within("Mbit/s at tbf 20 Mbit/s", float(rows["20000000"]["throughput_mbps"]), 18.0, 2.5)
        assert 25 <= float(rows["50000000"]["throughput_mbps"]) <= 50
        # between the points: the tbf re-rated and linkem started for the delay
        changes = [c for r in manifest["reconfigurations"] for c in r["changes"]]
        assert any("tbf 50000000" in c for c in changes), changes
        assert any("r/eth1/egress delay 10 ms" in c for c in changes), changes
        rep = json.loads((run_dir / "points" / "rate.x-50000000" / "r1" / "rep.json").read_text())
        assert any(q["kind"] == "tbf" for q in rep["qdiscs"]["r/eth1"].values())
        assert rep["linkem"]["r/eth1/egress"]["delayed"] > 1000  # the 1 s flow went through linkem
        assert namespaces_with(prefix) == [] and processes_mentioning(prefix) == []
        # the report, rebuilt by an unprivileged user from the run directory alone
        for path in [run_dir, *run_dir.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
        (run_dir / "report.md").unlink(missing_ok=True)
        proc = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                               sys.executable, "-m", "congestlab.cli", "report", str(run_dir)],
                              capture_output=True, text=True, timeout=120, env=os.environ | {"HOME": str(run_dir)})
        assert proc.returncode == 0, proc.stderr
        report = (run_dir / "report.md").read_text()
        # the preset's declared report (one engine): Fig. 6's table with the two rates run here
        assert "Fig. 6: link rate varied" in report, report
        rows = [line for line in report.splitlines() if line.startswith("| 20000000 |") or line.startswith("| 50000000 |")]
        assert len(rows) == 2, report
        assert any((run_dir / "plots").glob("*.png"))
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
