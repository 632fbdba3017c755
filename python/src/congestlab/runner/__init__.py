"""The StudyRun: one testbed's lifecycle for a study's runs (orchestrator.py), with its
collaborators: servers.py, background.py, captures.py, measuring.py (a repetition's measuring
workloads), network.py (reachability, qdiscs), manifest.py (the run directory it writes, its
analysis, resume), host.py (root, signals, kernel congestion controls), time_budget.py and
progress.py. `congestlab.study` is the public way to run a study."""

from congestlab.runner.background import BACKGROUND_MARGIN_S, run_bound_s
from congestlab.runner.host import require_root, wanted_cc
from congestlab.runner.orchestrator import StudyRun

__all__ = ["BACKGROUND_MARGIN_S", "StudyRun", "require_root", "run_bound_s", "wanted_cc"]
