"""A whole web study on real namespaces: Apache, MGEN, tcpdump, curl; and every way a run
can end (done, Ctrl-C, SIGTERM, failure) leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spine_helpers import namespaces_with, processes_mentioning, write_mini_spec

from congestlab.report import build_report
from congestlab.results import read_results
from congestlab.rundir import FORMAT_VERSION
from congestlab.study import run_study
from congestlab.spec import load_spec

pytestmark = pytest.mark.netns


def test_mini_study_end_to_end(tmp_path, within):
    spec = load_spec(write_mini_spec(tmp_path))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_study(spec, out=run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert manifest["format_version"] == FORMAT_VERSION and manifest["axes"] == ["server", "level"]
    assert manifest["runs_done"] == manifest["runs_total"] == 2 * 2 * 2
    assert namespaces_with(manifest["testbed"]["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == []

    rows = read_results(run_dir, "request")
    # apache and lean x 2 levels x 2 families x 2 repetitions, each with its point's axis columns
    assert len(rows) == 2 * 2 * 2 * 2, manifest["analysis"]["problems"]
    assert {(r["server"], r["level"]) for r in rows} == {("apache", "C0"), ("apache", "L20"), ("lean", "C0"),
                                                         ("lean", "L20")}
    for row in rows:
        assert row["ok"] == "True", row
        assert row["point_id"] == f"main.server-{row['server']}.level-{row['level']}"
        # 320 KiB through 100 Mbit/s takes >= 27 ms; nothing here should take a second
        assert 20 < float(row["delay_ms"]) < 1000, row
        assert float(row["delay_ms"]) < float(row["syn_to_last_ack_ms"])
        assert float(row["goodput_mbps"]) <= 100
        assert int(row["payload_bytes"]) >= 320 * 1024
        assert float(row["captured_throughput_mbps"]) >= float(row["nrt_throughput_mbps"])
        assert float(row["delay_ms"]) < float(row["curl_time_ms"]) + 5, row  # GET -> last ACK inside curl's time
    # every repetition has its own directory with the capture of the server it measured
    for point in manifest["points"]:
        for rep in (1, 2):
            rep_dir = run_dir / "points" / point["id"] / f"r{rep}"
            assert (rep_dir / "rep.json").exists() and (rep_dir / "pcap" / f"{point['axes']['server']}.pcap").exists()
    ports = read_results(run_dir, "port")
    assert len(ports) == 2 * 2 * 2 and all(int(r["connections"]) == 2 for r in ports)

    (apache,) = manifest["servers"]["apache"]
    assert apache["cc_effective"] == "cubic" and apache["version"].startswith("Apache/2.4")
    (lean,) = manifest["servers"]["lean"]
    assert lean["cc_effective"] == "leanweb --cc none"
    assert lean["settings_effective"]["recovery"] == "go-back-n"
    assert lean["settings_effective"]["rto_min_ms"] == 1000  # the preset's knob reached the server
    lean_log = (run_dir / lean["log_dir"] / "leanweb.jsonl").read_text()
    assert lean_log.count('"event":"request"') >= 2 * 2 * 2  # every measured GET, plus ready checks
    # no rto_* metric in the mini spec's report: the analysis skips the RTO replay and says how to run it;
    # `congestlab rto-replay` replays with the live settings: equal to leanweb's own, to the µs
    assert "congestlab rto-replay RUN" in manifest["analysis"]["rto_replay_skipped"]
    assert read_results(run_dir, "rto_samples") == []
    done = subprocess.run([sys.executable, "-m", "congestlab.cli", "rto-replay", str(run_dir)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    replayed = [r for r in read_results(run_dir, "rto_samples") if r["source"] == "log"]
    assert replayed and all(r["logged_rto_us"] and r["rto_us"] == r["logged_rto_us"] for r in replayed)
    bins = read_results(run_dir, "rto_bins")
    assert sorted((r["level"], r["repetition"], r["source"]) for r in bins) == sorted(
        (level, str(rep), source) for level in ("C0", "L20") for rep in (1, 2) for source in ("log", "pcap"))
    background = [r for r in read_results(run_dir, "background") if r["level"] == "L20"]
    assert len(background) == 2 * 2 * 4  # both servers x 2 repetitions x 4 classes
    checks = {c["name"].split("@")[0]: c for c in manifest["fidelity"]["checks"]}
    assert checks["measured_requests"]["ok"]
    assert checks["retransmissions_pcap_vs_log_lean"]["ok"], checks["retransmissions_pcap_vs_log_lean"]
    bg = [c for c in manifest["fidelity"]["checks"] if c["name"].startswith("background_rate_bg@")]
    # one: both servers run through L20's unit, whose two halves meet at the mirrored order's
    # turn (spec/sweep.py), so MGEN ran once, over the whole time
    assert len(bg) == 1
    for check in bg:
        within("background deviation %", check["value"], 0.0, 3.0)  # the ±3 % fidelity bound
    assert manifest["tools"]["mgen"].startswith("5.02")

    report = build_report(run_dir)  # the mini spec declares no report: the default one
    text = report.markdown_path.read_text()
    assert "Delay (GET to last ACK) by server and level" in text and "L20" in text


def _start_cli(tmp_path: Path, extra_env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    spec = write_mini_spec(tmp_path, repetitions=4)
    run_dir = tmp_path / "run"
    env = dict(os.environ) | (extra_env or {})
    proc = subprocess.Popen([sys.executable, "-m", "congestlab.cli", "run", str(spec), "--out", str(run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return proc, run_dir


def _wait_for(predicate, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def _manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.mark.parametrize("sig, stage", [(signal.SIGINT, "setup"), (signal.SIGINT, "background"),
                                        (signal.SIGTERM, "measuring")])
def test_interrupted_run_leaves_nothing(tmp_path, sig, stage):
    proc, run_dir = _start_cli(tmp_path)
    try:
        if stage == "setup":
            _wait_for(lambda: (run_dir / "manifest.json").exists(), 20)
        elif stage == "background":
            _wait_for(lambda: any((run_dir / "logs" / "background").glob("*/*source.mgn")), 60)
        else:
            _wait_for(lambda: any((run_dir / "points").glob("*/r1/pcap/*.pcap")), 60)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    # one line says what happened (progress bars may stand above it)
    assert "Traceback" not in stderr and "torn down" in stderr.strip().splitlines()[-1], stderr
    manifest = _manifest(run_dir)
    assert manifest["status"] == "interrupted"
    assert namespaces_with(manifest["testbed"]["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == []


def test_failing_run_leaves_nothing_and_says_why(tmp_path):
    proc, run_dir = _start_cli(tmp_path, {"CONGESTLAB_MGEN_SHIM": str(tmp_path / "missing-shim.so")})
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 4, stderr
    assert "missing-shim.so is missing" in stderr and "Traceback" not in stderr
    manifest = _manifest(run_dir)
    assert manifest["status"] == "failed" and "missing-shim.so" in manifest["error"]
    assert namespaces_with(manifest["testbed"]["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == []
    refused = subprocess.run([sys.executable, "-m", "congestlab.cli", "report", str(run_dir)],
                             capture_output=True, text=True)
    assert refused.returncode == 7 and "not complete" in refused.stderr
