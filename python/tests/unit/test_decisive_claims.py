"""What --until-decisive asks of a claim (congestlab/decisive/claims.py): the points feeding it,
its verdict at a look's level, and the rounds a power estimate says it needs."""

from __future__ import annotations

from congestlab.decisive import claims as claim_rules
from congestlab.report.claims import evaluate_claim
from congestlab.stats.rules import ALPHA
from congestlab.report.claims import FAILS, HOLDS, INCONCLUSIVE
from congestlab.report.data import RunData
from report_fixtures import request_run

METRICS = {"throughput_mbps": {"kind": "request", "column": "nrt_throughput_mbps", "unit": "Mbit/s",
                               "where": {"outcome": "complete"}}}


def _report(**claim) -> dict:
    base = {"id": "14", "title": "v4 > v6", "seed": "v4 is faster", "rule": "compare", "metric": "throughput_mbps",
            "a": {"family": "v4"}, "b": {"family": "v6"}, "relation": ">", "where": {"server": "apache"}}
    return {"metrics": METRICS, "claims": [base | claim]}


def _data(tmp_path, values, **claim) -> RunData:
    run = request_run(values, report=_report(**claim))
    for rows in run.rows.values():
        for row in rows:
            row["outcome"] = "complete"
    return RunData(run.write(tmp_path / "run"))


def test_points_follow_the_selectors(tmp_path):
    values = {(s, lv, f): [30.0, 31.0, 29.0] for s in ("apache", "lean") for lv in ("C1B", "C2B") for f in ("v4", "v6")}
    data = _data(tmp_path, values)
    assert claim_rules.claim_points(data, data.report.claims[0]) == {"main.server-apache.level-C1B",
                                                                    "main.server-apache.level-C2B"}
    data = _data(tmp_path / "2", values, where={"server": "apache", "level": "C2B"})
    assert claim_rules.claim_points(data, data.report.claims[0]) == {"main.server-apache.level-C2B"}


def test_a_look_tests_at_its_level(tmp_path):
    # v4 above v6 by ~3 %, the paired gaps noisy (0.4-1.3): significant at 2.5 % per side, not at a first
    # look's 0.15 % per side
    values = {("apache", "C1B", "v4"): [31.0, 30.2, 31.9, 30.8], ("apache", "C1B", "v6"): [29.9, 29.8, 30.6, 30.0]}
    data = _data(tmp_path, values)
    claim = data.report.claims[0]
    assert claim_rules.verdict_at(data, claim, 0.025) == HOLDS
    assert claim_rules.verdict_at(data, claim, 0.0015) == INCONCLUSIVE
    other = _data(tmp_path / "2", {k[:2] + (("v6",) if k[2] == "v4" else ("v4",)): v for k, v in values.items()})
    assert claim_rules.verdict_at(other, other.report.claims[0], 0.025) == FAILS


def test_rounds_needed_for_an_undecided_compare(tmp_path):
    values = {("apache", "C1B", "v4"): [31.0, 30.2, 31.9], ("apache", "C1B", "v6"): [29.9, 29.4, 30.6]}
    data = _data(tmp_path, values)
    claim = data.report.claims[0]
    assert claim_rules.verdict_at(data, claim, 0.0015) == INCONCLUSIVE
    need = claim_rules.rounds_needed(data, claim, 3, 0.0015, ALPHA)
    assert need is not None and 3 <= need <= 200
    # the power is that of a design spending the procedure's alpha, not one spending the look's
    # nominal level (which final_level would lower once more): fewer rounds, as a report says
    # (a 3-round design's one look spends all of it: the data decide there, as a report says)
    assert evaluate_claim(data, claim).verdict == HOLDS and need == 3
    assert need < claim_rules.rounds_needed(data, claim, 3, 0.0015, 0.0015)
    decided = _data(tmp_path / "2", {("apache", "C1B", "v4"): [40.0, 41.0, 39.0],
                                     ("apache", "C1B", "v6"): [20.0, 21.0, 19.0]})
    assert claim_rules.rounds_needed(decided, decided.report.claims[0], 3, 0.0015, ALPHA) is None


def test_the_scheduler_looks_records_and_names_the_next_round(tmp_path, monkeypatch):
    """driver.RoundScheduler over a hand-made run (its analysis stubbed: results/ is written):
    claim 14 (apache, v4 far above v6) decides at the first look, claim 15 (lean, no difference)
    does not, so round 4 runs the lean point only; the look is in the manifest."""
    import json
    from types import SimpleNamespace

    from rich.console import Console

    from congestlab.decisive import driver
    from congestlab.decisive.procedure import Procedure

    values = {("apache", "C1B", "v4"): [40.0, 41.0, 39.5], ("apache", "C1B", "v6"): [20.0, 21.0, 19.5],
              ("lean", "C1B", "v4"): [30.0, 31.0, 29.0], ("lean", "C1B", "v6"): [30.5, 30.0, 29.5]}
    report = _report()
    report["claims"].append(report["claims"][0] | {"id": "15", "where": {"server": "lean"}})
    builder = request_run(values, report=report)
    for rows in builder.rows.values():
        for row in rows:
            row["outcome"] = "complete"
    run_dir = builder.write(tmp_path / "run")
    for rep_path in run_dir.glob("points/*/r*"):
        (rep_path / "rep.json").write_text("{}")
    monkeypatch.setattr(driver, "analyze_run", lambda run_dir, manifest: None)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    runner = SimpleNamespace(run_dir=run_dir, manifest=manifest,
                             rep_complete=lambda p, r: (run_dir / "points" / p / f"r{r}" / "rep.json").exists())
    apache, lean = "main.server-apache.level-C1B", "main.server-lean.level-C1B"
    scheduler = driver.RoundScheduler(Procedure.new([apache, lean], 6), Console(file=open("/dev/null", "w")))
    scheduler.attach(runner)
    assert scheduler.next_runs(runner) == [(lean, 4)]
    stored = json.loads((run_dir / "manifest.json").read_text())["sequential"]
    (look,) = stored["looks"]
    assert look["verdicts"] == {"14": HOLDS, "15": INCONCLUSIVE} and look["n"] == {apache: 3, lean: 3}
    assert stored["round"] == 4 and stored["round_points"] == [lean] and stored["decided"]["14"]["round"] == 3
    assert scheduler.next_runs(runner) == [(lean, 4)]  # the round is not done: no second look
    assert len(stored["looks"]) == 1
    assert any("inconclusive" in line or "decided" in line for line in driver.summary_lines(run_dir))


def test_a_claim_without_a_test_yet_waits_for_more_rounds():
    """A descriptive verdict (no test at this n) is not a decision: the claim stays undecided and
    its points run on, as an inconclusive one's."""
    from congestlab.decisive.procedure import Procedure
    from congestlab.report.claims import DESCRIPTIVE

    proc = Procedure.new(["p1"], max_rounds=6)
    proc.look(["19a"], lambda c, level: DESCRIPTIVE, lambda c: {"p1"}, {"p1": 3}, 10.0, 3)
    assert proc.state["decided"] == {} and proc.state["looks"][-1]["undecided"] == ["19a"]
    assert proc.runs_wanted() == [("p1", 4)]
