"""The error types of congestlab; the CLI maps each to one line and an exit code."""

from __future__ import annotations


class CongestlabError(Exception):
    """Root of every error congestlab raises on purpose."""

    exit_code = 1


class SpecError(CongestlabError):
    """A spec (TOML) names a wrong field or value; `where` says which."""

    exit_code = 2

    def __init__(self, where: str, problem: str):
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


class NotRootError(CongestlabError):
    """The command needs root (network namespaces, qdiscs, captures)."""

    exit_code = 3


class ToolError(CongestlabError):
    """An external tool was missing or exited non-zero."""

    exit_code = 4

    def __init__(self, argv: list[str], rc: int | None, stderr: str = ""):
        self.argv = list(argv)
        self.rc = rc
        self.stderr = stderr
        last = (stderr or "").strip().splitlines()[-1:] or [""]
        if rc is None:
            msg = f"{argv[0]}: {last[0]}" if last[0] else f"tool not found: {argv[0]}"
        else:
            msg = f"`{' '.join(argv)}` exited {rc}: {last[0]}"
        super().__init__(msg)


class TestbedError(CongestlabError):
    """The emulated network could not be built or checked."""

    exit_code = 5
    __test__ = False  # not a pytest test class


class TraceError(CongestlabError):
    """A packet capture is missing, malformed or lacks the measured connection."""

    exit_code = 6


class RunDirError(CongestlabError):
    """A run directory is missing, incomplete or of an unknown format version."""

    exit_code = 7


class LeanLogError(CongestlabError):
    """A leanweb log (JSON lines) is unreadable, has a corrupt line or lacks its start event."""

    exit_code = 9


class Interrupted(CongestlabError):
    """Ctrl-C or SIGTERM during a run; everything was torn down."""

    exit_code = 130


class ClusterError(CongestlabError):
    """The Ray cluster could not be reached, lacks testbed nodes, or left points unfinished."""

    exit_code = 8


class StatsInputError(CongestlabError):
    """Samples handed to the statistics engine (congestlab/stats/) are malformed: an unknown
    outcome, a timed-out sample without its censoring time, arrays of different lengths."""

    exit_code = 10


class SeriesError(CongestlabError):
    """A repetition has no recorded series to draw (results/series/, written by the analysis)."""

    exit_code = 11
