"""The cubic-compound preset (seed 002) shrunk to one point: an IIS server (Apache with
Compound TCP) under C1 (UDP 10 + BT 40 + stress 50 Mbit/s) with an Apache (CUBIC) BT server,
one 160 KiB GET, one repetition, a 4 s warm-up; then the report from the run directory as
an unprivileged user. Checks every table the preset's report reads and that nothing is left."""

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

POINT = "different.pair-IIS-Apache.level-C1.size_kib-160"


def tiny_spec():
    data = tomllib.loads((resources.files("congestlab.spec.presets") / "cubic-compound.toml").read_text())
    data |= {"repetitions": 1, "warmup_s": 4.0, "gap_s": 0.2, "quick": {}}
    different = next(e for e in data["experiments"] if e["name"] == "different")
    pair, level, size = different["axes"]
    pair |= {"values": [["compound", "cubic"]], "labels": ["IIS-Apache"]}
    level["levels"] = ["C1"]
    size["values"] = [160]
    data["experiments"] = [different]
    return validate_spec(data, "tiny cubic-compound")


def report_as_nobody(run_dir: Path) -> tuple[subprocess.CompletedProcess, str]:
    work = Path(tempfile.mkdtemp(prefix="congestlab-ch3-report-"))
    work.chmod(0o755)
    copy = work / "run"
    shutil.copytree(run_dir, copy)
    for path in [work, copy, *copy.rglob("*")]:
        shutil.chown(path, "nobody")
    env = dict(os.environ, HOME=str(work), MPLCONFIGDIR=str(work / "mpl"))
    try:
        proc = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable,
                               "-m", "congestlab.cli", "report", str(copy)], capture_output=True, text=True,
                              env=env, timeout=300)
        md = (copy / "report.md").read_text() if (copy / "report.md").exists() else ""
        return proc, md
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_tiny_cubic_compound_run_and_report_without_root(tmp_path):
    run_dir = tmp_path / "run"
    run_study(tiny_spec(), out=run_dir, preset="cubic-compound")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert namespaces_with(manifest["testbed"]["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == []  # dualbench, MGEN, Apache x2, tcpdump: all gone

    # the server type is its congestion control, seen on a live connection
    assert manifest["servers"]["s1"][0]["cc_effective"] == manifest["servers"]["s1"][0]["cc_kernel"] != "cubic"
    assert manifest["servers"]["bts"][0]["cc_effective"] == "cubic"
    assert "compound" in manifest["congestion_control"]["installed_for_this_run"] or \
        manifest["congestion_control"]["per_host"]["srv1"] != "cubic"
    for name in ("bt", "stress"):
        instance, = manifest["workloads"][name]["instances"]
        assert instance["max_connections"] == 200
        assert "--max-connections" in instance["argv"][0]

    request, = read_results(run_dir, "request")
    assert (request["point_id"], request["ok"], request["server"]) == (POINT, "True", "s1"), manifest["analysis"]
    assert int(request["payload_bytes"]) >= 160 * 1024 and float(request["delay_ms"]) > 0

    load = {r["workload"]: r for r in read_results(run_dir, "load")}
    assert set(load) == {"bt", "stress"}
    for name, mbps in (("bt", 40.0), ("stress", 50.0)):
        row = load[name]
        assert float(row["configured_mbps"]) == pytest.approx(mbps)
        fetches = mbps * 1e6 / (320 * 1024 * 8)
        assert abs(float(row["offered_fetches_per_s"]) - fetches) <= 1.5, row  # open loop keeps its schedule
        share = float(row["shared_bandwidth_pct"])
        assert share == pytest.approx(float(row["achieved_mbps"]) / mbps * 100, rel=1e-3)
        assert 0 <= share <= 200, row

    port = {r["server"]: r for r in read_results(run_dir, "port")}
    assert set(port) == {"s1", "bts"}
    # the GET and the stress fetches share S1's port; BTS carries only the BT load
    assert int(port["s1"]["connections"]) >= 2 and int(port["bts"]["connections"]) >= 1
    for row in port.values():
        assert 0 < float(row["nrt_throughput_mbps"]) <= float(row["captured_throughput_mbps"]) < 1000, row
    # the preset's [capture] (docs/probes.md, "In the presets"): the bottleneck's queue within
    # the 5 MB per repetition; no kernel probe (S1's port carries the stress load's connections)
    probes = json.loads((run_dir / "points" / POINT / "r1" / "rep.json").read_text())["probes"]
    assert probes["tcp_rows"] == 0 and probes["queue_rows"] > 0, probes
    assert probes["truncated"] == probes["lost"] == 0 and probes["bytes"] <= 5_000_000, probes
    series = run_dir / "results" / "series" / POINT / "r1"
    assert (series / "bottleneck-queue.csv").stat().st_size > 0 and not list(series.glob("*-tcp_probe.csv"))
    background, = read_results(run_dir, "background")
    assert background["cls"] == "udp4" and float(background["requested_bps"]) == 10e6

    proc, md = report_as_nobody(run_dir)
    assert proc.returncode == 0, proc.stderr
    assert "Table 14" in md and "45.34" in md  # our cell beside the seed's
    assert "Compound" in md
