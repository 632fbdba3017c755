"""Censored statistics, verdict rules and the sequential design (docs/statistics.md).

The bottom layer beside errors: it imports nothing else of congestlab, takes plain data (cells
of samples with an outcome and a block each) and returns plain dataclasses the report renders.
Its names load with their module on first use (PEP 562): the outcome vocabulary
(stats/outcomes.py), which the spec and the run directory's format import, comes without scipy.
"""

from importlib import import_module

_HOME = {
    "Effect": "effect", "compare": "median_ratio", "COMPLETE": "outcomes", "INVALID": "outcomes",
    "TIMED_OUT": "outcomes", "rounds_needed": "power", "rounds_needed_for": "power",
    "rounds_needed_for_verdict": "power", "FAILS": "rules", "HOLDS": "rules", "INCONCLUSIVE": "rules",
    "Verdict": "rules", "at_least": "rules", "at_most": "rules", "best_changes": "rules", "direction": "rules",
    "equivalence": "rules", "every_cell": "rules", "magnitude": "rules", "LEFT": "samples", "RIGHT": "samples",
    "Cell": "samples", "SequentialDesign": "sequential", "next_step": "sequential", "run_sequential": "sequential",
    "CellSummary": "summary", "summarize": "summary",
}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_HOME[name]}"), name)
