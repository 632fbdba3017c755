"""Verdicts on hand-made results, each rule of congestlab/report/claims/ decided by the
statistics engine: every rule is shown to hold and not to hold, an underpowered run to be
inconclusive (never "holds" by default), timed-out GETs censored (never dropped), invalid ones
excluded and counted."""

from __future__ import annotations

import pytest

from congestlab.report.claims import (DESCRIPTIVE, FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURED, evaluate_claims,
                                      seed_agrees)
from congestlab.report.data import RunData
from congestlab.spec.report import CheckSpec
from report_fixtures import RunBuilder, get_outcome_row, request_run

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


def _run(tmp_path, values, report, published=None) -> RunData:
    return RunData(request_run(values, report=report, published=published).write(tmp_path / "run"))


def _verdict(tmp_path, values, report, published=None, **kw):
    return evaluate_claims(_run(tmp_path, values, report, published), **kw)[0]


CLEAR = {("apache", "C1B", "v4"): [30.1, 29.5, 30.8], ("apache", "C1B", "v6"): [24.0, 24.9, 23.7],
         ("apache", "C2B", "v4"): [31.0, 30.2, 30.9], ("apache", "C2B", "v6"): [25.1, 24.4, 25.5]}


# --- direction -------------------------------------------------------------------------------
def test_direction_holds_when_the_ci_excludes_zero_and_says_its_numbers(tmp_path):
    result = _verdict(tmp_path, CLEAR, _v4_beats_v6())
    assert result.verdict == HOLDS
    assert [c.verdict for c in result.checks] == [HOLDS, HOLDS]
    detail = result.checks[0].detail
    assert "effect +" in detail and "n=6, censored 0, invalid 0" in detail and "CI of log(a/b)" in detail
    assert result.rounds_needed is None


def test_direction_fails_when_the_ci_lies_the_other_way(tmp_path):
    values = dict(CLEAR) | {("apache", "C1B", "v4"): [24.0, 24.9, 23.7], ("apache", "C1B", "v6"): [30.1, 29.5, 30.8]}
    result = _verdict(tmp_path, values, _v4_beats_v6())
    assert result.verdict == FAILS
    assert [c.verdict for c in result.checks] == [FAILS, HOLDS]


def test_no_significant_difference_is_inconclusive_with_the_rounds_it_needs(tmp_path):
    values = {("apache", "C1B", "v4"): [31.0, 27.0, 34.0], ("apache", "C1B", "v6"): [29.0, 28.5, 31.5]}
    result = _verdict(tmp_path, values, _v4_beats_v6())
    assert result.verdict == INCONCLUSIVE
    assert result.rounds_needed is not None and result.rounds_needed > 3


def test_one_repetition_is_descriptive_however_large_the_ratio(tmp_path):
    # the same rule at every n: no ratio margin decides a single repetition; it is shown, not tested
    values = {("apache", "C1B", "v4"): [30.0], ("apache", "C1B", "v6"): [10.0]}
    result = _verdict(tmp_path, values, _v4_beats_v6())
    assert result.verdict == DESCRIPTIVE and result.checks[0].decision is None
    assert "no spread" in result.checks[0].detail


def test_claim_on_an_unmeasured_server_is_not_measured(tmp_path):
    result = _verdict(tmp_path, CLEAR, _v4_beats_v6(where={"server": "lean"}))
    assert result.verdict == NOT_MEASURED


def test_partly_measured_claim_says_its_coverage_and_cannot_hold(tmp_path):
    values = {k: v for k, v in CLEAR.items() if k != ("apache", "C2B", "v6")}
    result = _verdict(tmp_path, values, _v4_beats_v6())
    assert [c.verdict for c in result.checks] == [HOLDS, NOT_MEASURED]
    assert result.verdict == INCONCLUSIVE and result.coverage == "1/2" and result.gaps == ["C2B"]


def test_many_checks_are_adjusted_on_the_fails_side(tmp_path):
    # one check against the claim at p ~ 0.01 decides alone; among 12 checks Holm keeps it undecided
    against = {("apache", "C1B", "v4"): [27.0, 25.0, 26.5], ("apache", "C1B", "v6"): [30.0, 29.0, 31.5]}
    alone = _verdict(tmp_path / "one", against, _v4_beats_v6())
    assert alone.verdict == FAILS
    p = alone.checks[0].decision.p_fails
    assert 0.025 / 12 < p < 0.025
    many = dict(against)
    for i in range(2, 13):
        many[("apache", f"C{i}", "v4")] = [31.0, 25.0, 36.0]
        many[("apache", f"C{i}", "v6")] = [30.0, 29.0, 31.0]
    result = _verdict(tmp_path / "many", many, _v4_beats_v6())
    assert result.verdict == INCONCLUSIVE
    assert "after Holm" in result.checks[0].detail


def test_points_name_what_feeds_the_claim_and_alpha_and_repetitions_can_be_given(tmp_path):
    values = {("apache", "C1B", "v4"): [30.0, 31.0, 29.0], ("apache", "C1B", "v6"): [27.0, 30.5, 28.0]}
    data = _run(tmp_path, values, _v4_beats_v6())
    result = evaluate_claims(data)[0]
    assert result.points == {"main.server-apache.level-C1B"}
    assert result.verdict == INCONCLUSIVE
    assert evaluate_claims(data, alpha=0.2)[0].verdict == HOLDS
    first_two = evaluate_claims(data, repetitions=["1", "2"])[0]
    assert first_two.checks[0].decision.n == 4


# --- censored and invalid GETs ---------------------------------------------------------------
CENSORED_METRICS = {
    "delay_ms": {"kind": "request", "column": "delay_ms", "unit": "ms", "where": {"outcome": "complete"}},
    "throughput_mbps": {"kind": "request", "column": "nrt_throughput_mbps", "unit": "Mbit/s",
                        "where": {"outcome": "complete"}},
}


def _outcome_run(tmp_path, cells: dict[str, list], claim: dict) -> RunData:
    """cells[server] = one entry per repetition: a delay in ms (complete), "timeout" or "invalid"."""
    b = RunBuilder("ipv6", ["server"], {"metrics": CENSORED_METRICS, "claims": [claim]})
    for server, reps in cells.items():
        for rep, d in enumerate(reps, start=1):
            row = get_outcome_row(d, rep)
            if row["outcome"] == "complete":
                row["nrt_throughput_mbps"] = 320 * 8.192 / d
            b.add("request", {"server": server}, rep, server=server, **row)
    return RunData(b.write(tmp_path / "run"))


def _slower(metric="delay_ms", relation=">") -> dict:
    return {"id": "c", "title": "lean is slower", "seed": "s", "rule": "compare", "metric": metric,
            "relation": relation, "a": {"server": "lean"}, "b": {"server": "apache"}}


def test_timed_out_gets_are_censored_not_dropped(tmp_path):
    cells = {"lean": [400.0, "timeout", 420.0, 410.0, "timeout", 405.0], "apache": [300.0, 310.0, 305.0, 295.0, 300.0,
                                                                                  302.0]}
    check = evaluate_claims(_outcome_run(tmp_path, cells, _slower()))[0].checks[0]
    assert check.decision.censored == 2 and check.decision.n == 12
    assert "2 censored > 450" in check.ours
    assert check.verdict == HOLDS
    # throughput: a timed-out GET's throughput is an upper bound (left-censored)
    slower_thr = _outcome_run(tmp_path / "thr", cells, _slower("throughput_mbps", "<"))
    thr = evaluate_claims(slower_thr)[0].checks[0]
    assert thr.verdict == HOLDS and thr.decision.censored == 2 and "2 censored <" in thr.ours


def test_a_cell_that_loses_its_slowest_gets_does_not_look_fast(tmp_path):
    # the completed GETs of lean are as fast as Apache's; half of them timed out: dropped, the
    # effect would be about 0; censored at the timeout it is well above
    cells = {"lean": [300.0, "timeout", 320.0, "timeout", "timeout", 305.0],
             "apache": [300.0, 310.0, 305.0, 295.0, 300.0, 302.0]}
    check = evaluate_claims(_outcome_run(tmp_path, cells, _slower()))[0].checks[0]
    assert check.decision.effect_pct > 20 and check.verdict != FAILS


def test_invalid_gets_are_excluded_and_counted(tmp_path):
    cells = {"lean": [300.0, "invalid", 330.0, 310.0], "apache": [100.0, 101.0, 99.0, 98.0]}
    check = evaluate_claims(_outcome_run(tmp_path, cells, _slower()))[0].checks[0]
    assert check.decision.invalid == 1 and check.decision.n == 7
    assert "1 invalid" in check.ours and check.verdict == HOLDS


# --- margins: equivalence and non-inferiority ------------------------------------------------
def _margin_claim(relation: str, margin: float = 5) -> dict:
    return _v4_beats_v6(relation=relation, margin_pct=margin, reason="a test margin")


def test_equivalence_holds_inside_the_margin_fails_outside_and_is_inconclusive_when_underpowered(tmp_path):
    same = {("apache", "C1B", "v4"): [30.0, 30.2, 29.9, 30.1], ("apache", "C1B", "v6"): [30.1, 30.0, 30.0, 30.2]}
    apart = {("apache", "C1B", "v4"): [30.0, 30.2, 29.9, 30.1], ("apache", "C1B", "v6"): [24.1, 24.0, 24.0, 24.2]}
    noisy = {("apache", "C1B", "v4"): [30.0, 24.0], ("apache", "C1B", "v6"): [27.0, 31.0]}
    assert _verdict(tmp_path / "s", same, _margin_claim("~")).verdict == HOLDS
    assert _verdict(tmp_path / "a", apart, _margin_claim("~")).verdict == FAILS
    underpowered = _verdict(tmp_path / "n", noisy, _margin_claim("~"))
    assert underpowered.verdict == INCONCLUSIVE
    assert "TOST" in underpowered.checks[0].detail and "a test margin" in underpowered.checks[0].detail


def test_at_least_and_at_most_are_non_inferiority(tmp_path):
    equal = {("apache", "C1B", "v4"): [30.0, 30.2, 29.9, 30.1], ("apache", "C1B", "v6"): [30.1, 30.0, 30.0, 30.2]}
    below = {("apache", "C1B", "v4"): [24.0, 24.2, 23.9, 24.1], ("apache", "C1B", "v6"): [30.1, 30.0, 30.0, 30.2]}
    noisy = {("apache", "C1B", "v4"): [30.0, 24.0], ("apache", "C1B", "v6"): [27.0, 31.0]}
    assert _verdict(tmp_path / "e", equal, _margin_claim(">=")).verdict == HOLDS
    assert _verdict(tmp_path / "b", below, _margin_claim(">=")).verdict == FAILS
    assert _verdict(tmp_path / "n", noisy, _margin_claim(">=")).verdict == INCONCLUSIVE  # never holds by default
    assert _verdict(tmp_path / "m", below, _margin_claim("<=")).verdict == HOLDS
    above = {k: v for k, v in below.items()} | {("apache", "C1B", "v4"): [36.0, 36.2, 35.9, 36.1]}
    assert _verdict(tmp_path / "a", above, _margin_claim("<=")).verdict == FAILS


@pytest.mark.parametrize("fields, error", [
    ({"relation": "~"}, "needs margin_pct"),
    ({"relation": ">="}, "needs margin_pct"),
    ({"relation": "~", "margin_pct": 5}, "needs its reason"),
    ({"range_pct": [4, 23]}, "needs its reason"),
    ({"range_pct": [23, 4], "reason": "r"}, "lower bound must be below"),
])
def test_a_margin_relation_without_margin_or_reason_is_a_spec_error(fields, error):
    with pytest.raises(ValueError, match=error):
        CheckSpec(rule="compare", metric="m", a={"family": "v4"}, b={"family": "v6"}, **fields)


# --- magnitudes ------------------------------------------------------------------------------
def test_a_seed_range_of_the_ratio_holds_when_the_ci_meets_it_and_fails_when_wholly_outside(tmp_path):
    claim = _v4_beats_v6(range_pct=[4, 23], reason="the seed's words")
    inside = {("apache", "C1B", "v4"): [30.0, 30.2, 29.9, 30.1], ("apache", "C1B", "v6"): [26.1, 26.0, 26.0, 26.2]}
    outside = {("apache", "C1B", "v4"): [30.0, 30.2, 29.9, 30.1], ("apache", "C1B", "v6"): [20.1, 20.0, 20.0, 20.2]}
    assert _verdict(tmp_path / "i", inside, claim).verdict == HOLDS
    assert _verdict(tmp_path / "o", outside, claim).verdict == FAILS


def test_a_seed_range_of_the_difference_is_paired_by_repetition(tmp_path):
    claim = _v4_beats_v6(metric="delay_ms", a={"family": "v6"}, b={"family": "v4"}, range=[6, 32], reason="seed")
    v4 = [100.0, 140.0, 90.0, 120.0]  # a spread across repetitions the pairing removes
    delays = {("apache", "C1B", "v4"): v4, ("apache", "C1B", "v6"): [d + 20 + e for d, e in zip(v4, (1, -1, 2, 0))]}
    far = {("apache", "C1B", "v4"): v4, ("apache", "C1B", "v6"): [d + 90 + e for d, e in zip(v4, (1, -1, 2, 0))]}
    thr = {k: [30.0] * 4 for k in delays}
    inside = evaluate_claims(RunData(request_run(thr, delay=delays, report=claim).write(tmp_path / "i")))[0]
    assert inside.verdict == HOLDS and "difference +20" in inside.checks[0].ours
    outside = evaluate_claims(RunData(request_run(thr, delay=far, report=claim).write(tmp_path / "o")))[0]
    assert outside.verdict == FAILS


def test_range_rule_tests_one_cells_value(tmp_path):
    def claim(lo, hi):
        return {"metrics": METRICS, "claims": [{"id": "r", "title": "t", "seed": "s", "rule": "range",
                                                "metric": "throughput_mbps", "range": [lo, hi], "reason": "seed",
                                                "where": {"server": "apache", "family": "v4"}}]}
    values = {("apache", "C1B", "v4"): [90.0, 91.0, 90.5, 89.8]}
    assert _verdict(tmp_path / "i", values, claim(85.7, 98)).verdict == HOLDS
    assert _verdict(tmp_path / "o", values, claim(60, 80)).verdict == FAILS


def test_seed_agrees_reads_the_check():
    assert seed_agrees(26.44, 26.8, CheckSpec(rule="compare", metric="m", a={"f": 1}, b={"f": 2}, relation=">")) is False
    near = CheckSpec(rule="compare", metric="m", a={"f": 1}, b={"f": 2}, relation="~", margin_pct=5, reason="r")
    assert seed_agrees(26.44, 26.8, near) is True


def test_seed_numbers_come_from_published_values_and_contradictions_are_flagged(tmp_path):
    published = [{"server": "apache", "level": "C1B", "family": "v4", "throughput_mbps": 28.6},
                 {"server": "apache", "level": "C1B", "family": "v6", "throughput_mbps": 23.5},
                 {"server": "apache", "level": "C2B", "family": "v4", "throughput_mbps": 26.44},
                 {"server": "apache", "level": "C2B", "family": "v6", "throughput_mbps": 26.8}]
    result = _verdict(tmp_path, CLEAR, _v4_beats_v6(), published)
    assert result.checks[0].seed == "v4 28.6, v6 23.5"
    assert result.checks[1].seed == "v4 26.44, v6 26.8 (the seed's own numbers go the other way)"


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
             "tolerance_pct": 20, "reason": "a test margin"}
    fair = _iperf_run(tmp_path / "a", {("parallel", 2): [[47.0, 47.1], [46.8, 47.3], [47.2, 46.9]],
                                       ("parallel", 4): [[23.0, 24.0, 23.5, 23.6], [23.4, 23.6, 23.1, 23.9],
                                                         [23.5, 23.5, 23.2, 23.8]]}, [claim])
    result = evaluate_claims(fair)[0]
    assert result.verdict == HOLDS and not result.property_failed
    unfair = _iperf_run(tmp_path / "b", {("parallel", 2): [[80.0, 14.0], [78.0, 16.0], [81.0, 13.0]]}, [claim])
    result = evaluate_claims(unfair)[0]
    assert result.verdict == FAILS and result.property_failed
    once = _iperf_run(tmp_path / "c", {("parallel", 2): [[80.0, 14.0]]}, [claim])  # one repetition: shown, untested
    assert evaluate_claims(once)[0].verdict == DESCRIPTIVE


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


def test_shape_with_two_values_of_x_is_descriptive(tmp_path):
    # every two-parameter curve passes through two points: no form can be told from another
    loss = {("loss", x): [[94 * 2.718 ** (-60 * x)] * 3] for x in (0.0, 0.05)}
    claims = [{"id": "exp", "title": "t", "seed": "s", "rule": "shape", "metric": "total_mbps",
               "where": {"task": "loss"}, "along": "x", "shape": "exponential"}]
    assert evaluate_claims(_iperf_run(tmp_path, loss, claims))[0].verdict == DESCRIPTIVE


def _monotone(direction: str, **extra) -> dict:
    return {"id": direction, "title": "t", "seed": "s", "rule": "monotone", "metric": "total_mbps",
            "where": {"task": "window"}, "along": "x", "direction": direction, "tolerance_pct": 5, **extra}


def test_monotone_trend_holds_fails_and_needs_enough_values(tmp_path):
    rising = {("window", x): [[y]] for x, y in ((1000, 10.0), (2000, 20.0), (4000, 40.0), (8000, 70.0),
                                                (10000, 93.0), (50000, 94.0))}
    results = {r.claim.id: r for r in evaluate_claims(_iperf_run(tmp_path / "r", rising,
                                                                 [_monotone("increasing"), _monotone("decreasing")]))}
    assert results["increasing"].verdict == HOLDS
    assert results["decreasing"].verdict == FAILS
    assert "Kendall" in results["increasing"].checks[0].detail
    few = {k: v for k, v in list(rising.items())[:4]}  # 4 values: Kendall's smallest one-sided p is 1/24
    assert evaluate_claims(_iperf_run(tmp_path / "f", few, [_monotone("increasing")]))[0].verdict == DESCRIPTIVE


def test_monotone_fails_on_a_significant_step_back(tmp_path):
    def reps(y):
        return [[y * f] for f in (0.99, 1.0, 1.01)]

    dip = {("window", x): reps(y) for x, y in ((1000, 10.0), (2000, 20.0), (4000, 40.0), (8000, 30.0),
                                               (10000, 93.0), (50000, 94.0))}
    result = evaluate_claims(_iperf_run(tmp_path, dip, [_monotone("increasing")]))[0]
    assert result.verdict == FAILS and "4000→8000" in result.checks[0].detail


def test_matches_is_an_equivalence_test_against_the_seed(tmp_path):
    plateau = {("window", x): [[y], [y + 0.4], [y - 0.3]] for x, y in ((10000, 93.0), (50000, 94.0))}
    claim = {"id": "p", "title": "plateau", "seed": "s", "rule": "matches", "metric": "total_mbps",
             "where": {"task": "window"}, "for_each": ["x"], "expected": 94, "tolerance_pct": 5,
             "reason": "a test margin"}
    result = evaluate_claims(_iperf_run(tmp_path / "a", plateau, [claim]))[0]
    assert result.verdict == HOLDS and len(result.checks) == 2 and "TOST" in result.checks[0].detail
    low = {("window", 10000): [[80.0], [80.5], [79.6]]}
    assert evaluate_claims(_iperf_run(tmp_path / "b", low, [claim]))[0].verdict == FAILS
    once = {("window", 10000): [[94.0]]}  # one repetition: a point estimate, no test
    assert evaluate_claims(_iperf_run(tmp_path / "c", once, [claim]))[0].verdict == DESCRIPTIVE


def test_compare_for_each_keeps_only_the_values_its_sides_have(tmp_path):
    runs = {("loss_30s", x): [[90 - 500 * x + d] for d in (0.1, -0.1, 0.0)] for x in (0.0, 0.01)}
    runs.update({("loss_60s", x): [[90.2 - 500 * x + d] for d in (0.0, 0.1, -0.1)] for x in (0.0, 0.01)})
    runs.update({("window", x): [[50.0]] for x in (1000, 2000)})  # another figure's x values
    claim = {"id": "e", "title": "30 s = 60 s", "seed": "s", "rule": "compare", "metric": "total_mbps",
             "relation": "~", "margin_pct": 10, "reason": "r", "a": {"task": "loss_30s"},
             "b": {"task": "loss_60s"}, "for_each": ["x"]}
    result = evaluate_claims(_iperf_run(tmp_path, runs, [claim]))[0]
    assert [c.label for c in result.checks] == ["0", "0.01"]
    assert result.verdict == HOLDS
