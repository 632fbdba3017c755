"""Tables, plots and a page, made only from a stored run directory (no root needed)."""

from __future__ import annotations

import importlib
from pathlib import Path

from congestlab.rundir import read_manifest

# study -> module whose build_report(run_dir) makes its report; others: report/build.py
STUDY_REPORTS: dict[str, str] = {
    "anma": "congestlab.report.anma",
    "tcp-lab": "congestlab.report.tcp_lab",
    "cc-share": "congestlab.report.cc_share",
}


def build_report(run_dir: Path):
    manifest = read_manifest(Path(run_dir))
    module = STUDY_REPORTS.get(manifest["study"], "congestlab.report.build")
    return importlib.import_module(module).build_report(Path(run_dir))
