"""The engine on real run directories written by the spine v2 runner (manifest and results as
written; captures and logs left out):
- data/ipv6-quick-run: `congestlab run` of the ipv6 preset with its [report] declaration, quick
  subset C0 + C1B, one repetition, both servers;
- data/anma-quick-run: the anma preset with its declaration, --quick (1,000 requests, 100
  concurrent, two repetitions), both servers.
The current declaration replaces the one stored in the manifest, so the tests follow it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from preset_declarations import load_declaration

from congestlab.report import build_report
from congestlab.report.claims import NOT_MEASURED
from congestlab.report.run_comparison import compare_runs

DATA = Path(__file__).parent / "data"
REAL = DATA / "ipv6-quick-run"


def _copy(tmp_path: Path, name: str = "run", source: Path = REAL, preset: str = "ipv6") -> Path:
    run = tmp_path / name
    shutil.copytree(source, run)
    manifest = json.loads((run / "manifest.json").read_text())
    decl = load_declaration(preset)
    manifest["spec"].update(report=decl["report"], published=decl["published"])
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_report_of_a_real_quick_run(tmp_path):
    report = build_report(_copy(tmp_path))
    verdicts = {f.claim.id: f for f in report.findings}
    assert set(verdicts) == {"14", "15", "16", "17", "18", "Q", "Q15", "Q18"}
    # C0 and C1B only: the 100 Mbit/s levels claim 18 needs were not run; the run predates
    # leanmodern, which claim Q needs
    assert verdicts["18"].verdict == NOT_MEASURED
    assert verdicts["Q"].verdict == verdicts["Q15"].verdict == verdicts["Q18"].verdict == NOT_MEASURED
    for cid in ("15", "16", "17"):
        assert verdicts[cid].verdict != NOT_MEASURED, cid
    assert all(c.verdict != NOT_MEASURED for c in verdicts["17"].checks)  # C0 only: all measured
    # claims over C1B-C6B with only C1B run: the other levels are listed and the claim cannot hold
    for cid in ("15", "16"):
        assert verdicts[cid].gaps and all("C1B" not in gap for gap in verdicts[cid].gaps), cid
        assert verdicts[cid].verdict != "holds", cid
    md = report.markdown_path.read_text()
    assert "one repetition (no CI)" in md and "| C1B |" in md
    html = report.html_path.read_text()
    # Tables 39-42, detail, and leanmodern's two (its throughput table empty in this run)
    assert html.count('<table class="data">') == 7 and html.count("<img ") == 5  # a delay CDF per family
    assert "points/main.server-lean.level-C1B/r1/rep.json" in html


def test_compare_a_real_run_with_itself(tmp_path):
    a, b = _copy(tmp_path, "a"), _copy(tmp_path, "b")
    done = compare_runs([a, b], tmp_path / "cmp")
    (header, rows), = [v for k, v in done.console.items() if k == "cells"]
    # 4 tables x 2 levels x 2 families, detail: 2 levels x 2 servers x 2 metrics, and the
    # delay-by-server table: 2 levels x 2 servers
    assert rows == [["28", "0"]]
    # one repetition per side: no spread, so no effect can be estimated, and none is claimed
    assert "| – | – (n=1/1, censored 0/0, invalid 0/0; too few completed samples" in done.markdown_path.read_text()


def test_report_of_a_real_anma_run(tmp_path):
    report = build_report(_copy(tmp_path, source=DATA / "anma-quick-run", preset="anma"))
    verdicts = {f.claim.id: f.verdict for f in report.findings}
    assert verdicts["20a"] == "descriptive"  # dualbench splits the list exactly: 500/500, 800/200, ... every time
    assert verdicts["20b"] == "does not hold"  # no RESET at all where the slides saw ~10 %
    assert all(v != NOT_MEASURED for v in verdicts.values())
    md = report.markdown_path.read_text()
    assert "| B | 800 [800, 800] | 8001 |" in md  # ours (1,000 requests) beside the slides' (10,000)


def test_report_of_a_real_tcplab_run(tmp_path):
    """data/tcplab-quick-run: the tcp-lab preset with its declaration, --quick (2 s per point)."""
    report = build_report(_copy(tmp_path, source=DATA / "tcplab-quick-run", preset="tcp-lab"))
    found = {f.claim.id: f for f in report.findings}
    # window and rate sweeps rise, but over 3 quick points of one repetition Kendall's smallest
    # one-sided p is 1/6: the trend cannot be shown, so it is not tested
    assert found["19b"].verdict == "descriptive"
    assert all("Kendall" in c.detail for c in found["19b"].checks)
    assert found["19c"].verdict == found["19d"].verdict == "descriptive"  # 3 quick points: no curve told apart
    # the loss figures' x only (no other figure's), the full study's: those --quick left out are not measured
    assert [c.label for c in found["19e"].checks] == ["0", "0.001", "0.005", "0.01", "0.02", "0.05", "0.1"]
    assert found["19e"].gaps == ["0.001", "0.005", "0.02", "0.1"]
    assert found["19f"].claim.property and found["19f"].verdict == "descriptive"  # one repetition
    assert not report.failed_properties
    assert found["19g"].verdict == "descriptive"
    md = report.markdown_path.read_text()
    assert "| 150000000 | 94.77 | 94 |" in md  # Fig. 6 at 150 Mbit/s beside the seed's plateau
    assert len([p for p in report.plots if p.suffix == ".png"]) == 10
