"""Imported first by the command line (cli/__init__.py), for its side effect: a user whose home
takes no writes (nobody, a service account) gets matplotlib's configuration and cache in a
private temporary directory, removed at exit, as matplotlib itself would make, but without its
two lines of warning on every command (the readers of a run directory need no root: README,
"Without root"). MPLCONFIGDIR set by the user stands."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path


def _writable(path: Path) -> bool:
    """Whether `path` could be made or written: it, or its nearest existing parent, is writable."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return os.access(candidate, os.W_OK | os.X_OK)
    return False


def _use_private_dir_if_needed() -> None:
    if "MPLCONFIGDIR" in os.environ:
        return
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path("~/.config").expanduser())
    if _writable(config_home / "matplotlib"):
        return
    private = tempfile.mkdtemp(prefix="congestlab-matplotlib-")
    atexit.register(shutil.rmtree, private, True)
    os.environ["MPLCONFIGDIR"] = private


_use_private_dir_if_needed()
