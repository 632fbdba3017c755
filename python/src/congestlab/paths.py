"""Where congestlab finds its own built artefacts (Rust binaries, BPF objects)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from congestlab.errors import ToolError

REPO_ROOT = Path(__file__).resolve().parents[3]


def rust_binary(name: str) -> Path:
    """Path of a workspace binary built by `make build` (release), or on PATH."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target"))
    for candidate in (target / "release" / name, REPO_ROOT / "target" / "release" / name):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise ToolError([name], None, f"{name} is not built; run `make build`")
