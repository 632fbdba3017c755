"""Verdicts on hand-made results: holds, does not hold, inconclusive with one repetition, not
measured; each rule of congestlab/report/claims.py."""

from __future__ import annotations

import pytest

from congestlab.report.claims import (FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURED, decide_compare, evaluate_claims,
                                      fit_shapes)
from congestlab.report.data import RunData, Stats
from congestlab.spec.report import MetricSpec
from report_fixtures import RunBuilder, request_run

METRICS = {
    "throughput_mbps": {"kind": "request", "column": "nrt_throughput_mbps", "unit": "Mbit/s"},
    "delay_ms": {"kind": "request", "column": "delay_ms", "unit": "ms", "digits": 1},
}


def _v4_beats_v6(**extra) -> dict:
    claim = {"id": "14", "title": "v4 throughput > v6", "seed": "IPv4 throughput is higher", "rule": "compare",
             "metric": "throughput_mbps", "a": {"family": "v4"}, "b": {"family": "v6"}, "relation": ">",
             "for_each": ["level"], "where": {"server": "apache"}}
    claim.update(extra)
    return {"metrics": METRICS, "claims": [claim]}


def _verdict(tmp_path, values, report, published=None):
    run = request_run(values, report=report, published=published).write(tmp_path / "run")
    return evaluate_claims(RunData(run))[0]


def test_compare_holds_with_three_repetitions(tmp_path):
    values = {("apache", "C1B", "v4"): [30.1, 29.5, 30.8], ("apache", "C1B", "v6"): [24.0, 24.9, 23.7],
              ("apache", "C2B", "v4"): [31.0, 30.2, 30.9], ("apache", "C2B", "v6"): [25.1, 24.4, 25.5]}
    result = _verdict(tmp_path, values, _v4_beats_v6())
    assert result.verdict == HOLDS
    assert [c.verdict for c in result.checks] == [HOLDS, HOLDS]
    assert "Welch" in result.checks[0].detail


def test_compare_fails_when_significantly_the_other_way(tmp_path):
    values = {("apache", "C1B", "v4"): [24.0, 24.9, 23.7], ("apache", "C1B", "v6"): [30.1, 29.5, 30.8],
              ("apache", "C2B", "v4"): [31.0, 30.2, 30.9], ("apache", "C2B", "v6"): [25.1, 24.4, 25.5]}
    result = _verdict(tmp_path, values, _v4_beats_v6())
    assert result.verdict == FAILS
    assert [c.verdict for c in result.checks] == [FAILS, HOLDS]


def test_compare_not_significant_is_inconclusive(tmp_path):
    values = {("apache", "C1B", "v4"): [30.0, 26.0, 34.0], ("apache", "C1B", "v6"): [29.0, 33.0, 25.5]}
    assert _verdict(tmp_path, values, _v4_beats_v6()).verdict == INCONCLUSIVE


def test_one_repetition_inside_the_margin_is_inconclusive(tmp_path):
    values = {("apache", "C1B", "v4"): [30.0], ("apache", "C1B", "v6"): [24.0]}  # ratio 1.25 < 1.5
    result = _verdict(tmp_path, values, _v4_beats_v6())
    assert result.verdict == INCONCLUSIVE
    assert "margin" in result.checks[0].detail


def test_one_repetition_beyond_the_margin_decides(tmp_path):
    holds = {("apache", "C1B", "v4"): [30.0], ("apache", "C1B", "v6"): [15.0]}
    fails = {("apache", "C1B", "v4"): [15.0], ("apache", "C1B", "v6"): [30.0]}
    assert _verdict(tmp_path / "h", holds, _v4_beats_v6()).verdict == HOLDS
    assert _verdict(tmp_path / "f", fails, _v4_beats_v6()).verdict == FAILS


def test_claim_on_an_unmeasured_server_is_not_measured(tmp_path):
    values = {("apache", "C1B", "v4"): [30.0], ("apache", "C1B", "v6"): [15.0]}
    result = _verdict(tmp_path, values, _v4_beats_v6(where={"server": "lean"}))
    assert result.verdict == NOT_MEASURED


def test_partly_measured_claim_says_its_coverage(tmp_path):
    values = {("apache", "C1B", "v4"): [30.0], ("apache", "C1B", "v6"): [15.0], ("apache", "C2B", "v4"): [30.0]}
    result = _verdict(tmp_path, values, _v4_beats_v6())
    assert [c.verdict for c in result.checks] == [HOLDS, NOT_MEASURED]
    assert result.verdict == HOLDS and result.coverage == "1/2"


def test_weak_relation_holds_without_a_difference():
    a, b = Stats([30.0, 30.5, 29.5]), Stats([30.2, 29.8, 30.1])
    assert decide_compare(a, b, ">=", 1.5, 0.05, 10)[0] == HOLDS
    assert decide_compare(a, b, ">", 1.5, 0.05, 10)[0] == INCONCLUSIVE
    assert decide_compare(a, b, "~", 1.5, 0.05, 10)[0] == HOLDS
    assert decide_compare(Stats([30.0]), Stats([10.0]), "~", 1.5, 0.05, 10)[0] == FAILS
    assert decide_compare(Stats([30.0]), Stats([25.0]), "~", 1.5, 0.05, 10)[0] == INCONCLUSIVE


def test_seed_numbers_come_from_published_values(tmp_path):
    values = {("apache", "C1B", "v4"): [30.0], ("apache", "C1B", "v6"): [15.0]}
    published = [{"server": "apache", "level": "C1B", "family": "v4", "throughput_mbps": 28.6},
                 {"server": "apache", "level": "C1B", "family": "v6", "throughput_mbps": 23.5}]
    result = _verdict(tmp_path, values, _v4_beats_v6(), published)
    assert result.checks[0].seed == "v4 28.6, v6 23.5"


# --- the lab report's rules, on an iperf-shaped run ---------------------------------------

def _iperf_run(tmp_path, sessions: dict[tuple[str, float], list[list[float]]], claims: list[dict]) -> RunData:
    metrics = {
        "total_mbps": {"kind": "iperf", "column": "throughput_mbps", "per_repetition": "sum",
                       "where": {"protocol": "tcp"}},
        "session_mbps": {"kind": "iperf", "column": "throughput_mbps", "where": {"protocol": "tcp"}},
    }
    b = RunBuilder("tcp-lab", ["task", "x"], {"metrics": metrics, "claims": claims})
    for (task, x), reps in sessions.items():
        for rep, per_session in enumerate(reps, start=1):
            for i, mbps in enumerate(per_session):
                b.add("iperf", {"task": task, "x": x}, rep, workload="iperf", protocol="tcp", session=i,
                      throughput_mbps=mbps)
    return RunData(b.write(tmp_path / "run"))


def test_share_rule_is_a_property(tmp_path):
    claim = {"id": "19e", "title": "r/n", "seed": "each session achieves around r/n", "property": True,
             "rule": "share", "metric": "session_mbps", "where": {"task": "parallel"}, "for_each": ["x"],
             "tolerance_pct": 20}
    fair = _iperf_run(tmp_path / "a", {("parallel", 2): [[47.0, 47.1]], ("parallel", 4): [[23.0, 24.0, 23.5, 23.6]]},
                      [claim])
    result = evaluate_claims(fair)[0]
    assert result.verdict == HOLDS and not result.property_failed
    unfair = _iperf_run(tmp_path / "b", {("parallel", 2): [[80.0, 14.0]]}, [claim])
    result = evaluate_claims(unfair)[0]
    assert result.verdict == FAILS and result.property_failed


def test_shape_exponential_vs_linear(tmp_path):
    loss = {("loss", x): [[94 * 2.718 ** (-60 * x)]] for x in (0.0, 0.01, 0.02, 0.05, 0.1)}
    delay = {("delay", x): [[94 - 0.8 * x]] for x in (0, 10, 20, 40, 80)}
    claims = [
        {"id": "exp", "title": "loss: exponential", "seed": "exponentially decreased", "rule": "shape",
         "metric": "total_mbps", "where": {"task": "loss"}, "along": "x", "shape": "exponential"},
        {"id": "lin", "title": "delay: linear", "seed": "linearly decreased", "rule": "shape",
         "metric": "total_mbps", "where": {"task": "delay"}, "along": "x", "shape": "linear"},
        {"id": "wrong", "title": "loss: linear", "seed": "-", "rule": "shape",
         "metric": "total_mbps", "where": {"task": "loss"}, "along": "x", "shape": "linear"},
    ]
    results = {r.claim.id: r for r in evaluate_claims(_iperf_run(tmp_path, {**loss, **delay}, claims))}
    assert results["exp"].verdict == HOLDS
    assert results["lin"].verdict == HOLDS
    assert results["wrong"].verdict == FAILS


def test_shape_with_three_points_is_inconclusive(tmp_path):
    loss = {("loss", x): [[94 * 2.718 ** (-60 * x)]] for x in (0.0, 0.01, 0.05)}
    claims = [{"id": "exp", "title": "t", "seed": "s", "rule": "shape", "metric": "total_mbps",
               "where": {"task": "loss"}, "along": "x", "shape": "exponential"}]
    assert evaluate_claims(_iperf_run(tmp_path, loss, claims))[0].verdict == INCONCLUSIVE


def test_monotone_and_matches(tmp_path):
    rising = {("window", x): [[y]] for x, y in ((1000, 10.0), (4000, 40.0), (10000, 93.0), (50000, 94.0))}
    claims = [
        {"id": "m", "title": "rises", "seed": "s", "rule": "monotone", "metric": "total_mbps",
         "where": {"task": "window"}, "along": "x", "direction": "increasing", "tolerance_pct": 5},
        {"id": "p", "title": "plateau", "seed": "s", "rule": "matches", "metric": "total_mbps",
         "where": {"task": "window", "x": [10000, 50000]}, "for_each": ["x"], "expected": 94, "tolerance_pct": 5},
        {"id": "d", "title": "falls", "seed": "s", "rule": "monotone", "metric": "total_mbps",
         "where": {"task": "window"}, "along": "x", "direction": "decreasing"},
    ]
    results = {r.claim.id: r for r in evaluate_claims(_iperf_run(tmp_path, rising, claims))}
    assert results["m"].verdict == HOLDS
    assert results["p"].verdict == HOLDS and len(results["p"].checks) == 2
    assert results["d"].verdict == FAILS


def test_fit_shapes_recovers_parameters():
    xs = [0, 1, 2, 3, 4]
    fits = fit_shapes(xs, [5 + 2 * x for x in xs])
    assert fits["linear"][:2] == pytest.approx((5, 2))
    assert fits["linear"][2] == pytest.approx(0, abs=1e-9)


def test_seed_numbers_that_contradict_the_claim_are_flagged(tmp_path):
    # seed 000 Table 41 at C3B: v4 26.44 < v6 26.8 although the words say v4 >= v6
    values = {("apache", "C3B", "v4"): [30.0], ("apache", "C3B", "v6"): [15.0]}
    published = [{"server": "apache", "level": "C3B", "family": "v4", "throughput_mbps": 26.44},
                 {"server": "apache", "level": "C3B", "family": "v6", "throughput_mbps": 26.8}]
    result = _verdict(tmp_path, values, _v4_beats_v6(), published)
    assert result.checks[0].seed == "v4 26.44, v6 26.8 (the seed's own numbers go the other way)"


def test_compare_for_each_keeps_only_the_values_its_sides_have(tmp_path):
    runs = {("loss_30s", x): [[90 - 500 * x]] for x in (0.0, 0.01)}
    runs.update({("loss_60s", x): [[91 - 500 * x]] for x in (0.0, 0.01)})
    runs.update({("window", x): [[50.0]] for x in (1000, 2000)})  # another figure's x values
    claim = {"id": "e", "title": "30 s = 60 s", "seed": "s", "rule": "compare", "metric": "total_mbps",
             "relation": "~", "a": {"task": "loss_30s"}, "b": {"task": "loss_60s"}, "for_each": ["x"]}
    result = evaluate_claims(_iperf_run(tmp_path, runs, [claim]))[0]
    assert [c.label for c in result.checks] == ["0", "0.01"]
    assert result.verdict == HOLDS


# --- a derived metric: |a - b| of two loads' shares in the same repetition -------------------

def _shares_run(tmp_path, shares: dict[str, list[tuple[float, float]]], metric_extra: dict, claims: list[dict]):
    """A cubic-compound-shaped run: shares[pair] = (stress %, BT %) per repetition, level C1."""
    metrics = {"share_gap_pts": {"kind": "load", "column": "shared_bandwidth_pct", "where": {"workload": "stress"},
                                 "subtract": "shared_bandwidth_pct", "subtract_where": {"workload": "bt"},
                                 **metric_extra}}
    b = RunBuilder("cubic-compound", ["pair", "level"], {"metrics": metrics, "claims": claims})
    for pair, reps in shares.items():
        for rep, (stress, bt) in enumerate(reps, start=1):
            for workload, pct in (("stress", stress), ("bt", bt)):
                b.add("load", {"pair": pair, "level": "C1"}, rep, workload=workload, shared_bandwidth_pct=pct)
    return RunData(b.write(tmp_path / "run"))


def test_subtract_and_absolute_make_a_per_repetition_gap(tmp_path):
    shares = {"IIS-IIS": [(84.0, 87.0), (90.0, 88.5)], "Apache-Apache": [(84.0, 94.0), (96.0, 87.0)]}
    metric = {"subtract": "shared_bandwidth_pct", "subtract_where": {"workload": "bt"}}
    signed = _shares_run(tmp_path / "signed", shares, {}, [])
    gap = _shares_run(tmp_path / "abs", shares, {"absolute": True}, [])
    for run, want in ((signed, {"IIS-IIS": [-3.0, 1.5], "Apache-Apache": [-10.0, 9.0]}),
                      (gap, {"IIS-IIS": [3.0, 1.5], "Apache-Apache": [10.0, 9.0]})):
        m = run.report.metrics["share_gap_pts"]
        assert m.subtract == metric["subtract"]
        for pair, values in want.items():
            samples = sorted(run.samples(m, {"pair": pair}), key=lambda s: s.repetition)
            assert [s.value for s in samples] == pytest.approx(values)


def test_a_gap_compared_between_pairs_decides_claim_4(tmp_path):
    claim = {"id": "4", "title": "Compound shares more equitably", "seed": "gap 2.9 vs 9.5", "rule": "compare",
             "metric": "share_gap_pts", "for_each": ["level"], "a": {"pair": "IIS-IIS"},
             "b": {"pair": "Apache-Apache"}, "relation": "<"}
    equitable = {"IIS-IIS": [(84.0, 87.0), (88.0, 87.0), (86.0, 88.0)],
                 "Apache-Apache": [(84.0, 94.0), (95.0, 86.0), (85.0, 95.5)]}
    assert evaluate_claims(_shares_run(tmp_path / "a", equitable, {"absolute": True}, [claim]))[0].verdict == HOLDS
    # the signed difference swings around 0 for Apache: no longer a measure of equity
    signed = evaluate_claims(_shares_run(tmp_path / "b", equitable, {}, [claim]))[0]
    assert signed.verdict != HOLDS
    reversed_ = {"IIS-IIS": equitable["Apache-Apache"], "Apache-Apache": equitable["IIS-IIS"]}
    assert evaluate_claims(_shares_run(tmp_path / "c", reversed_, {"absolute": True}, [claim]))[0].verdict == FAILS


@pytest.mark.parametrize("metric, error", [
    ({"subtract_where": {"workload": "bt"}}, "subtract_where needs subtract"),
    ({"subtract": "achieved_mbps", "divide_by": "achieved_mbps"}, "not both"),
    ({"subtract": "no_such_column"}, "not in results/load.csv"),
])
def test_subtract_is_validated(metric, error):
    with pytest.raises(ValueError, match=error):
        MetricSpec(kind="load", column="shared_bandwidth_pct", **metric)


def _best_claim(**rule) -> dict:
    claim = {"id": "9", "title": "the best cell", "seed": "words", "rule": "best", "metric": "throughput_mbps",
             "among": ["server", "family"]}
    claim.update(rule)
    return {"metrics": METRICS, "claims": [claim]}


BEST_VALUES = {("apache", "C1B", "v4"): [30.1, 29.5, 30.8], ("apache", "C1B", "v6"): [24.0, 24.9, 23.7],
               ("lean", "C1B", "v4"): [5.0, 5.2, 4.9], ("lean", "C1B", "v6"): [4.1, 4.4, 4.0],
               ("apache", "C2B", "v4"): [20.1, 20.5, 20.8], ("apache", "C2B", "v6"): [24.0, 24.9, 23.7],
               ("lean", "C2B", "v4"): [5.0, 5.2, 4.9], ("lean", "C2B", "v6"): [4.1, 4.4, 4.0]}


def test_best_holds_for_the_best_cell_and_fails_when_another_is_significantly_better(tmp_path):
    result = _verdict(tmp_path, BEST_VALUES, _best_claim(a={"server": "apache", "family": "v4"}, for_each=["level"]))
    assert [c.verdict for c in result.checks] == [HOLDS, FAILS]
    assert "best apache, v6" in result.checks[1].ours and "of 4 cells" in result.checks[1].ours
    lowest = _verdict(tmp_path / "low", BEST_VALUES, _best_claim(a={"server": "lean", "family": "v6"},
                                                                 for_each=["level"], best="lowest"))
    assert lowest.verdict == HOLDS


def test_best_is_inconclusive_when_the_better_cell_is_not_significantly_better(tmp_path):
    values = {("apache", "C1B", "v4"): [30.0, 26.0, 34.0], ("apache", "C1B", "v6"): [29.0, 33.0, 31.5]}
    result = _verdict(tmp_path, values, _best_claim(a={"server": "apache", "family": "v4"}))
    assert result.verdict == INCONCLUSIVE


def test_best_along_a_dimension_holds_when_the_winner_changes_and_fails_when_it_does_not(tmp_path):
    changes = _verdict(tmp_path / "c", BEST_VALUES, _best_claim(along="level"))
    assert changes.verdict == HOLDS and changes.checks[0].ours == "C1B: apache, v4; C2B: apache, v6"
    same = dict(BEST_VALUES) | {("apache", "C2B", "v4"): [40.0, 41.0, 39.0]}
    assert _verdict(tmp_path / "s", same, _best_claim(along="level")).verdict == FAILS
    one_level = {k: v for k, v in BEST_VALUES.items() if k[1] == "C1B"}
    assert _verdict(tmp_path / "o", one_level, _best_claim(along="level")).verdict == INCONCLUSIVE


def test_best_needs_among_and_either_a_or_along():
    from congestlab.spec.report import ReportSpec

    for bad in ({"among": []}, {"a": {"server": "apache"}, "along": "level"}, {}):
        with pytest.raises(ValueError, match="rule 'best' needs among"):
            ReportSpec.model_validate(_best_claim(among=["server"], **bad) if "among" not in bad
                                      else _best_claim(**bad, along="level"))
