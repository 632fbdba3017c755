"""The Runner: one testbed's lifecycle for a study's runs (orchestrator.py), with its
collaborators: servers.py, background.py, captures.py, network.py (reachability, qdiscs),
manifest.py (the run directory it writes, resume), host.py (root, signals, kernel congestion
controls) and progress.py. `congestlab.study` is the public way to run a study."""

from congestlab.runner.background import BACKGROUND_MARGIN_S, run_bound_s  # noqa: F401
from congestlab.runner.host import require_root, wanted_cc  # noqa: F401
from congestlab.runner.orchestrator import Runner  # noqa: F401
