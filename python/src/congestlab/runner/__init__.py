"""The Runner: one testbed's lifecycle for a study's runs (orchestrator.py), with its
collaborators: servers.py, background.py, captures.py, network.py (reachability, qdiscs),
manifest.py (the run directory it writes, resume), host.py (root, signals, kernel congestion
controls) and progress.py. `congestlab.study` is the public way to run a study."""

from congestlab.runner.background import BACKGROUND_MARGIN_S, run_bound_s
from congestlab.runner.host import require_root, wanted_cc
from congestlab.runner.orchestrator import Runner

__all__ = ["BACKGROUND_MARGIN_S", "Runner", "require_root", "run_bound_s", "wanted_cc"]
