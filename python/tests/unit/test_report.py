"""Reports are built from a stored run directory alone; incomplete runs are refused."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from congestlab.analysis.run_analysis import summarize, summary_fields, write_csv
from congestlab.errors import RunDirError
from congestlab.report import build_report
from congestlab.rundir import FORMAT_VERSION
from congestlab.spec import load_preset


def _fake_run(tmp_path, status="complete"):
    spec = load_preset("ipv6")
    rows = []
    for lv in spec.levels:
        for fam in ("v4", "v6"):
            for rep in (1, 2):
                rows.append({"server": "apache", "level": lv.name, "family": fam, "repetition": rep,
                             "delay_ms": 30 + rep, "nrt_throughput_mbps": 90 - rep, "captured_throughput_mbps": 91,
                             "goodput_mbps": 80, "retransmissions": rep - 1})
    summary = summarize(rows, [lv.name for lv in spec.levels])
    write_csv(tmp_path / "summary.csv", summary, summary_fields())
    manifest = {"format_version": FORMAT_VERSION, "status": status, "spec": spec.model_dump(mode="json"),
                "repetitions": 2, "levels": {"apache": {"C1B": {"background": {
                    "requested_bps": 75e6, "achieved_bps": 74e6, "deviation_pct": -1.3}, "cpu_busy_pct": 40}}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


def test_report_has_study_tables_and_plots(tmp_path):
    report = build_report(_fake_run(tmp_path))
    text = report.markdown_path.read_text()
    assert "| C1B | 31.5 ± 0.7 | 31.5 ± 0.7 | 95 | 117 |" in text  # ours beside Table 42's 0.095/0.117 s
    assert "| C2B | 88.50 ± 0.71 | 88.50 ± 0.71 | 30.5 | 23.6 |" in text  # Table 41
    # delay and throughput plots for each server of the preset (apache and lean)
    assert len(report.plots) == 4 and all(p.stat().st_size > 5000 for p in report.plots)
    assert report.html_path.exists()


def test_summary_mean_sd_n():
    rows = [{"server": "a", "level": "L", "family": "v4", "delay_ms": d, "nrt_throughput_mbps": 1,
             "captured_throughput_mbps": 1, "goodput_mbps": 1, "retransmissions": 0} for d in (10, 20, 30)]
    (s,) = summarize(rows, ["L"])
    assert s["n"] == 3 and s["delay_ms_mean"] == 20 and s["delay_ms_sd"] == 10


@pytest.mark.parametrize("status", ["running", "interrupted", "failed"])
def test_incomplete_run_is_refused(tmp_path, status):
    with pytest.raises(RunDirError, match=status):
        build_report(_fake_run(tmp_path, status))


def test_cli_report_on_non_run_dir_exit_7(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "report", str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 7 and "no manifest.json" in proc.stderr
