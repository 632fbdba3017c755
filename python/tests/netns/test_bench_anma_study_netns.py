"""`congestlab reproduce anma --quick` end to end on the ipv6 preset's topology: exact
per-family counts for A-E against Apache, a complete manifest, report and plot, and no
namespace left behind."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from congestlab.bench.anma_report import PATTERNS, pattern_json
from congestlab.bench.anma_study import QUICK, reproduce
from congestlab.bench.results import read_report

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]


def test_quick_study(tmp_path):
    run_dir = reproduce(tmp_path / "run", quick=True)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    requests, _ = QUICK
    for name, n6, n4 in PATTERNS:
        rep = read_report(pattern_json(run_dir, "apache", name))
        expect6 = requests * n6 // (n6 + n4)
        assert (rep.family("v6").requests, rep.family("v4").requests) == (expect6, requests - expect6)
        # a 4 KB file at 100 concurrent over an idle testbed: nothing may fail
        assert rep.family("all").normal == requests, (name, rep.family("all").other_kinds)
    report = (run_dir / "report.md").read_text()
    assert "| A | 1:1 | 500 | 500 |" in report
    assert (run_dir / "plots" / "continuation-apache.png").stat().st_size > 1000
    prefix = manifest["testbed"]["prefix"]
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert prefix not in left
