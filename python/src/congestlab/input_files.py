"""Reading a file a user named or a run directory holds: a regular file only (a directory,
FIFO, device or socket is refused by what it is, and opening one never blocks: a FIFO given as
a spec would wait for a writer, /dev/zero would be read forever), and JSON or TOML nested at
most MAX_NESTING levels deep (a hand edit or a damaged file 100,000 brackets deep would
otherwise end in Python's RecursionError, in the parser or in any walk of what it parsed).
Problems are InputFileError lines; each caller turns them into its own error (a spec's exit 2,
a run directory's exit 7, a capture's exit 6)."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

# the deepest a study spec or a manifest goes is about 10 levels (a manifest's spec, its
# report's claims and their checks); far below what a parser or a walk of the result can recurse
MAX_NESTING = 64
UTF8_BOM = b"\xef\xbb\xbf"

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class InputFileError(ValueError):
    """A file that cannot be read as what it should be: one line saying why."""


def special_file_problem(path: Path) -> str | None:
    """Why `path` (its symbolic links followed) is not a regular file to read: 'No such file
    or directory', 'is a directory, not a regular file', ...; None for a regular file."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        return err.strerror or str(err)
    return _kind_problem(mode)


def _kind_problem(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    for test, what in _KINDS:
        if test(mode):
            return f"is {what}, not a regular file"
    return "is not a regular file"


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file. Checked before it is opened, and again on the open file
    (opened without blocking: a FIFO swapped in between is still refused, not waited on)."""
    problem = special_file_problem(path)
    if problem is not None:
        raise InputFileError(problem)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise InputFileError(err.strerror or str(err)) from None
    with os.fdopen(fd, "rb") as fh:
        problem = _kind_problem(os.fstat(fd).st_mode)
        if problem is not None:
            raise InputFileError(problem)
        try:
            return fh.read()
        except OSError as err:
            raise InputFileError(err.strerror or str(err)) from None


def read_text(path: Path) -> str:
    """A regular file as UTF-8 text; a byte-order mark or bytes that are not UTF-8 are named."""
    data = read_regular(path)
    if data.startswith(UTF8_BOM):
        raise InputFileError("starts with a UTF-8 byte-order mark (BOM); save it as UTF-8 without one")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputFileError(f"not UTF-8 text (byte {err.start})") from None


def too_deep(data: Any, limit: int = MAX_NESTING) -> bool:
    """Whether lists and dicts in `data` nest deeper than `limit` (walked without recursion)."""
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        elif not isinstance(value, list):
            continue
        if depth >= limit:
            return True
        stack.extend((item, depth + 1) for item in value if isinstance(item, (dict, list)))
    return False


def _nesting_problem() -> str:
    return f"nested deeper than {MAX_NESTING} levels (damaged?)"


def load_json(data: bytes | str) -> Any:
    """JSON as Python values; invalid JSON (ValueError) or nesting deeper than MAX_NESTING
    (InputFileError) is refused."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise InputFileError(_nesting_problem()) from None
    if too_deep(value):
        raise InputFileError(_nesting_problem())
    return value


def load_toml(text: str) -> dict[str, Any]:
    """TOML as a dict; invalid TOML (tomllib.TOMLDecodeError) or nesting deeper than
    MAX_NESTING (InputFileError; dotted keys nest too) is refused."""
    try:
        value = tomllib.loads(text)
    except RecursionError:
        raise InputFileError(_nesting_problem()) from None
    if too_deep(value):
        raise InputFileError(_nesting_problem())
    return value


def read_json(path: Path) -> Any:
    """A regular file of JSON (see load_json); every problem an InputFileError line."""
    try:
        return load_json(read_regular(path))
    except ValueError as err:  # (InputFileError is one)
        if isinstance(err, InputFileError):
            raise
        raise InputFileError(f"not valid JSON ({err})") from None

