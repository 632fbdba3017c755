"""Where a run directory keeps what (docs/data-format.md, "Layout"): the only module that
spells its file and folder names."""

from __future__ import annotations

import re
import time
from pathlib import Path


MANIFEST = "manifest.json"
POINTS_DIR = "points"
LOGS_DIR = "logs"
RESULTS_DIR = "results"
REP_INFO = "rep.json"  # written last: a repetition with it is complete
RECORDS = "records.jsonl"
PCAP_DIR = "pcap"
# a QUIC server's UDP capture (whole packets: decrypted with the clients' key log beside it)
QUIC_DIR = "quic"
QUIC_KEYLOG = "keys.log"
REP_NAME = re.compile(r"r[1-9][0-9]{0,8}")  # a repetition's directory: r1, r2, ...


def new_run_dir(base: Path, name: str, prefix: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    # absolute: servers and tools started in namespaces get these paths (Apache would read a
    # relative config path against its own ServerRoot); `--out DIR` instead: out_paths.py
    path = (base / f"{name}-{stamp}-{prefix}").absolute()
    path.mkdir(parents=True, exist_ok=False)
    (path / LOGS_DIR).mkdir()
    return path


def rep_dir(run_dir: Path, point_id: str, rep: int) -> Path:
    return Path(run_dir) / POINTS_DIR / point_id / f"r{rep}"


def rep_complete(run_dir: Path, point_id: str, rep: int) -> bool:
    return (rep_dir(run_dir, point_id, rep) / REP_INFO).is_file()


def repetition_dirs(run_dir: Path) -> list[tuple[str, int, Path]]:
    """(point id, repetition, directory) of every repetition directory (`r<N>`), complete or not."""
    out = []
    for folder in sorted(Path(run_dir).glob(f"{POINTS_DIR}/*/r*")):
        if folder.is_dir() and REP_NAME.fullmatch(folder.name):
            out.append((folder.parent.name, int(folder.name[1:]), folder))
    return out


def completed_repetitions(run_dir: Path) -> list[tuple[str, int, Path]]:
    """(point id, repetition, directory) of every repetition that wrote its rep.json."""
    return [(point, rep, folder) for point, rep, folder in repetition_dirs(run_dir)
            if (folder / REP_INFO).is_file()]
