"""The measured request by headless Chromium through the testbed: one point (Apache, no
background), one repetition, one 320 KiB download per family; the analysis finds the
connection that carried it, and no browser process or profile directory is left."""

from __future__ import annotations

import json

import pytest
from spine_helpers import mini_spec_text, namespaces_with, processes_mentioning

from congestlab.results import read_results
from congestlab.study import run_study
from congestlab.spec import load_spec

pytestmark = pytest.mark.netns


def test_chromium_fetches_one_file_per_family_and_leaves_nothing(tmp_path):
    text = mini_spec_text(repetitions=1).replace('name = "mini"', 'name = "browser"', 1)
    text = text.replace('kind = "get"\n', 'kind = "get"\nclient_kind = "chromium"\n', 1)
    text = text.replace('values = ["apache", "lean"]', 'values = ["apache"]', 1)
    text = text.replace('levels = ["C0", "L20"]', 'levels = ["C0"]', 1)
    spec_path = tmp_path / "browser.toml"
    spec_path.write_text(text)
    spec = load_spec(spec_path)
    assert spec.workload("get").client_kind == "chromium"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_study(spec, out=run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    assert namespaces_with(manifest["testbed"]["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == [], "a browser process outlived the run"
    assert list(run_dir.glob("points/*/r1/logs/chromium-profile-*")) == [], "a profile directory was left"
    assert manifest["tools"]["chromium"][0].isdigit(), manifest["tools"]

    rows = read_results(run_dir, "request")
    assert sorted(r["family"] for r in rows) == ["v4", "v6"], manifest["analysis"]["problems"]
    for row in rows:
        assert row["ok"] == "True" and row["client_kind"] == "chromium", (row["error"], manifest["analysis"]["problems"])
        assert int(row["client_port"]) > 0, "the analysis names the connection it picked"
        assert int(row["payload_bytes"]) >= 320 * 1024
        assert 20 < float(row["delay_ms"]) < 5000, row
        # the browser's own time (navigation sent -> download completed) contains the GET
        assert float(row["delay_ms"]) < float(row["curl_time_ms"]) + 5, row
    logs = list((run_dir / "points").glob("*/r1/logs/chromium-0-*.log"))
    assert len(logs) == 2
