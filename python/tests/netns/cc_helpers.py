"""Compound TCP objects for tests: built under a unique kernel name (registration is global to
the machine) and registered with the owner note a run writes (cc/ownership.py), so that
`congestlab clean` unregisters one whose test process died without its teardown."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from congestlab.cc import ownership, registry
from congestlab.paths import REPO_ROOT
from congestlab.testbed import new_prefix


def build_object(kernel_name: str, out_dir: Path) -> Path:
    """`make -C bpf object` for `kernel_name` into `out_dir`; the object's path."""
    subprocess.run(["make", "-C", str(REPO_ROOT / "bpf"), "--no-print-directory", "object",
                    f"CTCP_ID={kernel_name}", f"OUT_DIR={out_dir}"], check=True, capture_output=True)
    return out_dir / f"ctcp_{kernel_name}.bpf.o"


@contextmanager
def registered(kernel_name: str, object_path: Path, note_prefix: str | None = None) -> Iterator[str]:
    """The object registered under this process's owner note (`note_prefix`.json, a new
    prefix by default), as the kernel name `registry.install` returns; unregistered and the
    note removed on the way out, whatever happened."""
    prefix = note_prefix or new_prefix()
    ownership.note_use(prefix, "", kernel_name, registering=True)  # before: a kill in between is cleaned too
    try:
        installed = registry.install("compound", kernel_name=kernel_name, object_path=object_path)
        ownership.note_map_id(prefix, kernel_name)
        yield installed
    finally:
        registry.remove(kernel_name)
        ownership.forget(prefix)  # kept if the removal failed: `congestlab clean` retries it
