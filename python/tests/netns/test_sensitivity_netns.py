"""`congestlab sensitivity` on real namespaces: a small web study (tests/netns/spine_helpers.py,
one repetition) under two bottleneck queue depths; each configuration is a complete run, the
report gives their distances and verdicts, nothing is left behind, and running the same
sweep again keeps what is complete."""

from __future__ import annotations

import json
import subprocess

import cli_fork
import pytest
from spine_helpers import mini_spec_text, processes_mentioning

pytestmark = pytest.mark.netns

REPORT = """
[report.metrics.delay_ms]
kind = "request"
column = "delay_ms"
where = { ok = true }

[[report.claims]]
id = "17"
title = "Without background the bare server is slower than Apache"
seed = "test"
rule = "compare"
metric = "delay_ms"
relation = ">"
a = { server = "lean" }
b = { server = "apache" }
where = { level = "C0" }
for_each = ["family"]
"""


def test_sensitivity_two_queue_depths(tmp_path):
    spec = tmp_path / "mini.toml"
    spec.write_text(mini_spec_text(repetitions=1) + REPORT)
    out = tmp_path / "sens"
    argv = ["sensitivity", str(spec), "--axis", "nodes.r1.links.s0.queue_packets=1000,64", "--out", str(out)]
    first = cli_fork.run(argv, tmp_path / "first.log", 600)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    state = json.loads((out / "sensitivity.json").read_text())
    assert [r["status"] for r in state["runs"].values()] == ["complete", "complete"]
    for config in state["configurations"]:
        manifest = json.loads((out / "configs" / config["id"] / "manifest.json").read_text())
        assert manifest["status"] == "complete"
        r1 = next(n for n in manifest["spec"]["topology"]["nodes"] if n["name"] == "r1")
        assert r1["links"][0]["queue_packets"] == config["settings"]["nodes.r1.links.s0.queue_packets"]
        assert (out / "configs" / config["id"] / "report.md").exists()
    md = (out / "sensitivity.md").read_text()
    # the four published C0 delays are measured in each configuration; the C1B-C6B ones are not
    assert md.count("| 4/28 |") == 2, md
    assert "## Findings across configurations" in md and "| 17 |" in md
    assert not processes_mentioning(str(out))
    assert not [ns for ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                if ns.startswith(tuple(json.loads((out / "configs" / c["id"] / "manifest.json").read_text())
                                       ["testbed"]["prefix"] for c in state["configurations"]))]

    again = cli_fork.run(argv, tmp_path / "again.log", 120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("complete, kept") == 2
