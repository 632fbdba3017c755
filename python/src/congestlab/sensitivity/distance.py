"""How far a run is from the published numbers, and which findings survive every plausible
configuration. Pure functions over plain values (docs/fidelity.md explains the measure).

Distance of one cell: |ln(ours / published)|, symmetric in over- and under-shooting (a factor
of 2 either way is ln 2 = 0.69); ln(1.25) = 0.22 is the "within 25 %" mark. A run's distance
is the median and the worst over every published cell it measured; a cell it did not measure
(no successful sample) is listed apart, never counted as near.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from congestlab.report.claims import HOLDS, NOT_MEASURED

WITHIN_25_PCT = math.log(1.25)


@dataclass
class CellDistance:
    cell: str  # e.g. "server=apache level=C4B family=v4"
    metric: str
    published: float
    ours: float | None  # the cell's mean; None: not measured

    @property
    def log_ratio(self) -> float | None:
        """ln(ours / published); None when either side is missing or not positive."""
        if self.ours is None or self.ours <= 0 or self.published <= 0:
            return None
        return math.log(self.ours / self.published)

    @property
    def ratio(self) -> float | None:
        return None if self.log_ratio is None else self.ours / self.published


@dataclass
class Distance:
    cells: list[CellDistance]
    median: float | None = None  # of |ln ratio| over the measured cells
    worst: float | None = None
    measured: int = 0
    unmeasured: list[CellDistance] = field(default_factory=list)

    def furthest(self, count: int = 5) -> list[CellDistance]:
        ranked = [c for c in self.cells if c.log_ratio is not None]
        return sorted(ranked, key=lambda c: -abs(c.log_ratio))[:count]

    def within(self, limit: float = WITHIN_25_PCT) -> int:
        return sum(abs(c.log_ratio) <= limit for c in self.cells if c.log_ratio is not None)


def distance(cells: list[CellDistance]) -> Distance:
    logs = [abs(c.log_ratio) for c in cells if c.log_ratio is not None]
    unmeasured = [c for c in cells if c.log_ratio is None]
    if not logs:
        return Distance(cells, None, None, 0, unmeasured)
    return Distance(cells, statistics.median(logs), max(logs), len(logs), unmeasured)


def by_metric(cells: list[CellDistance]) -> dict[str, Distance]:
    """The distance of each metric's cells alone (e.g. the delays apart from the throughputs,
    which a preset's configured rates bring near by themselves)."""
    metrics = dict.fromkeys(c.metric for c in cells)
    return {m: distance([c for c in cells if c.metric == m]) for m in metrics}


ROBUST, DEPENDS, NEVER = "robust", "depends on the configuration", "never reproduces"


@dataclass
class Robustness:
    claim: str
    verdicts: dict[str, str]  # configuration id -> verdict
    category: str
    holds_in: list[str]


def robustness(verdicts: dict[str, dict[str, str]]) -> list[Robustness]:
    """verdicts[config][claim] -> per claim: robust (holds in every configuration), never
    reproduces (holds in none), or depends on the configuration. A configuration where the
    claim was not measured or inconclusive is one where it did not hold: robust asks for
    every configuration to show it."""
    claims: dict[str, None] = {}
    for per_config in verdicts.values():
        for claim in per_config:
            claims.setdefault(claim, None)
    out = []
    for claim in claims:
        row = {config: per_config.get(claim, NOT_MEASURED) for config, per_config in verdicts.items()}
        holds_in = [c for c, v in row.items() if v == HOLDS]
        if row and len(holds_in) == len(row):
            category = ROBUST
        elif not holds_in:
            category = NEVER
        else:
            category = DEPENDS
        out.append(Robustness(claim, row, category, holds_in))
    return out


def best(distances: dict[str, Distance]) -> str | None:
    """The configuration nearest the published numbers: the lowest median, then the lowest
    worst; one that measured fewer cells than the most complete one ranks after it (a
    configuration cannot come nearer by leaving its hardest cells unmeasured)."""
    ranked = [(c, d) for c, d in distances.items() if d.median is not None]
    if not ranked:
        return None
    most = max(d.measured for _, d in ranked)
    return min(ranked, key=lambda cd: (cd[1].measured < most, cd[1].median, cd[1].worst))[0]

