"""The engine's input: one cell's samples, each with its outcome and its block (docs/statistics.md).

An outcome is one of three words (stats/outcomes.py): `complete` (the value is measured),
`timed_out` (censored at `limit`, e.g. the GET's timeout converted into the metric's unit),
`invalid` (excluded, only counted). Which side a timed-out sample is censored on is the
metric's business: a delay that timed out is longer than its limit (`RIGHT`), a throughput is
lower than the size over the timeout (`LEFT`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Sequence

from congestlab.errors import StatsInputError
from congestlab.stats.outcomes import COMPLETE, INVALID, OUTCOMES, TIMED_OUT

RIGHT, LEFT = "right", "left"  # a censored value is above (right) or below (left) its limit


@dataclass(frozen=True)
class Cell:
    """The samples of one cell (condition). Parallel tuples, one entry per sample."""

    values: tuple[float, ...]
    outcomes: tuple[str, ...]
    blocks: tuple[Hashable, ...]
    limits: tuple[float, ...]
    censoring: str = RIGHT

    @classmethod
    def of(cls, values: Sequence[float], outcomes: Sequence[str] | None = None,
           blocks: Sequence[Hashable] | None = None, limits: Sequence[float] | float | None = None,
           censoring: str = RIGHT) -> "Cell":
        """Checks and builds a cell; `outcomes` defaults to all complete, `blocks` to None (no
        block: compared unblocked) and `limits` (one number for all, or one per sample) to NaN (needed only where timed out)."""
        n = len(values)
        outcomes = tuple(outcomes) if outcomes is not None else (COMPLETE,) * n
        blocks = tuple(blocks) if blocks is not None else (None,) * n
        if limits is None or isinstance(limits, (int, float)):
            limits = (math.nan if limits is None else float(limits),) * n
        limits = tuple(float(x) for x in limits)
        if not (len(outcomes) == len(blocks) == len(limits) == n):
            raise StatsInputError(f"a cell needs one outcome, block and limit per value: {n} values, "
                                  f"{len(outcomes)} outcomes, {len(blocks)} blocks, {len(limits)} limits")
        if censoring not in (RIGHT, LEFT):
            raise StatsInputError(f"censoring {censoring!r} is neither {RIGHT!r} nor {LEFT!r}")
        vals = []
        for i, (v, o, lim) in enumerate(zip(values, outcomes, limits)):
            if o not in OUTCOMES:
                raise StatsInputError(f"sample {i}: outcome {o!r} is not one of {', '.join(OUTCOMES)}")
            v = math.nan if v is None else float(v)
            if o == COMPLETE and not (math.isfinite(v) and v > 0):
                raise StatsInputError(f"sample {i}: a complete sample needs a positive finite value, got {v!r}")
            if o == TIMED_OUT and not (math.isfinite(lim) and lim > 0):
                raise StatsInputError(f"sample {i}: a timed-out sample needs a positive limit (its timeout "
                                      f"in the metric's unit), got {lim!r}")
            vals.append(v)
        return cls(tuple(vals), outcomes, blocks, limits, censoring)

    def __len__(self) -> int:
        return len(self.values)

    @property
    def n(self) -> int:
        """Samples that count (complete or timed out)."""
        return len(self) - self.invalid

    @property
    def censored(self) -> int:
        return sum(o == TIMED_OUT for o in self.outcomes)

    @property
    def invalid(self) -> int:
        return sum(o == INVALID for o in self.outcomes)

    def valid(self) -> list[tuple[float, bool, Hashable]]:
        """(value or limit, complete?, block) of every sample that counts."""
        return [(v if o == COMPLETE else lim, o == COMPLETE, b)
                for v, o, b, lim in zip(self.values, self.outcomes, self.blocks, self.limits) if o != INVALID]

    def completed(self) -> list[float]:
        return [v for v, o in zip(self.values, self.outcomes) if o == COMPLETE]

    def first_blocks(self, keep: set) -> "Cell":
        """The samples of the blocks in `keep` (a sequential look at the rounds so far)."""
        idx = [i for i, b in enumerate(self.blocks) if b in keep]

        def pick(xs: tuple) -> tuple:
            return tuple(xs[i] for i in idx)

        return Cell(pick(self.values), pick(self.outcomes), pick(self.blocks), pick(self.limits), self.censoring)
