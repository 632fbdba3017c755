"""What escapes a command as one line instead of a traceback or a usage box: a wrong option
(click's usage errors) and what the machine refused (a permission, a full disk, a read-only
file system, a name too long), each saying what and how to go on."""

from __future__ import annotations

import errno
import os
import pwd
from pathlib import Path

try:  # typer bundles its own click (0.2x); its usage errors are that click's
    from typer._click import exceptions as click_errors
except ImportError:  # an older typer on the real click
    from click import exceptions as click_errors

# the errors of the file system a command writes to (a run directory, an --out; exit 7), and
# how to go on
_ELSEWHERE = "free space or write elsewhere (--out), then run the command again"
WRITE_ERRORS = {errno.ENOSPC: _ELSEWHERE, errno.EDQUOT: _ELSEWHERE,
                errno.EROFS: "write elsewhere (--out), or remount it read-write",
                errno.ENAMETOOLONG: "shorten the name (a spec's experiment and axis labels name its point directories)"}


def usage_line(err: click_errors.UsageError) -> str:
    """`run: No such option: --bogus (congestlab run --help)`: click's message and where to look."""
    path = err.ctx.command_path if err.ctx is not None else "congestlab"
    command = path.removeprefix("congestlab").strip()
    message = " ".join(err.format_message().split())
    return f"{command + ': ' if command else ''}{message} (`{path} --help`)"


def owner(path: Path) -> str:
    """The user owning `path` or its nearest existing parent ('?' when none can be seen)."""
    for candidate in (path, *path.parents):
        try:
            uid = candidate.stat().st_uid
        except OSError:
            continue
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return f"uid {uid}"
    return "?"


def os_error_line(err: OSError) -> str | None:
    """One line for a permission or a write the file system refused; None for any other
    OSError (a bug to see whole)."""
    where = err.filename or ""
    if isinstance(err, PermissionError):
        me = pwd.getpwuid(os.geteuid()).pw_name if _known(os.geteuid()) else f"uid {os.geteuid()}"
        who = owner(Path(where)) if where else "?"
        as_owner = "with sudo" if who == "root" else f"as {who} (sudo -u {who} …)"
        return (f"{where}: permission denied: it belongs to {who} and this command runs as {me}; run it {as_owner}, "
                "or copy the run directory to one of yours (cp -r) and give the copy")
    if err.errno in WRITE_ERRORS:
        return f"{where}: {err.strerror}: {WRITE_ERRORS[err.errno]}"
    return None


def _known(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True
