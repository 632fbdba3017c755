"""A claim over cells that needs only some of them: "for some levels" (docs/statistics.md,
"Claims over cells").

The dual of rules.every_cell. It **holds** when at least one cell holds after Holm's adjustment
of the cells' "holds" p-values (a union: finding one among many must pay for the many); it
**does not hold** when every cell does not hold, each at the level, unadjusted (an
intersection-union: the claim's negation is that no cell holds). Otherwise it is
inconclusive.
"""

from __future__ import annotations

import math
from dataclasses import replace

from congestlab.errors import StatsInputError
from congestlab.stats.rules import FAILS, HOLDS, INCONCLUSIVE, Verdict, holm


def some_cell(cells: list[Verdict], alpha: float, rule: str = "", label: str = "") -> Verdict:
    if not cells:
        raise StatsInputError("some_cell needs at least one cell")
    adjusted = holm([c.p_holds for c in cells])
    cells = [replace(c, p_holds=p, verdict=FAILS if c.p_fails < alpha else HOLDS if p < alpha else INCONCLUSIVE)
             for c, p in zip(cells, adjusted)]
    if any(c.verdict == HOLDS for c in cells):
        verdict = HOLDS
    elif all(c.verdict == FAILS for c in cells):
        verdict = FAILS
    else:
        verdict = INCONCLUSIVE
    rule = rule or (f"in some of {len(cells)} cells: one holding after Holm over them decides; does not hold when "
                    f"every cell does not, each at {alpha:g}")
    return Verdict(verdict, rule, math.nan, (math.nan, math.nan), min(adjusted), max(c.p_fails for c in cells),
                   sum(c.n for c in cells), sum(c.censored for c in cells), sum(c.invalid for c in cells), alpha,
                   label, cells=tuple(cells), kind="some")
