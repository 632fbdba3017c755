"""The verdicts of a run `--until-decisive` as its sequential procedure reached them
(docs/statistics.md, "A run until decisive"), for the report.

Such a run looked at its claims after every round at the O'Brien-Fleming levels and kept each
claim's verdict from the look that decided it (decisive/procedure.py; the manifest's
`sequential`). Deciding them again over all its rounds at a fixed 2.5 % would re-use data
collected because earlier looks were undecided: that error is not controlled. So the report
shows the procedure's verdicts, with the round and level that decided each; its own evaluation
at the fixed level stays beside them as a "fixed-level re-read", labelled as such.
"""

from __future__ import annotations

from congestlab.report.claims import INCONCLUSIVE, ClaimResult


def sequential_verdicts(manifest: dict) -> dict[str, dict] | None:
    """claim id -> {verdict, round, level, decided, rounds_needed}; None for a run that did not
    run until decisive (or has not looked yet)."""
    state = manifest.get("sequential")
    if not isinstance(state, dict) or not state.get("looks"):
        return None
    looks = state["looks"]
    level = {look["round"]: look["level_per_side"] for look in looks}
    out = {claim: {"verdict": d["verdict"], "round": d["round"], "level": level.get(d["round"]), "decided": True}
           for claim, d in (state.get("decided") or {}).items()}
    last = looks[-1]
    needs = state.get("rounds_needed") or {}
    for claim in last.get("undecided") or []:
        out[claim] = {"verdict": (last.get("verdicts") or {}).get(claim, INCONCLUSIVE), "round": last["round"],
                      "level": last["level_per_side"], "decided": False, "rounds_needed": needs.get(claim),
                      "stopped_by": state.get("stopped_by")}
    return out


def apply_sequential(findings: list[ClaimResult], manifest: dict) -> None:
    """Each claim the procedure looked at takes its sequential verdict; this evaluation's (at a
    fixed level over every round) is kept as the claim's `reread`."""
    verdicts = sequential_verdicts(manifest)
    if verdicts is None:
        return
    for f in findings:
        seq = verdicts.get(f.claim.id)
        if seq is not None:
            f.reread, f.verdict, f.sequential = f.verdict, seq["verdict"], seq


def sequential_text(f: ClaimResult) -> str:
    """"decided at round 7 (level 0.0041 per side)" or "undecided after round 12 (...)"."""
    s = f.sequential
    if not s:
        return ""
    level = f" at level {s['level']:.3g} per side" if s.get("level") is not None else ""
    if s["decided"]:
        return f"decided at round {s['round']}{level} (sequential)"
    need = f"; about {s['rounds_needed']} rounds would decide it" if s.get("rounds_needed") else ""
    return f"undecided after round {s['round']}{level}, stopped by {s.get('stopped_by') or 'nothing yet'}{need}"


def reread_text(f: ClaimResult) -> str:
    if f.reread is None:
        return ""
    return (f"fixed-level re-read over every round: {f.reread} (not the run's verdict: a fixed level over data "
            "collected until decisive has no controlled error)")
