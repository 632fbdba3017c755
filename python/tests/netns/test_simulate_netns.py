"""`congestlab simulate --compare` on a tiny scenario: examples/lean-sim.toml --quick (one
point, one 320 KiB GET per family), simulated and then run in netns with the real leanweb
through the one runner; the comparison holds both sides and the testbed is gone after."""

from __future__ import annotations

import csv
import json
import os

import pytest

from congestlab.paths import REPO_ROOT
from congestlab.simulate.command import run_simulate
from congestlab.spec import load_spec
from congestlab.testbed.namespaces import list_namespaces

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]


def test_compare_tiny_scenario(tmp_path):
    out = run_simulate(load_spec(REPO_ROOT / "examples" / "lean-sim.toml"), quick=True, compare=True,
                       out=tmp_path / "cmp", repetitions=1, seed=1)
    rows = list(csv.DictReader(open(out / "comparison.csv")))
    assert {(r["point_id"], r["family"]) for r in rows} == {("noloss", "v4"), ("noloss", "v6")}
    for r in rows:
        assert (r["sim_n"], r["emulation_n"]) == ("1", "1"), r
        if r["metric"] in ("delay_ms", "goodput_mbps", "nrt_throughput_mbps"):
            # both sides measured a finished GET; how close they are is the measurement, not a test
            assert float(r["sim_mean"]) > 0 and float(r["emulation_mean"]) > 0 and float(r["ratio"]) > 0
    assert "sim ÷ emulation" in (out / "comparison.md").read_text() and (out / "conditions.csv").is_file()
    manifest = json.loads((out / "emulation" / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    prefix = manifest["testbed"]["prefix"]
    assert not [ns for ns in list_namespaces() if ns.startswith(prefix + "-")], "the testbed is torn down"
