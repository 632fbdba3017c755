"""The study-level line of a report: how many claims and checks were tested, and what one false
verdict among that many means (docs/reports.md, "Reading a report").

Each claim's verdict keeps its own error at its level per side (its checks are combined by
intersection-union and Holm: report/claims/evaluate.py). Across claims nothing is adjusted: the
seeds' claims are separate statements, each reported on its own. So across k claims, were each
at the edge of its hypothesis, up to k x alpha false verdicts are expected by chance, and at
least one with probability up to min(1, k alpha) (Bonferroni; 1 - (1 - alpha)^k if independent).
"""

from __future__ import annotations

from congestlab.report.claims.evaluate import ClaimResult
from congestlab.stats.rules import FAILS, HOLDS, INCONCLUSIVE


def study_line(findings: list[ClaimResult]) -> str:
    tested = [f for f in findings if f.decision is not None and (f.reread or f.verdict) in (HOLDS, FAILS, INCONCLUSIVE)]
    if not tested:
        return ""
    k = len(tested)
    checks = sum(f.tested for f in tested)
    alpha = max(f.claim.checks()[0].alpha / 2 for f in tested)
    decided = sum(f.verdict in (HOLDS, FAILS) for f in tested)
    independent = 1 - (1 - alpha) ** k
    return (f"Across the study: {k} claim{'s' if k != 1 else ''} tested with {checks} checks, {decided} decided. "
            f"Each claim's verdict errs at most {alpha:g} per side (its checks combined by intersection–union and "
            f"Holm); nothing is adjusted across claims, so were every claim at the edge of its hypothesis about "
            f"{k * alpha:.2g} of these {k} verdicts would be wrong by chance, and at least one with probability up "
            f"to {min(1.0, k * alpha):.0%} ({independent:.0%} if the claims were independent): one surprising "
            f"verdict among them is not, by itself, a finding.")
