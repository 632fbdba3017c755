"""Which TCP congestion controls the kernel offers, and Compound TCP's (un)registration.

Compound TCP is the BPF struct_ops object built by `make build` (bpf/build/ctcp.bpf.o,
kernel name `compound`). Registration is global to the machine, so tests build objects
under their own unique kernel names (`make -C bpf object CTCP_ID=...`) and pass them here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from congestlab.errors import CongestlabError, NotRootError, SpecError, ToolError
from congestlab.paths import REPO_ROOT

AVAILABLE_PATH = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
BPF_BUILD_DIR = REPO_ROOT / "bpf" / "build"
BUILTIN = ("cubic", "reno", "bbr")
SPEC_VALUES = BUILTIN + ("compound",)
COMPOUND_KERNEL_NAME = "compound"
# The struct_ops map and the counters map (<name>_st) carry the kernel name: <= 12 chars.
_KERNEL_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,11}$")


class CcError(CongestlabError):
    """A congestion control could not be installed, found or removed."""

    exit_code = 8


def available() -> list[str]:
    """The kernel's tcp_available_congestion_control (global to the machine)."""
    return AVAILABLE_PATH.read_text().split()


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise ToolError(argv, None) from None


def _check_kernel_name(kernel_name: str) -> None:
    if not _KERNEL_NAME_RE.match(kernel_name):
        raise SpecError("cc kernel name", f"{kernel_name!r} must match [a-z][a-z0-9_]{{0,11}}")


def default_object(kernel_name: str) -> Path:
    """Where `make build` (compound) or `make -C bpf object CTCP_ID=<name>` puts the object."""
    if kernel_name == COMPOUND_KERNEL_NAME:
        return BPF_BUILD_DIR / "ctcp.bpf.o"
    return BPF_BUILD_DIR / f"ctcp_{kernel_name}.bpf.o"


def struct_ops_id(kernel_name: str) -> int | None:
    """The map id of the BPF struct_ops registered under this name, None if there is none."""
    proc = _run(["bpftool", "-j", "struct_ops", "show", "name", kernel_name])
    if proc.returncode != 0:
        return None
    try:
        shown = json.loads(proc.stdout or "null")
    except json.JSONDecodeError:
        return None
    entries = shown if isinstance(shown, list) else [shown]
    ids = [e.get("id") for e in entries if isinstance(e, dict) and e.get("name") == kernel_name]
    return ids[0] if ids and isinstance(ids[0], int) else None


def is_struct_ops(kernel_name: str) -> bool:
    """True if a BPF struct_ops map of this name is registered."""
    return struct_ops_id(kernel_name) is not None


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise NotRootError(f"{what} needs root (BPF struct_ops registration)")


def install(name: str = "compound", kernel_name: str | None = None, object_path: Path | None = None) -> str:
    """Register Compound TCP unless already registered; returns the kernel algorithm name.

    Idempotent. Builds nothing: the object comes from `make build` (or `object_path`).
    """
    if name != "compound":
        raise SpecError("cc install", f"{name!r} cannot be installed; only 'compound' (built-ins: {', '.join(BUILTIN)})")
    kernel_name = kernel_name or COMPOUND_KERNEL_NAME
    _check_kernel_name(kernel_name)
    if kernel_name in available():
        if kernel_name in BUILTIN or not is_struct_ops(kernel_name):
            raise CcError(f"{kernel_name!r} is already a kernel congestion control that is not our BPF object")
        return kernel_name
    obj = Path(object_path) if object_path else default_object(kernel_name)
    if not obj.is_file():
        raise CcError(f"{obj} is missing; run `make build` (or `make -C bpf object CTCP_ID={kernel_name}`)")
    _require_root("cc install")
    argv = ["bpftool", "struct_ops", "register", str(obj)]
    proc = _run(argv)
    if kernel_name in available():  # also covers a concurrent install that won the race
        return kernel_name
    if proc.returncode != 0:
        raise ToolError(argv, proc.returncode, proc.stderr)
    raise CcError(f"{obj} registered but {kernel_name!r} is not in {AVAILABLE_PATH}: wrong object for this name?")


def remove(name: str = "compound") -> bool:
    """Unregister a Compound TCP struct_ops by its (map = kernel) name; False if it was not there."""
    kernel_name = COMPOUND_KERNEL_NAME if name == "compound" else name
    _check_kernel_name(kernel_name)
    if kernel_name in BUILTIN:
        raise SpecError("cc remove", f"{kernel_name!r} is built into the kernel and cannot be removed")
    if not is_struct_ops(kernel_name):
        return False
    if kernel_name not in available():  # unregistered already: freed when its last socket closes
        return True
    _require_root("cc remove")
    argv = ["bpftool", "struct_ops", "unregister", "name", kernel_name]
    proc = _run(argv)
    if proc.returncode != 0 and kernel_name in available():
        raise ToolError(argv, proc.returncode, proc.stderr)
    return True


def pending_free(kernel_name: str) -> bool:
    """Unregistered, yet its map still listed: sockets that chose it before (a killed flow's,
    retrying in a deleted namespace) hold it, and the kernel frees it when the last one closes
    (an unregister then answers EINPROGRESS). No new socket can choose it."""
    return is_struct_ops(kernel_name) and kernel_name not in available()


def ensure(cc: str) -> str:
    """Kernel algorithm name for a spec value ("cubic" | "reno" | "bbr" | "compound"), installing compound if needed."""
    if cc not in SPEC_VALUES:
        raise SpecError("cc", f"{cc!r} is not one of {', '.join(SPEC_VALUES)}")
    if cc == "compound":
        return install("compound")
    if cc not in available():
        raise CcError(f"{cc!r} is not in this kernel's {AVAILABLE_PATH}")
    return cc


def flow_stats(kernel_name: str = COMPOUND_KERNEL_NAME) -> list[dict]:
    """The program's per-flow counters (map <kernel_name>_st): one dict per flow, keys as in ctcp.bpf.c."""
    _check_kernel_name(kernel_name)
    argv = ["bpftool", "-j", "map", "dump", "name", f"{kernel_name}_st"]
    proc = _run(argv)
    if proc.returncode != 0:
        raise ToolError(argv, proc.returncode, proc.stderr)
    try:
        entries = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError as err:
        raise CcError(f"bpftool map dump of {kernel_name}_st is not JSON: {err}") from None
    flows = []
    for entry in entries:
        formatted = entry.get("formatted", entry)
        key, value = formatted.get("key"), formatted.get("value")
        if isinstance(key, dict) and isinstance(value, dict):
            flows.append({**key, **value})
    return flows
