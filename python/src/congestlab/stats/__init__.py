"""Censored statistics, verdict rules and the sequential design (docs/statistics.md).

The bottom layer beside errors: it imports nothing else of congestlab, takes plain data (cells
of samples with an outcome and a block each) and returns plain dataclasses the report renders.
"""

from congestlab.stats.effect import Effect
from congestlab.stats.median_ratio import compare
from congestlab.stats.outcomes import COMPLETE, INVALID, TIMED_OUT
from congestlab.stats.power import rounds_needed, rounds_needed_for, rounds_needed_for_verdict
from congestlab.stats.rules import (FAILS, HOLDS, INCONCLUSIVE, Verdict, at_least, at_most, best_changes, direction,
                                    equivalence, every_cell, magnitude)
from congestlab.stats.samples import LEFT, RIGHT, Cell
from congestlab.stats.sequential import SequentialDesign, next_step, run_sequential
from congestlab.stats.summary import CellSummary, summarize

__all__ = ["COMPLETE", "Cell", "CellSummary", "Effect", "FAILS", "HOLDS", "INCONCLUSIVE", "INVALID", "LEFT", "RIGHT",
           "SequentialDesign", "TIMED_OUT", "Verdict", "at_least", "at_most", "best_changes", "compare", "direction",
           "equivalence", "every_cell", "magnitude", "next_step", "rounds_needed", "rounds_needed_for",
           "rounds_needed_for_verdict",
           "run_sequential", "summarize"]
