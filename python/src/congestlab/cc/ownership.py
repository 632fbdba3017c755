"""Which run registered which BPF struct_ops congestion control, so `congestlab clean` can
remove what a killed run left registered (registration is global to the machine,
cc/registry.py) without touching one that a live run still uses.

One note per run, OWNERS_DIR/bpf/<prefix>.json, next to the testbed's owner record
(testbed/namespaces.py): the owning process (PID and start time), the run directory and
every struct_ops kernel name the run uses, each with `registered` (this run registered it)
and the map id it had. The note is written before a registration (an owner killed in
between leaves a note with map id null) and removed after the run unregistered its own.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.cc import registry
from congestlab.errors import CongestlabError
from congestlab.testbed.namespaces import OWNERS_DIR, process_alive, process_start_time

NOTES_DIR = OWNERS_DIR / "bpf"


def _path(prefix: str) -> Path:
    return NOTES_DIR / f"{prefix}.json"


def _read(path: Path) -> dict | None:
    try:
        note = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) and isinstance(note.get("struct_ops"), list) else None


def _write(prefix: str, note: dict) -> None:
    NOTES_DIR.mkdir(parents=True, exist_ok=True)
    tmp = _path(prefix).with_suffix(".tmp")
    tmp.write_text(json.dumps(note, indent=1) + "\n")
    tmp.replace(_path(prefix))  # never half a note


def note_use(prefix: str, run_dir: str, kernel_name: str, registering: bool) -> None:
    """This process (the run `prefix`) uses the struct_ops `kernel_name`; `registering`: it is
    about to register it itself. Call before the registration."""
    note = _read(_path(prefix)) or {"pid": os.getpid(), "started": process_start_time(os.getpid()),
                                    "run_dir": run_dir, "struct_ops": []}
    entries = [e for e in note["struct_ops"] if e.get("name") != kernel_name]
    before = next((e for e in note["struct_ops"] if e.get("name") == kernel_name), {})
    entries.append({"name": kernel_name, "registered": registering or bool(before.get("registered")),
                    "map_id": before.get("map_id")})
    note["struct_ops"] = entries
    _write(prefix, note)


def note_map_id(prefix: str, kernel_name: str) -> int | None:
    """After the registration (or on first use): the map id the kernel gave the struct_ops."""
    map_id = registry.struct_ops_id(kernel_name)
    note = _read(_path(prefix))
    if note is not None:
        for entry in note["struct_ops"]:
            if entry.get("name") == kernel_name:
                entry["map_id"] = map_id
        _write(prefix, note)
    return map_id


def forget(prefix: str) -> None:
    _path(prefix).unlink(missing_ok=True)


def _alive(note: dict) -> bool:
    try:
        return process_alive(int(note["pid"]), str(note.get("started") or ""))
    except (KeyError, TypeError, ValueError):
        return False


@dataclass
class CleanedBpf:
    removed: list[str] = field(default_factory=list)  # "compound (map id 42, run clab12)"
    kept: list[str] = field(default_factory=list)  # a dead run's registration a live run uses
    notes: list[str] = field(default_factory=list)  # the dead runs' notes removed


def clean_dead_registrations() -> CleanedBpf:
    """Unregister the struct_ops that runs whose owning process is gone registered, unless a
    live run's note uses the same kernel name (then the dead run's note stays, for a later
    clean), or the name is now registered with another map id (someone registered it again
    since: not the dead run's)."""
    out = CleanedBpf()
    notes = {p.stem: note for p in sorted(NOTES_DIR.glob("*.json")) if (note := _read(p)) is not None} \
        if NOTES_DIR.is_dir() else {}
    in_use = {e.get("name") for note in notes.values() if _alive(note) for e in note["struct_ops"]}
    for prefix, note in notes.items():
        if _alive(note):
            continue
        keep = False
        for entry in note["struct_ops"]:
            name = entry.get("name")
            if not entry.get("registered") or not isinstance(name, str):
                continue
            if name in in_use:
                keep = True
                out.kept.append(f"{name} (run {prefix}): a live run uses it")
                continue
            current = registry.struct_ops_id(name)
            if current is None or (entry.get("map_id") is not None and entry["map_id"] != current):
                continue  # gone, or registered again by someone else since
            try:
                registry.remove(name)
            except CongestlabError as err:
                keep = True
                out.kept.append(f"{name} (run {prefix}): {err}")
                continue
            out.removed.append(f"{name} (map id {current}, run {prefix})")
        if not keep:
            forget(prefix)
            out.notes.append(prefix)
    return out
