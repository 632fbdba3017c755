"""Reports made only from a stored run directory (no root): one engine for every study.

`build_report(run_dir)` reads a format_version 2 run directory (engine.py: declared tables,
plots and claims, docs/reports.md). Run directories of the old runners (format_version 1)
still go to the old per-study code in report/build.py until that runner is gone.
"""

from __future__ import annotations

import json
from pathlib import Path


def format_version(run_dir: Path) -> int | None:
    """The run directory's format_version; None when its manifest is missing or unreadable
    (the engine then raises the clear error)."""
    try:
        return json.loads((Path(run_dir) / "manifest.json").read_text()).get("format_version")
    except (OSError, ValueError, AttributeError):
        return None


def build_report(run_dir: Path):
    run_dir = Path(run_dir)
    if format_version(run_dir) == 1:
        from congestlab.report.build import build_report as legacy

        return legacy(run_dir)
    from congestlab.report.engine import build_report as engine

    return engine(run_dir)
