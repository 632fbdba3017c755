"""Reports made only from a stored run directory (no root): one engine for every study.

`build_report(run_dir)` renders a format_version 2 run directory with the engine (engine.py:
the spec's declared tables, plots and claims; docs/reports.md). A spec that declares no
`[report]` yet still goes to the per-study ports (STUDY_REPORTS, else report/build.py) until
every preset carries its declaration (report/declarations/); then those ports go away.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

# study -> module whose build_report(run_dir) makes its report when its spec declares none
STUDY_REPORTS: dict[str, str] = {
    "anma": "congestlab.report.anma",
    "tcp-lab": "congestlab.report.tcp_lab",
    "cc-share": "congestlab.report.cc_share",
}


def _declares_report(run_dir: Path) -> bool:
    try:
        manifest = json.loads((Path(run_dir) / "manifest.json").read_text())
    except (OSError, ValueError):
        return True  # the engine names the problem
    return bool((manifest.get("spec") or {}).get("report"))


def build_report(run_dir: Path):
    run_dir = Path(run_dir)
    if not _declares_report(run_dir):
        from congestlab.rundir import read_manifest

        manifest = read_manifest(run_dir)
        module = STUDY_REPORTS.get(manifest.get("study"), "congestlab.report.build")
        return importlib.import_module(module).build_report(run_dir)
    from congestlab.report.engine import build_report as engine

    return engine(run_dir)
