"""`run`/`reproduce --until-decisive`: a run whose rounds go on, one testbed throughout, until
every claim is decided, the last planned round is done or the time budget is spent
(docs/statistics.md, "Repetitions until decisive"; the procedure: procedure.py).

The first rounds run every point; after each round the run's captures are analysed, every claim
still undecided is looked at, the look is written to the manifest (`sequential`), and the next
round runs only the points feeding an undecided claim. `--resume` carries the stored procedure
on: the round in progress finishes (its completed repetitions kept), then the looks go on.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from congestlab import study as studies
from congestlab.analysis.run_analysis import analyze_run
from congestlab.decisive import claims as claim_rules
from congestlab.decisive.procedure import FIRST_LOOK, Procedure
from congestlab.errors import RunDirError, SpecError
from congestlab.report.data import RunData
from congestlab.rundir import completed_repetitions, read_manifest, write_manifest
from congestlab.spec.models import StudySpec
from congestlab.spec.sweep import expand

MINUTE_S = 60.0


def default_max_repetitions(spec: StudySpec, quick: bool) -> int:
    """Twice the spec's repetitions (its quick ones with --quick), at least the first look's."""
    planned = max(p.repetitions for p in expand(spec, quick))
    return max(2 * planned, FIRST_LOOK)


class RoundScheduler:
    """The StudyRun's scheduler (runner/orchestrator.py): looks after each round, names the next."""

    def __init__(self, procedure: Procedure, console: Console):
        self.procedure = procedure
        self.console = console
        self.elapsed_before_s = procedure.state["elapsed_s"]  # spent by earlier attempts (a resumed run)
        self.started = time.monotonic()

    def attach(self, study_run) -> None:
        study_run.manifest["sequential"] = self.procedure.state

    def next_runs(self, study_run) -> list[tuple[str, int]]:
        proc = self.procedure
        if proc.stopped:
            return []
        missing = [(p, r) for p, r in proc.runs_wanted() if not study_run.rep_complete(p, r)]
        if missing:  # (a batch always completes or raises; this is a resumed run's round)
            return missing
        # results/ so far; the run's own analysis follows at its end
        analyze_run(study_run.run_dir, study_run.manifest)
        data = RunData(study_run.run_dir, require_complete=False)
        claims = {c.id: c for c in data.report.claims}
        done = completed_repetitions(study_run.run_dir)
        n_per_point: dict[str, int] = {}
        for point_id, _, _ in done:
            n_per_point[point_id] = n_per_point.get(point_id, 0) + 1
        known = set(proc.state["points"])
        proc.look(list(claims), lambda c, level: claim_rules.verdict_at(data, claims[c], level),
                  lambda c: claim_rules.claim_points(data, claims[c]) & known, n_per_point,
                  self.elapsed_before_s + time.monotonic() - self.started, len(done),
                  lambda c: claim_rules.rounds_needed(data, claims[c], proc.state["first_look"],
                                                      proc.state["looks"][-1]["level_per_side"],
                                                      proc.state["alpha_per_side"]))
        write_manifest(study_run.run_dir, study_run.manifest)
        self.console.print(look_line(proc))
        return proc.runs_wanted()


def look_line(proc: Procedure) -> str:
    look = proc.state["looks"][-1]
    decided = sum(v != "inconclusive" for v in look["verdicts"].values())
    text = (f"look at round {look['round']}: level {look['level_per_side']:.3g} per side, {decided} of "
            f"{len(look['verdicts'])} claims looked at decided, {len(look['undecided'])} undecided")
    if proc.stopped:
        return text + f"; stopped: {proc.state['stopped_by']}"
    return text + f"; round {proc.round} runs {len(look['next_points'])} points"


def summary_lines(run_dir: Path) -> list[str]:
    """What the run's procedure did, for the terminal: stops, decided claims, rounds needed."""
    state = read_manifest(run_dir, require_complete=False)["sequential"]
    looks = state["looks"]
    if not looks:
        return ["until decisive: no look yet"]
    decided = state["decided"]
    lines = [f"until decisive: {len(looks)} looks (rounds {looks[0]['round']}..{looks[-1]['round']} of at most "
             f"{state['max_rounds']}), stopped by {state['stopped_by'] or 'nothing yet'}; "
             f"{sum(v['verdict'] in ('holds', 'does not hold') for v in decided.values())} claims decided, "
             f"{len(looks[-1]['undecided'])} inconclusive; {state['runs_done']} repetitions in "
             f"{state['elapsed_s'] / 60:.1f} min"]
    for claim, d in decided.items():
        lines.append(f"  {claim}: {d['verdict']} at round {d['round']}")
    for claim in looks[-1]["undecided"]:
        need = state.get("rounds_needed", {}).get(claim)
        lines.append(f"  {claim}: inconclusive at round {looks[-1]['round']}; "
                     + (f"about {need} rounds would decide it (80 % power at today's estimate)" if need
                        else "no power estimate (no effect estimate for its rule, or more than 200 rounds)"))
    return lines


def run_until_decisive(spec: StudySpec, quick: bool, out: Path | None, calibrate: bool, preset: str | None,
                       resume: Path | None, max_repetitions: int | None, budget_min: float | None,
                       console: Console) -> Path:
    budget_s = None if budget_min is None else budget_min * MINUTE_S
    if resume is not None:
        stored = read_manifest(resume, require_complete=False)
        proc = Procedure.from_manifest(stored)
        for option, given, kept in (("--max-repetitions", max_repetitions, proc.state["max_rounds"]),
                                    ("--budget-min", budget_s, proc.state["budget_s"])):
            if given is not None and given != kept:
                raise RunDirError(f"{resume}: it runs until decisive with {option} "
                                  f"{kept if option == '--max-repetitions' else _minutes(kept)}; "
                                  "resume it with the same (or without the option)")
    else:
        if max_repetitions is None:
            max_repetitions = default_max_repetitions(spec, quick)
        if max_repetitions < 2:
            raise SpecError("--max-repetitions", "give at least 2 (a look needs two rounds in common)")
        proc = Procedure.new([p.id for p in expand(spec, quick)], max_repetitions, budget_s)
    scheduler = RoundScheduler(proc, console)
    return studies.run_study(spec, quick, out, calibrate, preset=preset, resume=resume, console=console,
                             repetitions=proc.state["max_rounds"], runs=proc.runs_wanted(), scheduler=scheduler)


def _minutes(budget_s: float | None) -> str:
    return "none" if budget_s is None else f"{budget_s / MINUTE_S:g}"


def is_until_decisive(run_dir: Path) -> bool:
    """Was this run directory started with --until-decisive (so --resume continues it as such)?"""
    return "sequential" in read_manifest(run_dir, require_complete=False)
