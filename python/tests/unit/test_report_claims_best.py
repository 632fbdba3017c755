"""The `best` rule's verdicts on hand-made results (report/claims/best.py): better than every
other cell, or the best cell changing along an axis (split from test_report_claims.py)."""

from __future__ import annotations

import pytest

from congestlab.report.claims import FAILS, HOLDS, INCONCLUSIVE, evaluate_claims
from congestlab.report.data import RunData
from congestlab.spec.report import ReportSpec
from report_fixtures import request_run


def _best_claim(**rule) -> dict:
    claim = {"id": "9", "title": "the best cell", "seed": "words", "rule": "best", "metric": "throughput_mbps",
             "among": ["server", "family"]}
    claim.update(rule)
    return {"metrics": {"throughput_mbps": {"kind": "request", "column": "nrt_throughput_mbps", "unit": "Mbit/s"}},
            "claims": [claim]}


def _verdict(tmp_path, values, report):
    return evaluate_claims(RunData(request_run(values, report=report).write(tmp_path / "run")))[0]


BEST_VALUES = {("apache", "C1B", "v4"): [30.1, 29.5, 30.8, 30.3], ("apache", "C1B", "v6"): [24.0, 24.9, 23.7, 24.2],
               ("lean", "C1B", "v4"): [5.0, 5.2, 4.9, 5.1], ("lean", "C1B", "v6"): [4.1, 4.4, 4.0, 4.2],
               ("apache", "C2B", "v4"): [20.1, 20.5, 20.8, 20.2], ("apache", "C2B", "v6"): [24.0, 24.9, 23.7, 24.3],
               ("lean", "C2B", "v4"): [5.0, 5.2, 4.9, 5.1], ("lean", "C2B", "v6"): [4.1, 4.4, 4.0, 4.2]}


def test_best_holds_when_better_than_every_other_cell_and_fails_when_another_is_better(tmp_path):
    result = _verdict(tmp_path, BEST_VALUES, _best_claim(a={"server": "apache", "family": "v4"}, for_each=["level"]))
    assert [c.verdict for c in result.checks] == [HOLDS, FAILS]
    assert "the highest mean apache, v6 of 4 cells" in result.checks[1].ours
    lowest = _verdict(tmp_path / "low", BEST_VALUES, _best_claim(a={"server": "lean", "family": "v6"},
                                                                 for_each=["level"], best="lowest"))
    assert lowest.verdict == HOLDS


def test_best_is_inconclusive_when_the_better_cell_is_not_significantly_better(tmp_path):
    values = {("apache", "C1B", "v4"): [30.0, 26.0, 34.0], ("apache", "C1B", "v6"): [29.0, 33.0, 31.5]}
    result = _verdict(tmp_path, values, _best_claim(a={"server": "apache", "family": "v4"}))
    assert result.verdict == INCONCLUSIVE


def test_best_changes_needs_a_significant_swap(tmp_path):
    changes = _verdict(tmp_path / "c", BEST_VALUES, _best_claim(along="level"))
    assert changes.verdict == HOLDS and changes.checks[0].ours.endswith("C1B: apache, v4; C2B: apache, v6")
    same = dict(BEST_VALUES) | {("apache", "C2B", "v4"): [40.0, 41.0, 39.0, 40.5]}
    assert _verdict(tmp_path / "s", same, _best_claim(along="level")).verdict == FAILS
    # the arg-max moves, but by noise: not a change
    noise = dict(BEST_VALUES) | {("apache", "C2B", "v4"): [30.0, 22.0, 33.0, 26.0],
                                 ("apache", "C2B", "v6"): [29.0, 31.0, 24.0, 30.0]}
    assert _verdict(tmp_path / "n", noise, _best_claim(along="level")).verdict == INCONCLUSIVE
    one_level = {k: v for k, v in BEST_VALUES.items() if k[1] == "C1B"}
    assert _verdict(tmp_path / "o", one_level, _best_claim(along="level")).verdict == INCONCLUSIVE


def test_best_needs_among_and_either_a_or_along():
    for bad in ({"among": []}, {"a": {"server": "apache"}, "along": "level"}, {}):
        with pytest.raises(ValueError, match="rule 'best' needs among"):
            ReportSpec.model_validate(_best_claim(among=["server"], **bad) if "among" not in bad
                                      else _best_claim(**bad, along="level"))
