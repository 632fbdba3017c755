"""The claims' rules that used to decide without a test, and what a claim is counted against:
"more than k times", "for some levels", shares of counted events, the seed's range with its own
error, coverage against the declaration, a run until decisive's own verdicts, the study-level
line, and counts censored where a GET timed out. Each rule holds in one case and not in another."""

from __future__ import annotations

import json

from congestlab.report import build_report
from congestlab.report.claims import DESCRIPTIVE, FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURED, evaluate_claims
from congestlab.report.claims.coverage import missing_repetitions
from congestlab.report.data import RunData
from report_fixtures import RunBuilder, request_run

METRICS = {"thr": {"kind": "request", "column": "nrt_throughput_mbps", "unit": "Mbit/s"},
           "delay_ms": {"kind": "request", "column": "delay_ms", "unit": "ms", "digits": 1}}


def _claims(tmp_path, values, delay, claim) -> list:
    run = request_run(values, delay=delay, report={"metrics": METRICS, "claims": [claim]})
    return evaluate_claims(RunData(run.write(tmp_path)))


def _delays(lean: list[float], apache: list[float], levels=("C1B",)) -> tuple[dict, dict]:
    values, delay = {}, {}
    for level in levels:
        for server, d in (("lean", lean), ("apache", apache)):
            values[(server, level, "v4")] = [10.0] * len(d)
            delay[(server, level, "v4")] = d
    return values, delay


def test_more_than_double_is_a_test_against_twice_not_against_zero(tmp_path):
    claim = {"id": "17", "title": "t", "seed": "s", "rule": "compare", "metric": "delay_ms", "relation": ">",
             "factor": 2, "a": {"server": "lean"}, "b": {"server": "apache"}}
    twice = _claims(tmp_path / "a", *_delays([120.0, 125.0, 118.0, 121.0], [48.0, 49.0, 47.5, 48.2]), claim)[0]
    assert twice.verdict == HOLDS and "log 2" in twice.checks[0].detail
    # 1.3 times: plainly "slower", but not "more than double"
    slower = _claims(tmp_path / "b", *_delays([62.0, 63.0, 61.5, 62.2], [48.0, 49.0, 47.5, 48.2]), claim)[0]
    assert slower.verdict == FAILS


def test_for_some_levels_holds_on_one_level_and_fails_only_when_no_level_does(tmp_path):
    claim = {"id": "12", "title": "t", "seed": "s", "rule": "compare", "metric": "delay_ms", "relation": ">",
             "a": {"server": "lean"}, "b": {"server": "apache"}, "for_each": ["level"], "quantifier": "some"}
    lean_slow, apache = [300.0, 310.0, 305.0, 302.0], [100.0, 101.0, 99.0, 100.5]
    values, delay = _delays(apache, apache, ("C1B", "C2B", "C3B"))  # equal at every level...
    delay[("lean", "C2B", "v4")] = lean_slow  # ...but at one
    some = _claims(tmp_path / "a", values, delay, claim)[0]
    assert some.verdict == HOLDS and [c.verdict for c in some.checks] == [INCONCLUSIVE, HOLDS, INCONCLUSIVE]
    values, delay = _delays([50.0, 51.0, 49.0, 50.2], apache, ("C1B", "C2B"))  # faster at every level
    assert _claims(tmp_path / "b", values, delay, claim)[0].verdict == FAILS
    every = dict(claim, quantifier="every")  # the same data read "at every level" does not hold
    values, delay = _delays(apache, apache, ("C1B", "C2B", "C3B"))
    delay[("lean", "C2B", "v4")] = lean_slow
    assert _claims(tmp_path / "c", values, delay, every)[0].verdict == INCONCLUSIVE


def _bins_run(tmp_path, pct_per_rep: list[float], samples: int = 400):
    report = {"metrics": {"gt_pct": {"kind": "rto_bins", "column": "previous_sample_rto_gt_1s_rtt_ge_rto_pct",
                                     "unit": "%"}},
              "claims": [{"id": "10", "title": "t", "seed": "s", "rule": "range", "metric": "gt_pct", "trials": "samples",
                          "range": [0, 0.5], "reason": "whole percents", "seed_n": "unknown"}]}
    b = RunBuilder("rto", ["level"], report)
    for rep, pct in enumerate(pct_per_rep, start=1):
        b.add("rto_bins", {"level": "100"}, rep, server="lean", source="log", weight="W1", sampling="one",
              live_settings=True, connections=1, samples=samples, previous_sample_rto_gt_1s_rtt_ge_rto_pct=pct)
    return evaluate_claims(RunData(b.write(tmp_path)))[0]


def test_a_share_of_counted_events_is_tested_as_a_proportion(tmp_path):
    none = _bins_run(tmp_path / "a", [0.0, 0.0, 0.0])  # "none of these packets": 0 of 1200
    assert none.verdict == HOLDS and "exact binomial" in none.checks[0].detail
    some = _bins_run(tmp_path / "b", [9.5, 10.5, 10.0])
    assert some.verdict == FAILS and "logit" in some.checks[0].detail
    assert _bins_run(tmp_path / "c", [0.0]).verdict == DESCRIPTIVE  # one repetition: no test


def test_the_seed_range_allows_for_the_seed_error(tmp_path):
    claim = {"id": "14", "title": "t", "seed": "s", "rule": "compare", "metric": "thr", "relation": ">",
             "a": {"family": "v6"}, "b": {"family": "v4"}, "range_pct": [-23, -4], "reason": "the seed's words"}
    v4 = [30.0, 30.6, 29.4, 30.3, 29.7]
    v6 = [x * f for x, f in zip(v4, (0.99, 0.965, 0.995, 0.97, 0.98))]  # about 2 % below v4: just outside
    values = {("apache", "C1B", "v4"): v4, ("apache", "C1B", "v6"): v6}
    exact = _claims(tmp_path / "a", values, None, claim)[0]
    assert exact.verdict == FAILS
    seed = _claims(tmp_path / "b", values, None, dict(claim, seed_n=3))[0]
    assert seed.verdict != FAILS and "the seed's range with its error" in seed.checks[0].detail


def test_coverage_counts_the_declared_levels_not_only_the_measured_ones(tmp_path):
    claim = {"id": "c", "title": "t", "seed": "s", "rule": "compare", "metric": "thr", "relation": ">",
             "a": {"family": "v4"}, "b": {"family": "v6"}, "for_each": ["level"]}
    b = RunBuilder("ipv6", ["server", "level"], {"metrics": METRICS, "claims": [claim]})
    b.spec["experiments"] = [{"name": "main", "axes": [{"name": "server", "values": ["apache"]},
                                                      {"name": "level", "levels": ["C1B", "C2B", "C3B"]}]}]
    for rep, (v4, v6) in enumerate(((30.1, 24.0), (29.5, 24.9), (30.8, 23.7)), start=1):
        for family, thr in (("v4", v4), ("v6", v6)):
            b.add("request", {"server": "apache", "level": "C1B"}, rep, server="apache", client="c", family=family,
                  ok=True, nrt_throughput_mbps=thr, delay_ms=100.0)
    data = RunData(b.write(tmp_path))
    result = evaluate_claims(data)[0]
    assert [c.verdict for c in result.checks] == [HOLDS, NOT_MEASURED, NOT_MEASURED]
    assert result.verdict == INCONCLUSIVE and result.coverage == "1/3" and result.gaps == ["C2B", "C3B"]
    assert missing_repetitions(data, result.points) == []  # the run reader's found-against-planned comes in here


def test_a_run_until_decisive_shows_its_sequential_verdicts_and_labels_a_re_read(tmp_path):
    claim = {"id": "c", "title": "v4 above v6", "seed": "s", "rule": "compare", "metric": "thr", "relation": ">",
             "a": {"family": "v4"}, "b": {"family": "v6"}}
    values = {("apache", "C1B", "v4"): [30.1, 29.5, 30.8, 30.3], ("apache", "C1B", "v6"): [24.0, 24.9, 23.7, 24.2]}
    run = request_run(values, report={"metrics": METRICS, "claims": [claim]}).write(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    points = [p["id"] for p in manifest["points"]]  # three rounds, then a fourth for every point
    manifest["sequential"] = {"first_look": 3, "points": points,
                              "looks": [{"round": 3, "level_per_side": 0.0015, "verdicts": {"c": "inconclusive"},
                                         "undecided": ["c"], "next_points": points},
                                        {"round": 4, "level_per_side": 0.0041, "verdicts": {"c": "inconclusive"},
                                         "undecided": ["c"], "next_points": []}],
                              "decided": {}, "stopped_by": "max-repetitions", "rounds_needed": {"c": 9}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    report = build_report(run)
    f = report.findings[0]
    assert f.verdict == INCONCLUSIVE and f.reread == HOLDS  # the fixed level would say holds: not the run's verdict
    md = report.markdown_path.read_text()
    assert "undecided after round 4 at level 0.0041" in md and "fixed-level re-read over every round: holds" in md
    assert "about 9 rounds would decide it" in md
    manifest["sequential"]["decided"] = {"c": {"verdict": "holds", "round": 3}}
    manifest["sequential"]["looks"] = manifest["sequential"]["looks"][:1]
    manifest["sequential"]["looks"][0]["undecided"] = []
    (run / "manifest.json").write_text(json.dumps(manifest))
    md = build_report(run).markdown_path.read_text()
    assert "decided at round 3 at level 0.0015 per side (sequential)" in md


def test_the_report_says_how_many_checks_and_what_one_false_verdict_among_them_means(tmp_path):
    claim = {"id": "c", "title": "t", "seed": "s", "rule": "compare", "metric": "thr", "relation": ">",
             "a": {"family": "v4"}, "b": {"family": "v6"}}
    values = {("apache", "C1B", "v4"): [30.1, 29.5, 30.8], ("apache", "C1B", "v6"): [24.0, 24.9, 23.7]}
    run = request_run(values, report={"metrics": METRICS, "claims": [claim, dict(claim, id="d")]}).write(tmp_path)
    md = build_report(run).markdown_path.read_text()
    assert "Across the study: 2 claims tested with 2 checks, 2 decided" in md
    assert "at least one with probability up to 5%" in md


def test_a_timed_out_get_counts_its_retransmissions_as_a_lower_bound(tmp_path):
    report = {"metrics": {"rtx": {"kind": "request", "column": "retransmissions", "where": {"outcome": "complete"}}}}
    b = RunBuilder("rto", ["level"], report)
    for rep, (outcome, rtx) in enumerate((("complete", 12), ("complete", 15), ("timed_out", 40)), start=1):
        row = dict(server="lean", client="c", family="v4", outcome=outcome, ok=outcome == "complete",
                   timeout_s=45.0, retransmissions=rtx)
        if outcome == "complete":
            row["delay_ms"] = 900.0
        b.add("request", {"level": "125"}, rep, **row)
    data = RunData(b.write(tmp_path))
    cell = data.cell(data.report.metrics["rtx"], {"level": "125"}).cell
    assert (cell.n, cell.censored, cell.invalid) == (3, 1, 0)
    assert cell.limits[cell.outcomes.index("timed_out")] == 40.0  # at least the 40 its connection made


def test_the_analysis_writes_a_timed_out_gets_retransmissions_and_nothing_else():
    from congestlab.analysis.request_rows import lower_bounds
    from congestlab.analysis.trace import PcapConnection

    conn = PcapConnection(conn=0, family="v4", client="10.0.0.2", client_port=40000, server="10.0.1.2",
                          server_port=80, first_ts=0.0, last_ts=45.0, retransmissions=40, metrics=None)
    assert lower_bounds("timed_out", conn) == {"retransmissions": 40}
    assert lower_bounds("invalid", conn) == {} and lower_bounds("timed_out", None) == {}
