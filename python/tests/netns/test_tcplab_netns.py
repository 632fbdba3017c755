"""tcp-lab on real namespaces: a short sweep gives a complete run directory, the fidelity
checks hold, and nothing is left behind (also when a run fails half-way)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest

from congestlab.errors import TestbedError
from congestlab.tcplab import study
from congestlab.tcplab.checks import CheckPlan
from congestlab.tcplab.report import build_report
from congestlab.tcplab.sweeps import quick_sweeps, select

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]


def leftovers(prefix: str) -> tuple[list[str], list[str]]:
    namespaces = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                  if n.startswith(prefix)]
    procs = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if prefix in cmdline:
                procs.append(f"{entry.name}: {cmdline}")
    return namespaces, procs


def two_point_delay_sweep():
    (delay,) = select(quick_sweeps(), ["delay"])
    return [delay.with_points([0, 20]).with_duration(2.0)]


def test_short_sweep_makes_a_complete_run_dir(tmp_path):
    out = tmp_path / "run"
    plan = CheckPlan(rtt_pings=100, loss_packets=3000, fill_duration_s=3.0)
    run_dir = study.run_study(out, two_point_delay_sweep(), plan, quick=True)
    report = build_report(run_dir)

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["emulator"] in ("netem", "linkem")
    assert manifest["network"]["netem_available"] is (manifest["emulator"] == "netem")
    assert manifest["tools"]["iperf"].startswith("iperf version 2")
    assert manifest["points_done"] == 2
    checks = {c["name"]: c for c in manifest["fidelity"]["checks"]}
    print("\n" + "\n".join(f"{c['name']}: {c['value']} ({c['message']})" for c in checks.values()))
    assert 39.5 <= checks["rtt_40ms"]["value"] <= 40.5 and checks["rtt_40ms"]["ok"]
    assert 0.7 <= checks["loss_1pct"]["value"] <= 1.3 and checks["loss_1pct"]["ok"]
    assert "quick run" in checks["loss_1pct"]["message"]  # fewer than 10^4 packets is said
    # recorded with its verdict; not asserted >= 90 here: on this shared 2-core machine a 3 s
    # flow at 40 ms RTT read 50-93 Mbit/s depending on load (see docs/tcp-lab.md)
    fill = checks["tcp_fills_100mbit_at_20ms"]
    assert fill["value"] > 10.0 and fill["ok"] is (fill["value"] >= 90.0)

    rows = list(csv.DictReader(open(run_dir / "results.csv")))
    by_x = {float(r["x"]): float(r["throughput_mbps"]) for r in rows}
    print(f"delay sweep (Mbit/s by one-way delay ms): {by_x}")
    assert set(by_x) == {0.0, 20.0}
    assert 85.0 <= by_x[0.0] <= 96.0  # the cable: 100 Mbit/s HTB, ceiling 95.6
    assert 0.0 < by_x[20.0] <= 96.0
    assert rows[1]["emulator"] == manifest["emulator"] and rows[0]["emulator"] == ""

    text = report.read_text()
    assert "| one-way delay (ms) | throughput (Mbit/s) | study |" in text
    assert "| 0 | " in text and "| 20 | " in text
    png = run_dir / "plots" / "fig07_delay.png"
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    assert (run_dir / "logs" / "delay-01-tcp-server.csv").read_text().count(",") >= 8

    assert leftovers(manifest["network"]["prefix"]) == ([], [])


def test_failure_mid_run_marks_the_manifest_and_tears_down(tmp_path, monkeypatch):
    calls = []
    real = study.run_point

    def failing_second_point(net, point, duration_s, log_stem, procs):
        calls.append(net.line.prefix)
        if len(calls) == 2:
            # a server left running must be killed by the teardown
            procs.start(net.line.ns_b, ["sleep", "60"], tmp_path / "sleep.out", tmp_path / "sleep.err")
            raise TestbedError("injected failure")
        return real(net, point, duration_s, log_stem, procs)

    monkeypatch.setattr(study, "run_point", failing_second_point)
    (udp1,) = select(quick_sweeps(), ["udp1"])
    with pytest.raises(TestbedError, match="injected"):
        study.run_study(tmp_path / "run", [udp1.with_duration(2.0)], CheckPlan(enabled=False), quick=True)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "injected" in manifest["error"]
    assert manifest["points_done"] == 1
    rows = list(csv.DictReader(open(tmp_path / "run" / "results.csv")))
    assert [r["protocol"] for r in rows] == ["tcp", "udp"]
    print(f"\nudp1 x=1: {[(r['protocol'], r['throughput_mbps']) for r in rows]}")
    assert 0.9 <= float(rows[1]["throughput_mbps"]) <= 1.1  # iperf 2's default 1 Mbit/s UDP session
    assert leftovers(calls[0]) == ([], [])
