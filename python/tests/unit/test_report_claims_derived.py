"""A derived metric's verdicts on hand-made results: |a - b| of two loads' shares in the same
repetition (spec/metric.py `subtract`, `absolute`), decided by congestlab/report/claims/
(split from test_report_claims.py)."""

from __future__ import annotations

import pytest

from congestlab.report.claims import FAILS, HOLDS, evaluate_claims
from congestlab.report.data import RunData
from congestlab.spec.metric import MetricSpec
from report_fixtures import RunBuilder


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
    equitable = {"IIS-IIS": [(84.0, 87.0), (88.0, 87.0), (86.0, 88.0), (87.0, 86.0)],
                 "Apache-Apache": [(84.0, 94.0), (95.0, 86.0), (85.0, 95.5), (96.0, 86.5)]}
    assert evaluate_claims(_shares_run(tmp_path / "a", equitable, {"absolute": True}, [claim]))[0].verdict == HOLDS
    # the signed difference swings around 0 (values <= 0: ranks decide): no longer a measure of equity
    signed = evaluate_claims(_shares_run(tmp_path / "b", equitable, {}, [claim]))[0]
    assert signed.verdict != HOLDS and "Gehan" in signed.checks[0].detail
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
