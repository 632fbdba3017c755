"""A stored run directory read once into types (docs/data-format.md, "Reading a run"): the
study and its points as validated spec objects, repetitions with typed records, result rows
with their numbers parsed once. It reads only; the format itself is congestlab.rundir's."""

from congestlab.stored.rows import ResultRow, norm, number_of
from congestlab.stored.run import StoredPoint, StoredRepetition, StoredRun

__all__ = ["ResultRow", "StoredPoint", "StoredRepetition", "StoredRun", "norm", "number_of"]
