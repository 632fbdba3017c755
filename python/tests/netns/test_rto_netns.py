"""The rto preset (seed 000 chapter 4) shrunk to two E1 cells at 75 Mbit/s (W1/One and
W5/One), one repetition each, a 3 s warm-up: the lean server restarts for the second cell
while the level's background (MGEN UDP + dualbench load to the Apache BT server) keeps
running; then the report from the run directory as an unprivileged user. Checks the
tables it fills, Table 5's weights in force, and that nothing is left behind."""

from __future__ import annotations

import csv
import json
import tomllib
from fractions import Fraction
from importlib import resources

import pytest
from spine_helpers import namespaces_with, processes_mentioning
from test_cubic_compound_netns import report_as_nobody

from congestlab.results import read_results
from congestlab.study import run_study
from congestlab.spec.loader import validate_spec

pytestmark = pytest.mark.netns

CELLS = {"e1.level-75.sampling-one.weight-W1": ("W1", Fraction(1, 8), Fraction(1, 4)),
         "e1.level-75.sampling-one.weight-W5": ("W5", Fraction(3, 16), Fraction(3, 8))}


def tiny_spec():
    """The preset whole (every experiment stays declared for the report), with a --quick of
    two E1 cells, one repetition, a 3 s warm-up."""
    data = tomllib.loads((resources.files("congestlab.spec.presets") / "rto.toml").read_text())
    data |= {"gap_s": 0.2, "order": "sequential"}
    data["quick"] = {"repetitions": 1, "experiments": ["e1"], "set": {"warmup_s": 3.0},
                     "axes": {"level": ["75"], "sampling": ["one"], "weight": ["W1", "W5"]}}
    return validate_spec(data, "tiny rto")


def test_tiny_rto_run_keeps_the_background_across_lean_restarts_and_reports(tmp_path):
    run_dir = tmp_path / "run"
    spec = tiny_spec()
    run_study(spec, quick=True, out=run_dir, preset="rto")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert namespaces_with(manifest["testbed"]["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == []  # leanweb, Apache, dualbench, MGEN, tcpdump: all gone

    # one background instance each across both cells; one lean server per cell
    for name in ("udp", "bt"):
        assert len(manifest["workloads"][name]["instances"]) == 1, manifest["workloads"][name]
    leans = manifest["servers"]["lean"]
    assert len(leans) == 2 and len(manifest["servers"]["bts"]) == 1
    for lean, (weight, alpha, beta) in zip(leans, CELLS.values()):
        eff = lean["settings_effective"]
        assert lean["knobs"]["weight"] == weight
        assert (Fraction(eff["rto_alpha"]).limit_denominator(64), Fraction(eff["rto_beta"]).limit_denominator(64)) \
            == (alpha, beta)  # Table 5
        assert (eff["cc"], eff["rto_min_ms"], eff["rto_initial_ms"], eff["rto_k"], eff["rto_g_us"]) == \
            ("none", 1000, 1000, 4, 250)
    # only the servers under test are captured, not the BT server
    for point in CELLS:
        rep = json.loads((run_dir / "points" / point / "r1" / "rep.json").read_text())
        assert set(rep["captures"]) == {"lean"}
        # the preset's [capture] (docs/probes.md, "In the presets"): the lean server's own view
        # from its log; no sampler (no kernel server is measured here) and no queue probe
        assert "probes" not in rep
        series = run_dir / "results" / "series" / point / "r1"
        with (series / "lean-lean_log.csv").open() as fh:
            events = {row["event"] for row in csv.DictReader(fh)}
        assert "ack" in events, events
        assert not (series / "bottleneck-queue.csv").exists()

    requests = {r["point_id"]: r for r in read_results(run_dir, "request")}
    assert set(requests) == set(CELLS), manifest["analysis"]
    for row in requests.values():
        assert row["ok"] == "True" and row["server"] == "lean", row
        assert int(row["payload_bytes"]) >= 320 * 1024 and 0 < float(row["delay_ms"]) < 120_000
        assert float(row["nrt_throughput_mbps"]) > 0
    load, = {r["point_id"]: r for r in read_results(run_dir, "load") if r["point_id"].endswith("W1")}.values()
    assert float(load["configured_mbps"]) == pytest.approx(67.5)
    background = [r for r in read_results(run_dir, "background")]
    assert {float(r["requested_bps"]) for r in background} == {7.5e6}

    bins = [r for r in read_results(run_dir, "rto_bins") if r["live_settings"] == "True" and r["source"] == "log"]
    assert {r["point_id"] for r in bins} == set(CELLS)
    assert all(int(r["samples"]) > 0 for r in bins)

    proc, md = report_as_nobody(run_dir)
    assert proc.returncode == 0, proc.stderr
    assert "Table 28" in md and "13.92" in md and "9.23" in md  # the seed's W1 and W5 /One at 75 beside ours
    assert "Background per level" in md and "67.5" in md
