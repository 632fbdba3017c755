"""Reports made only from a stored run directory (no root): one engine for every study.

`build_report(run_dir)` renders a run directory (read through congestlab.stored) with the engine (engine.py):
the spec's declared tables, plots and claims (docs/reports.md), or, for a spec that declares
none, a default report of its main numbers (defaults.py).
"""

from __future__ import annotations

from pathlib import Path


def build_report(run_dir: Path, panels: bool = False):
    from congestlab.report.engine import build_report as engine

    return engine(Path(run_dir), panels=panels)
