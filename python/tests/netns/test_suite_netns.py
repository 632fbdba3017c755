"""A suite on real namespaces: two tiny studies (tests/netns/spine_helpers.py, one
repetition) in one parent directory, each sub-run an ordinary complete run with its time
budget (categories adding up to its wall time), the index report linking both, the planner
reading the suite, and `--resume` keeping what is complete. Nothing is left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from spine_helpers import mini_spec_text, processes_mentioning

pytestmark = pytest.mark.netns

CONGESTLAB = str(Path(sys.executable).parent / "congestlab")


def test_two_study_suite(tmp_path):
    (tmp_path / "mini.toml").write_text(mini_spec_text(repetitions=1))
    apache_only = mini_spec_text(repetitions=1).replace('name = "mini"', 'name = "mini-apache"', 1) \
        .replace('values = ["apache", "lean"]', 'values = ["apache"]', 1)
    (tmp_path / "mini-apache.toml").write_text(apache_only)
    (tmp_path / "s.toml").write_text('[suite]\nname = "tiny"\nstudies = ["mini.toml", "mini-apache.toml"]\n')
    out = tmp_path / "suite"
    first = subprocess.run([CONGESTLAB, "suite", str(tmp_path / "s.toml"), "--out", str(out)],
                           capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    state = json.loads((out / "suite.json").read_text())
    assert [(k, r["status"]) for k, r in state["runs"].items()] == [("mini", "complete"), ("mini-apache", "complete")]
    for key, points in (("mini", 4), ("mini-apache", 2)):
        run_dir = out / "studies" / key
        m = json.loads((run_dir / "manifest.json").read_text())
        assert m["status"] == "complete" and len(m["points"]) == points
        budget = m["time_budget"]
        assert sum(budget["categories_s"].values()) == pytest.approx(budget["wall_s"], rel=0.01)
        assert budget["categories_s"]["measure"] > 0 and budget["categories_s"]["warmup"] > 0
        assert budget["report_s"] > 0  # recorded by the report built after the run
        for per in budget["units"].values():
            parts = sum(v for k, v in per.items() if k not in ("wall_s", "runs"))
            assert parts == pytest.approx(per["wall_s"], rel=0.01, abs=0.01)
        assert "Where the time went" in (run_dir / "report.html").read_text()
        # an ordinary run directory: the report rebuilds from it alone
        again = subprocess.run([CONGESTLAB, "report", str(run_dir)], capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
    html = (out / "index.html").read_text()
    assert 'href="studies/mini/report.html"' in html and 'href="studies/mini-apache/report.html"' in html
    plan = subprocess.run([CONGESTLAB, "plan", str(out), "--nodes", "2"], capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0 and "suite of 2 studies on 2 nodes" in plan.stdout, plan.stderr
    resumed = subprocess.run([CONGESTLAB, "suite", str(tmp_path / "s.toml"), "--resume", str(out)],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0 and resumed.stdout.count("complete, kept") == 2, resumed.stdout
    assert not processes_mentioning(str(out))
