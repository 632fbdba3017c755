"""Longest processing time first (Graham's LPT): each task, longest first, goes to the node
that is free earliest. Its makespan is at most (4/3 - 1/(3N)) times the optimum; for the
units of a study (a handful to a few dozen, of uneven length) it is the plan we print
(docs/cluster-planning.md)."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from congestlab.errors import SpecError


@dataclass(frozen=True)
class Task:
    name: str
    seconds: float


@dataclass
class Schedule:
    nodes: list[list[Task]] = field(default_factory=list)  # per node, its tasks in the order they run
    loads_s: list[float] = field(default_factory=list)

    @property
    def makespan_s(self) -> float:
        return max(self.loads_s, default=0.0)

    @property
    def lower_bound_s(self) -> float:
        """No schedule is shorter than the longest task or the mean load."""
        tasks = [t.seconds for node in self.nodes for t in node]
        return max(max(tasks, default=0.0), sum(tasks) / max(len(self.nodes), 1))


def lpt(tasks: list[Task], nodes: int) -> Schedule:
    """The LPT schedule of `tasks` on `nodes` identical nodes; ties go to the lower node
    number and, among equal tasks, to the name (deterministic)."""
    if not isinstance(nodes, int) or nodes < 1:
        raise SpecError("--nodes", f"needs a whole number of nodes >= 1, not {nodes!r}")
    for t in tasks:
        if not math.isfinite(t.seconds) or t.seconds < 0:
            raise SpecError("unit times", f"task {t.name!r} has time {t.seconds!r}; needs a finite time >= 0 s")
    schedule = Schedule([[] for _ in range(nodes)], [0.0] * nodes)
    free = [(0.0, n) for n in range(nodes)]  # (load, node): the earliest free node on top
    for task in sorted(tasks, key=lambda t: (-t.seconds, t.name)):
        load, node = heapq.heappop(free)
        schedule.nodes[node].append(task)
        schedule.loads_s[node] = load + task.seconds
        heapq.heappush(free, (load + task.seconds, node))
    return schedule
