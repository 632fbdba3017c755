"""Calibration end to end: claims of a hand-made run decided through the report's run data and
claims (report/data.py RunData, report/claims/ evaluate_claim), not only the stats layer
(docs/statistics.md, "Calibration").

Each simulated run (report_fixtures.RunBuilder) has three servers, one point each, whose GETs
(v4 and v6, one of each per repetition) share the repetition's level (sd 0.3 on the log scale,
as a machine's load); its claims compare v6 with v4 by server, each with the truth on the test's
boundary: apache v6 ~ v4 (no effect, "v6 slower"), lean v6 = 1.1 x v4 (equivalence within 10 %,
at its margin) and nginx with no effect and ~15 % of its GETs timed out (the rank test). At every
look (the first k repetitions, as --until-decisive reads them) each claim's p-values are those the
stats layer gives for the same samples, and the errors per side at the design's levels stay within
2.5 % plus Monte Carlo error (python/tests/unit/calibration_sim.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from calibration_sim import ALPHA, FIRST_LOOK, Outcome, allowed, decide, schedule
from congestlab.report.claims import evaluate_claim
from congestlab.report.data import RunData
from congestlab.stats import rules
from congestlab.stats.median_ratio import compare
from congestlab.stats.outcomes import COMPLETE, TIMED_OUT
from congestlab.stats.samples import Cell
from report_fixtures import RunBuilder

RUNS = 60
ROUNDS = 8
SIGMA = 0.1
TIMEOUT_S = 0.45
BASE_MS = 300.0
MARGIN_PCT = 10.0
TRUTH = {"apache": 0.0, "lean": math.log1p(MARGIN_PCT / 100), "nginx": 0.0}
CENSORED = {"nginx": math.log(TIMEOUT_S * 1000 / BASE_MS) / math.hypot(0.3, SIGMA)}  # ~15 % above the timeout
REPORT = {
    "metrics": {"delay": {"kind": "request", "column": "delay_ms", "unit": "ms", "where": {"outcome": "complete"}}},
    "claims": [
        {"id": "slower", "title": "apache: v6 slower than v4", "seed": "test", "rule": "compare", "metric": "delay",
         "relation": ">", "a": {"family": "v6"}, "b": {"family": "v4"}, "where": {"server": "apache"}},
        {"id": "equal", "title": "lean: v6 as fast as v4", "seed": "test", "rule": "compare", "metric": "delay",
         "relation": "~", "margin_pct": MARGIN_PCT, "reason": "a test's margin", "a": {"family": "v6"},
         "b": {"family": "v4"}, "where": {"server": "lean"}},
        {"id": "timeouts", "title": "nginx: v6 slower than v4", "seed": "test", "rule": "compare", "metric": "delay",
         "relation": ">", "a": {"family": "v6"}, "b": {"family": "v4"}, "where": {"server": "nginx"}},
    ],
}


def simulated_run(rng: np.random.Generator, path) -> tuple[RunData, dict]:
    """A run of ROUNDS repetitions; also each server's (v6, v4) log delays by repetition."""
    b = RunBuilder("ipv6", ["server"], REPORT)
    truth: dict[str, tuple[list, list]] = {}
    for rep in range(1, ROUNDS + 1):
        level = rng.normal(0, 0.3)
        for server, effect in TRUTH.items():
            for family, shift in (("v6", effect), ("v4", 0.0)):
                log_ms = math.log(BASE_MS) + level + shift + rng.normal(0, SIGMA)
                row = dict(server=server, client="c", family=family, file_kib=320, timeout_s=TIMEOUT_S,
                           start_ts=1000.0 + rep)
                if server in CENSORED and log_ms > math.log(TIMEOUT_S * 1000):
                    row.update(outcome=TIMED_OUT, ok=False, error=f"timed out after {TIMEOUT_S:g} s")
                    log_ms = math.nan
                else:
                    row.update(outcome=COMPLETE, ok=True, delay_ms=round(math.exp(log_ms), 6))
                b.add("request", {"server": server}, rep, **row)
                truth.setdefault(server, ([], []))[family == "v4"].append(log_ms)
    return RunData(b.write(path)), truth


def _engine_p(samples: tuple[list, list], rounds: int, claim: dict) -> tuple[float, float]:
    """The stats layer's (p holds, p does not hold) on the same samples, without the report."""
    def cell(xs):
        xs = xs[:rounds]
        return Cell.of([math.exp(x) if math.isfinite(x) else math.nan for x in xs],
                       [COMPLETE if math.isfinite(x) else TIMED_OUT for x in xs], [str(r + 1) for r in range(rounds)],
                       TIMEOUT_S * 1000)
    e = compare(cell(samples[0]), cell(samples[1]))
    v = rules.direction(e) if claim["relation"] == ">" else rules.equivalence(e, MARGIN_PCT)
    return v.p_holds, v.p_fails


@pytest.fixture(scope="module")
def claim_paths(tmp_path_factory) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2811)
    looks = range(FIRST_LOOK, ROUNDS + 1)
    paths = {c["id"]: np.empty((RUNS, len(looks), 2)) for c in REPORT["claims"]}
    for i in range(RUNS):
        data, truth = simulated_run(rng, tmp_path_factory.mktemp("run"))
        for spec, claim in zip(data.report.claims, REPORT["claims"]):
            server = claim["where"]["server"]
            for k, r in enumerate(looks):
                result = evaluate_claim(data, spec, alpha=ALPHA, repetitions=[str(x) for x in range(1, r + 1)])
                p = (result.decision.p_holds, result.decision.p_fails)
                assert p == pytest.approx(_engine_p(truth[server], r, claim), rel=1e-6, abs=1e-9)  # delays: 6 decimals
                paths[claim["id"]][i, k] = p
    return paths


def test_claims_through_the_report_err_within_alpha(claim_paths, request):
    levels = schedule("design", ROUNDS)
    lines, errors, trials = [], 0, 0
    for claim_id, paths in claim_paths.items():
        verdicts, rounds = decide(paths, levels)
        o = Outcome({v: verdicts.count(v) for v in (rules.HOLDS, rules.FAILS, rules.INCONCLUSIVE)},
                    verdicts.count(rules.HOLDS) + verdicts.count(rules.FAILS), 2 * len(verdicts), float(rounds.mean()))
        lines.append(f"{claim_id:9} holds {o.counts[rules.HOLDS]:3d}, does not hold {o.counts[rules.FAILS]:3d} of "
                     f"{len(verdicts)}: {o.rate:.1%} per side (allowed {allowed(o.trials, len(claim_paths))})")
        assert o.errors <= allowed(o.trials, len(claim_paths)), lines[-1]
        errors, trials = errors + o.errors, trials + o.trials
    lines.append(f"pooled: {errors}/{trials} = {errors / trials:.2%} per side (allowed {allowed(trials)})")
    print("\n" + "\n".join(lines))
    request.node.add_report_section("call", "claims calibration", "\n".join(lines))
    assert errors <= allowed(trials) and errors > 0
