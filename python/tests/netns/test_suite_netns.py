"""A suite on real namespaces: two tiny studies (tests/netns/spine_helpers.py, one
repetition) in one parent directory, each sub-run an ordinary complete run with its time
budget (categories adding up to its wall time), the index report linking both, the planner
reading the suite, and `--resume` keeping what is complete. Nothing is left behind."""

from __future__ import annotations

import json

import cli_fork
import pytest
from spine_helpers import mini_spec_text, processes_mentioning

pytestmark = pytest.mark.netns


def test_two_study_suite(tmp_path):
    (tmp_path / "mini.toml").write_text(mini_spec_text(repetitions=1))
    apache_only = mini_spec_text(repetitions=1).replace('name = "mini"', 'name = "mini-apache"', 1) \
        .replace('values = ["apache", "lean"]', 'values = ["apache"]', 1)
    (tmp_path / "mini-apache.toml").write_text(apache_only)
    (tmp_path / "s.toml").write_text('[suite]\nname = "tiny"\nstudies = ["mini.toml", "mini-apache.toml"]\n')
    out = tmp_path / "suite"
    first = cli_fork.run(["suite", str(tmp_path / "s.toml"), "--out", str(out)], tmp_path / "first.log", 600)
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
        again = cli_fork.run(["report", str(run_dir)], tmp_path / f"report-{key}.log", 300)
        assert again.returncode == 0, again.stderr
    html = (out / "index.html").read_text()
    assert 'href="studies/mini/report.html"' in html and 'href="studies/mini-apache/report.html"' in html
    plan = cli_fork.run(["plan", str(out), "--nodes", "2"], tmp_path / "plan.log", 120)
    assert plan.returncode == 0 and "suite of 2 studies on 2 nodes" in plan.stdout, plan.stderr
    resumed = cli_fork.run(["suite", str(tmp_path / "s.toml"), "--resume", str(out)], tmp_path / "resumed.log", 300)
    assert resumed.returncode == 0 and resumed.stdout.count("complete, kept") == 2, resumed.stdout
    assert not processes_mentioning(str(out))
