"""Reports are built from a stored run directory alone; incomplete runs are refused."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from congestlab.errors import RunDirError
from congestlab.report import build_report
from congestlab.report.build import summarize
from congestlab.results import write_results
from congestlab.rundir import FORMAT_VERSION
from congestlab.spec import load_preset
from congestlab.spec.sweep import expand


def _fake_run(tmp_path, status="complete"):
    """A v2 run directory of the ipv6 preset with hand-made results (2 repetitions, apache only)."""
    spec = load_preset("ipv6")
    points = [p for p in expand(spec) if p.labels["server"] == "apache"]
    rows = []
    for p in points:
        for fam in ("v4", "v6"):
            for rep in (1, 2):
                rows.append({"point_id": p.id, "experiment": "main", "repetition": rep, "server": "apache",
                             "level": p.labels["level"], "family": fam, "ok": True, "delay_ms": 30 + rep,
                             "nrt_throughput_mbps": 90 - rep, "captured_throughput_mbps": 91, "goodput_mbps": 80,
                             "retransmissions": rep - 1})
    write_results(tmp_path, "request", ["server", "level"], rows)
    manifest = {"format_version": FORMAT_VERSION, "study": "ipv6", "status": status,
                "spec": spec.model_dump(mode="json"), "axes": ["server", "level"],
                "points": [p.describe() | {"repetitions": 2} for p in points]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


def test_report_has_study_tables_and_plots(tmp_path):
    report = build_report(_fake_run(tmp_path))
    text = report.markdown_path.read_text()
    assert "| C1B | 31.5 ± 0.7 | 31.5 ± 0.7 | 95 | 117 |" in text  # ours beside Table 42's 0.095/0.117 s
    assert "| C2B | 88.50 ± 0.71 | 88.50 ± 0.71 | 30.5 | 23.6 |" in text  # Table 41
    # delay and throughput plots for the server measured
    assert len(report.plots) == 2 and all(p.stat().st_size > 5000 for p in report.plots)
    assert report.html_path.exists()


def test_summary_mean_sd_n():
    rows = [{"server": "a", "level": "L", "family": "v4", "delay_ms": d, "nrt_throughput_mbps": 1,
             "captured_throughput_mbps": 1, "goodput_mbps": 1, "retransmissions": 0} for d in (10, 20, 30)]
    (s,) = summarize(rows)
    assert s["n"] == 3 and s["delay_ms_mean"] == 20 and s["delay_ms_sd"] == 10


@pytest.mark.parametrize("status", ["running", "interrupted", "failed"])
def test_incomplete_run_is_refused(tmp_path, status):
    with pytest.raises(RunDirError, match=status):
        build_report(_fake_run(tmp_path, status))


def test_cli_report_on_non_run_dir_exit_7(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "report", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 7 and "no manifest.json" in proc.stderr
