"""The files the studies request: exactly N KiB of incompressible, reproducible bytes."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path


def file_name(size_kib: int) -> str:
    return f"{size_kib}KiB.bin"


def url_path(size_kib: int) -> str:
    return "/" + file_name(size_kib)


def write_files(docroot: Path, sizes_kib: list[int]) -> dict[int, str]:
    """Write each file once; returns size -> sha256 for the manifest."""
    docroot.mkdir(parents=True, exist_ok=True)
    docroot.chmod(0o755)
    digests = {}
    for size in sizes_kib:
        data = random.Random(size).randbytes(size * 1024)
        path = docroot / file_name(size)
        path.write_bytes(data)
        path.chmod(0o644)
        digests[size] = hashlib.sha256(data).hexdigest()
    return digests
