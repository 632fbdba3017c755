"""Where a command may write when the user names the place (`--out`): the one set of rules
for every command (run, reproduce, suite, sensitivity, simulate, cc share, compare, plot).

A directory given as --out is new or empty; it is not a symbolic link (the link's target, not
the name given, would be written), and its parent exists (a mistyped path is not created from
the root down). A file given as --out (`plot`) is not a symbolic link and its folder exists;
it is opened without following a link that appears in between. Problems are RunDirError lines
(exit 7). The defaults (runs/NAME-TIME-ID, compare-TIME) are the commands' own and may create
runs/.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import BinaryIO

from congestlab.errors import RunDirError
from congestlab.rundir.layout import LOGS_DIR

# what a file system answers when it takes no more writes: full, over quota, read-only
FULL_OR_READ_ONLY = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def _link_problem(path: Path) -> str | None:
    if path.is_symlink():
        return f"is a symbolic link (to {os.readlink(path)}); give the directory or file itself, not a link"
    return None


def check_new_dir(out: Path, option: str = "--out") -> Path:
    """`out` absolute, if a directory may be made there or is there empty (nothing is created)."""
    out = Path(out).absolute()
    problem = _link_problem(out)
    if problem is None and out.exists():
        if not out.is_dir():
            problem = "exists and is not a directory"
        elif any(out.iterdir()):
            problem = f"exists and is not empty; choose a new {option}"
    elif problem is None and not out.parent.is_dir():
        problem = (f"its folder {out.parent} does not exist; create it first ({option} makes one new directory, "
                   "not the folders above it)")
    if problem is not None:
        raise RunDirError(f"{option} {out}: {problem}")
    return out


def new_out_dir(out: Path, option: str = "--out") -> Path:
    """The directory `out`, checked (check_new_dir) and made, absolute; a directory the file
    system refuses to make (read-only, full, not permitted) is one RunDirError line."""
    out = check_new_dir(out, option)
    try:
        out.mkdir(exist_ok=True)
    except OSError as err:
        raise RunDirError(f"{option} {out}: cannot be made: {err.strerror or err}") from None
    return out


def prepare_out_dir(out: Path) -> Path:
    """A run's `--out DIR` (new_out_dir) with its logs/ folder, so a run never mixes with an
    older one. Returns it absolute: servers and tools started in namespaces get these paths
    (rundir/layout.py new_run_dir)."""
    out = new_out_dir(out)
    try:
        (out / LOGS_DIR).mkdir(exist_ok=True)
    except OSError as err:
        raise RunDirError(f"--out {out}: cannot be written: {err.strerror or err}") from None
    return out


def check_out_file(out: Path, option: str = "--out") -> Path:
    """`out` absolute, if a file may be written there: its folder exists, it is no symbolic
    link, and what is there already is a regular file (replaced)."""
    out = Path(out).absolute()
    problem = _link_problem(out)
    if problem is None and out.exists() and not out.is_file():
        problem = "exists and is not a regular file"
    elif problem is None and not out.parent.is_dir():
        problem = f"its folder {out.parent} does not exist; create it first"
    if problem is not None:
        raise RunDirError(f"{option} {out}: {problem}")
    return out


def open_out_file(out: Path) -> BinaryIO:
    """`out` opened for writing (created or truncated) without following a symbolic link:
    a link put there is refused, never written through."""
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        if Path(out).is_symlink():
            raise RunDirError(f"{out}: {_link_problem(Path(out))}") from None
        raise RunDirError(f"{out}: cannot be written: {err.strerror or err}") from None
    return os.fdopen(fd, "wb")
