"""The one report engine on hand-made run directories of every preset's shape: files made,
tables and findings present, the seed's values beside ours, errors named."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from congestlab.errors import RunDirError, SpecError
from congestlab.report import build_report
from congestlab.report.claims import NOT_MEASURED
from record_fixtures import tiny_stored_spec
from report_fixtures import RunBuilder, anma_run, realistic_ipv6, request_run, tcplab_run


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def count(self, tag: str, **attrs) -> int:
        return sum(t == tag and all(a.get(k, "").startswith(v) for k, v in attrs.items()) for t, a in self.tags)


def _tags(path) -> Tags:
    parser = Tags()
    parser.feed(path.read_text())
    return parser


def test_ipv6_report_has_findings_tables_and_figures(tmp_path):
    run = realistic_ipv6(repetitions=10).write(tmp_path / "run")
    report = build_report(run)
    assert {f.claim.id for f in report.findings} == {"14", "15", "16", "17", "18", "Q", "Q15", "Q18"}
    assert all(f.verdict != NOT_MEASURED for f in report.findings)
    # the fixture's lean server beats Apache at 75 Mbit/s (README): claim 16 must not hold
    assert next(f for f in report.findings if f.claim.id == "16").verdict == "does not hold"
    # leanmodern is no slower than Apache in the fixture, but not faster than bare at 75 Mbit/s
    assert next(f for f in report.findings if f.claim.id == "Q").verdict == "does not hold"
    md = report.markdown_path.read_text()
    # an inconclusive claim says how many repetitions a power estimate needs, in the findings and details
    undecided = [f for f in report.findings if f.verdict == "inconclusive" and f.rounds_needed]
    assert undecided and f"needs {undecided[0].rounds_needed} repetitions" in md
    assert "Rule: holds when every declared check was tested and holds" in md
    assert md.index("## Findings") < md.index("## Apache")
    assert "| C1B | " in md and "| 28.6 |" in md  # Table 41's seed value beside ours
    html = _tags(report.html_path)
    assert html.count("table", **{"class": "data"}) == 7  # Tables 39-42, leanmodern's two, detail
    assert html.count("table", **{"class": "findings"}) == 1
    assert "| leanmodern |" in md or "leanmodern" in md.split("## Lean with TCP's optimizations")[1]
    assert html.count("img", src="data:image/svg+xml;base64,") == 5  # the delay CDF per family
    assert sorted(p.name for p in report.plots) == sorted(
        f"{n}.{ext}" for n in ("throughput", "delay", "delay-cdf-v4", "delay-cdf-v6", "delay-time")
        for ext in ("png", "svg"))
    assert all(p.stat().st_size > 1000 for p in report.plots)
    assert html.count("a", href="points/main.server-apache.level-C1B/r1/") == 2  # pcap and log links
    assert report.warnings and report.warnings[0].startswith("C4B")
    (header, rows), = report.console.values()
    assert header[0] == "claim" and rows[0][0] == "14"


def test_quick_run_with_one_server_marks_the_rest_not_measured(tmp_path):
    from preset_declarations import load_declaration
    from report_fixtures import IPV6_LEVELS

    decl = load_declaration("ipv6")
    values = {("apache", lv, fam): [30.0 if fam == "v4" else 25.0] for lv in IPV6_LEVELS[:2] for fam in ("v4", "v6")}
    run = request_run(values, report=decl["report"], published=decl["published"]).write(tmp_path / "run")
    report = build_report(run)
    verdicts = {f.claim.id: f.verdict for f in report.findings}
    assert verdicts["16"] == NOT_MEASURED  # no lean server in this run
    assert verdicts["14"] == "descriptive"  # one repetition: no spread, shown but not tested
    md = report.markdown_path.read_text()
    assert "one repetition (no CI)" in md
    assert "Descriptive: not tested at this run's n" in md and "one sample a side" in md


def test_tcplab_report(tmp_path):
    report = build_report(tcplab_run(repetitions=5, noise=0.003).write(tmp_path / "run"))
    verdicts = {f.claim.id: f.verdict for f in report.findings}
    assert set(verdicts) == {"19a", "19b", "19c", "19d", "19e", "19f", "19g"}
    assert verdicts["19a"] == "holds"  # 95.5 ± 0.3 % within the seed's precision of our line's 95.64 ceiling
    assert verdicts["19c"] == "does not hold"  # the fixture's delay curve is 1/RTT, not linear
    assert verdicts["19d"] == "holds"
    assert verdicts["19f"] == "does not hold"  # 1.6 r/n in the fixture's 4-session point
    assert report.failed_properties and report.failed_properties[0].claim.id == "19f"
    assert verdicts["19g"] == "holds"  # 0.963 Mbit/s within the seed's whole Mbit/s of 1
    assert len([p for p in report.plots if p.suffix == ".png"]) == 10
    once = build_report(tcplab_run(repetitions=1).write(tmp_path / "once"))  # a quick run's one repetition
    assert {f.claim.id: f.verdict for f in once.findings}["19a"] == "descriptive"


def test_anma_report(tmp_path):
    report = build_report(anma_run(repetitions=3).write(tmp_path / "run"))
    verdicts = {f.claim.id: f.verdict for f in report.findings}
    assert verdicts["20a"] == "descriptive"  # dualbench's split is exact: the same count every repetition
    assert verdicts["20b"] == "does not hold"  # no RESETs at all, the seed saw ~10 %
    assert set(verdicts) == {"20a", "20b", "20c", "20d", "20e"}
    md = build_report(anma_run().write(tmp_path / "once")).markdown_path.read_text()
    assert "| A | 1000 | 5000 | 1000 | 4536 | 0 | 464 | 0 |" in md  # ours beside the slides (v6: sent, NORMAL, RESET, TIMEOUT)


def test_a_quick_run_without_an_experiment_still_reports_that_experiments_tables(tmp_path):
    """--quick may leave whole experiments out (the rto preset's E3 and E4): their axes are
    not the run's, but the spec declares them, so their tables render as not measured."""
    report = {"metrics": {"t": {"kind": "request", "column": "delay_ms"}},
              "tables": [{"id": "run", "title": "Run", "metrics": ["t"], "rows": "level"},
                         {"id": "left-out", "title": "Left out", "metrics": ["t"], "rows": "rto_min_ms"}]}
    builder = RunBuilder("s", ["level"], report)
    builder.spec["experiments"] = [{"name": "main", "axes": [{"name": "level"}]},
                                   {"name": "e3", "axes": [{"name": "rto_min_ms"}]}]
    builder.add("request", {"level": "C1"}, 1, delay_ms=5.0, ok=True)
    md = build_report(builder.write(tmp_path / "run")).markdown_path.read_text()
    assert "Left out" in md and "5.00" in md
    builder.spec["experiments"] = builder.spec["experiments"][:1]  # not declared anywhere: an error
    with pytest.raises(SpecError, match="'rto_min_ms' is neither an axis"):
        build_report(builder.write(tmp_path / "run2"))


def test_unknown_dimension_in_a_declaration_is_a_spec_error(tmp_path):
    report = {"metrics": {"t": {"kind": "request", "column": "delay_ms"}},
              "tables": [{"id": "x", "title": "x", "metrics": ["t"], "rows": "levle"}]}
    run = RunBuilder("s", ["level"], report).write(tmp_path / "run")
    with pytest.raises(SpecError, match="'levle' is neither an axis"):
        build_report(run)


def test_wrong_format_version_is_named(tmp_path):
    run = RunBuilder("s", ["level"], {}).write(tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["format_version"] = 5
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunDirError, match="format_version 5, this congestlab reads 2, 3 or 4"):
        build_report(run)


def test_report_without_declarations_still_renders(tmp_path):
    from congestlab.report.engine import build_report as engine

    run = RunBuilder("s", ["level"], {}).write(tmp_path / "run")
    report = engine(run)
    assert "No claims are declared" in report.markdown_path.read_text()
    assert report.findings == [] and report.plots == []


def test_a_run_that_did_not_finish_is_refused(tmp_path):
    run = RunBuilder("s", ["level"], {}).write(tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(status="interrupted", error="SIGINT")
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunDirError, match="not complete"):
        build_report(run)


def test_a_get_that_timed_out_shows_as_censored_at_its_points_timeout(tmp_path):
    """The rto preset's delays: a timed-out GET is censored at its timeout, here from rows stored
    without one: T from the point's settings (the quick's 45 s), else the spec's 120 s."""
    metric = {"kind": "request", "column": "delay_ms", "where": {"ok": True}, "digits": 0,
              "censored": {"ok": False}, "censored_at": "workloads.get.timeout_s"}
    report = {"metrics": {"d": metric}, "tables": [{"id": "t", "title": "Delays", "metrics": ["d"], "rows": "level"}]}
    builder = RunBuilder("s", ["level"], report)
    # a format 2 run (rundir/upgrade.py): its rows are upgraded from the spec its points ran with
    builder.format_version = 2
    builder.spec = tiny_stored_spec(server="apache", timeout_s=120.0, extra=(
        'axes = [{ name = "level", fields = ["warmup_s"], values = [75, 100, 125] }]\n')) | {"report": report}
    request = {"server": "apache", "client": "client"}
    builder.add("request", {"level": "75"}, 1, delay_ms=100.0, ok=True, **request)
    builder.add("request", {"level": "75"}, 2, delay_ms=300.0, ok=True, **request)
    builder.add("request", {"level": "100"}, 1, delay_ms=2000.0, ok=True, **request)
    # a declaration and rows from before request outcomes: ok = false with curl's timeout is timed_out
    timed_out = "Operation timed out after 45000 milliseconds with 0 bytes received"
    builder.add("request", {"level": "100"}, 2, delay_ms="", ok=False, error=timed_out, **request)
    builder.add("request", {"level": "125"}, 1, delay_ms="", ok=False, error=timed_out, **request)
    builder.add("request", {"level": "125"}, 2, delay_ms="", ok=False, error=timed_out, **request)
    run = builder.write(tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    for point in manifest["points"]:
        point["settings"] = {"workloads.get.timeout_s": 45} if point["axes"]["level"] == "125" else {}
    (run / "manifest.json").write_text(json.dumps(manifest))
    md = build_report(run).markdown_path.read_text()
    assert "| 75 | 200; mean 200 [-1071, 1471] |" in md  # nothing censored: the sample median
    assert "| 100 | 2000 [2000, ∞] (1/2 censored); mean 2000 [-∞, ∞] |" in md  # Kaplan–Meier
    assert "| 125 | > 45000 (2/2 censored) |" in md  # more than half censored: only bounded, at 45 s
    assert "more than half censored, the median is only bounded" in md
    with pytest.raises(SpecError, match="censored and censored_at go together"):
        bad = dict(report, metrics={"d": {k: v for k, v in metric.items() if k != "censored_at"}})
        build_report(RunBuilder("s", ["level"], bad).write(tmp_path / "run2"))


def test_only_timed_out_gets_are_censored_invalid_ones_are_counted(tmp_path):
    """A delay cell censors timed-out GETs and counts invalid ones, with or without the old
    `censored` declaration. A run analysed before rows carried an outcome gets it from `ok` and
    the client's error."""
    censored = {"kind": "request", "column": "delay_ms", "where": {"outcome": "complete"}, "digits": 0,
                "censored": {"outcome": "timed_out"}, "censored_at": "workloads.get.timeout_s"}
    plain = {"kind": "request", "column": "delay_ms", "where": {"outcome": "complete"}, "digits": 0}
    report = {"metrics": {"d": censored, "p": plain},
              "tables": [{"id": "t", "title": "Delays", "metrics": ["d"], "rows": "level"},
                         {"id": "u", "title": "Plain", "metrics": ["p"], "rows": "level"}]}
    for legacy in (False, True):
        builder = RunBuilder("s", ["level"], report)
        if legacy:  # analysed before rows carried their outcome and timeout (rundir/upgrade.py)
            builder.format_version = 2
            builder.spec = tiny_stored_spec(server="apache", timeout_s=120.0, extra=(
                'axes = [{ name = "level", fields = ["warmup_s"], values = [75, 100] }]\n')) | {"report": report}
        rows = [("75", 1, 100.0, "complete", ""), ("75", 2, 300.0, "invalid", "http 500, 0 of 1024 bytes"),
                ("100", 1, 2000.0, "complete", ""), ("100", 2, "", "timed_out", "Operation timed out after 120000 ms"),
                ("100", 3, "", "invalid", "incomplete in the capture: no SYN from the client")]
        for level, rep, delay, outcome, error in rows:
            columns = {"delay_ms": delay if outcome == "complete" else "", "ok": outcome == "complete",
                       "error": error}
            if not legacy:
                columns |= {"outcome": outcome, "timeout_s": 120.0}
            builder.add("request", {"level": level}, rep, server="apache", client="client", **columns)
        md = build_report(builder.write(tmp_path / f"run{legacy}")).markdown_path.read_text()
        assert "| 75 | 100; mean 100 (n=1); 1 invalid |" in md, md  # invalid: counted, not a sample
        # timed out: censored at its timeout (rows stored without one: the timeout its point's
        # GET workload ran with), whether or not the metric declares `censored`
        assert md.count("| 100 | 2000 [2000, ∞] (1/2 censored); mean 2000 [-∞, ∞] (n=2); 1 invalid |") == 2, md
        assert "k invalid = excluded and counted" in md


def test_a_fidelity_check_not_checked_reads_so_and_is_no_warning(tmp_path):
    builder = RunBuilder("s", ["level"], {})
    builder.fidelity = {"checks": [
        {"name": "background_rate_bg@main.level-C1B", "ok": None, "value": -3.8,
         "expected": "within ±3 % over >= 2.33 s", "message": "not checked: window 0.44 s < 2.33 s"},
        {"name": "background_rate_bg@main.level-C4B", "ok": False, "value": -4.1, "expected": "within ±3 %",
         "message": "bg: background achieved 95.9 of 100.00 Mbit/s"}], "warnings": []}
    report = build_report(builder.write(tmp_path / "run"))
    md = report.markdown_path.read_text()
    assert "| background_rate_bg@main.level-C1B | not checked | -3.8 |" in md
    assert "| background_rate_bg@main.level-C4B | **NO** |" in md
    html = report.html_path.read_text()
    assert html.count('class="bad"') == 1 and ">not checked<" in html
