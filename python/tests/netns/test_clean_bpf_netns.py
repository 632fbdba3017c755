"""`congestlab clean` and the BPF struct_ops (Compound TCP) a killed run left registered:
removed only when the run that registered it is dead, no live run uses it, and it is still
the registration the dead run made (cc/ownership.py).

The first test registers objects under unique kernel names from child processes that note
their use as a run does and are then SIGKILLed; the second SIGKILLs a real `congestlab run`
of a Compound TCP server right after it registered `compound` (skipped if something else has
it registered: the name is global to the machine)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cc_helpers import build_object
from spine_helpers import mini_spec_text, namespaces_with

from congestlab.cc import ownership, registry
from congestlab.testbed import new_prefix

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]

CONGESTLAB = str(Path(sys.executable).parent / "congestlab")
OWN_NOTE = new_prefix()  # what this process registers itself (cc/ownership.py)

CHILD = textwrap.dedent("""
    import sys, time
    from congestlab.cc import ownership, registry
    prefix, name, obj, registering = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    ownership.note_use(prefix, "", name, registering)
    if registering:
        registry.install("compound", kernel_name=name, object_path=obj)
    ownership.note_map_id(prefix, name)
    print("ready", flush=True)
    time.sleep(600)
""")


class Child:
    """A process that notes (and maybe registers) a struct_ops as a run does, then waits."""

    def __init__(self, name: str, obj: Path, registering: bool):
        self.prefix = f"cltest{secrets.token_hex(3)}"
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, self.prefix, name, str(obj),
                                      "1" if registering else "0"], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "ready"

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def note_exists(self) -> bool:
        return (ownership.NOTES_DIR / f"{self.prefix}.json").exists()


@pytest.fixture(scope="module")
def objects(tmp_path_factory) -> dict[str, Path]:
    """Two Compound TCP objects under unique kernel names; unregistered at the end whatever happened."""
    out = tmp_path_factory.mktemp("ctcp")
    names = [f"cc{secrets.token_hex(3)}" for _ in range(2)]
    objects = {name: build_object(name, out) for name in names}
    try:
        yield objects
    finally:
        for name in names:
            registry.remove(name)
        ownership.forget(OWN_NOTE)
        assert not set(names) & set(registry.available())


def test_clean_removes_a_dead_runs_struct_ops_only_when_no_live_run_uses_it(objects):
    a, b = objects
    children: list[Child] = []
    try:
        # a dead run registered A; nobody uses it: removed, its note too
        dead_a = Child(a, objects[a], registering=True)
        children.append(dead_a)
        map_id = registry.struct_ops_id(a)
        assert map_id is not None and a in registry.available()
        dead_a.kill()
        cleaned = ownership.clean_dead_registrations()
        assert f"{a} (map id {map_id}, run {dead_a.prefix})" in cleaned.removed, cleaned
        assert a not in registry.available() and not dead_a.note_exists()

        # a dead run registered B, a live run uses it: kept (and its note, for a later clean)
        dead_b = Child(b, objects[b], registering=True)
        live_b = Child(b, objects[b], registering=False)
        children += [dead_b, live_b]
        dead_b.kill()
        cleaned = ownership.clean_dead_registrations()
        assert not any(b in r for r in cleaned.removed) and any(b in k for k in cleaned.kept), cleaned
        assert b in registry.available() and dead_b.note_exists()
        # ... until the live run is gone too
        live_b.kill()
        cleaned = ownership.clean_dead_registrations()
        assert any(r.startswith(f"{b} ") for r in cleaned.removed), cleaned
        assert b not in registry.available() and not dead_b.note_exists() and not live_b.note_exists()

        # a dead run registered A, then A was registered again by someone else (another map
        # id): not the dead run's any more, left alone; the dead note goes
        dead_again = Child(a, objects[a], registering=True)
        children.append(dead_again)
        dead_again.kill()
        registry.remove(a)
        registry.install("compound", kernel_name=a, object_path=objects[a])
        cleaned = ownership.clean_dead_registrations()
        assert not any(a in r for r in cleaned.removed), cleaned
        assert a in registry.available() and not dead_again.note_exists()
        # now this process's own note for A (the objects fixture unregisters it): noted only
        # after the clean, where a live note naming A would have kept the dead one
        ownership.note_use(OWN_NOTE, "", a, registering=True)
        ownership.note_map_id(OWN_NOTE, a)
    finally:
        for child in children:
            if child.proc.poll() is None:
                child.kill()
            ownership.forget(child.prefix)


def test_clean_removes_compound_a_sigkilled_run_registered(tmp_path):
    if registry.COMPOUND_KERNEL_NAME in registry.available():
        pytest.skip("compound is registered already (another run or `congestlab cc install`)")
    spec = tmp_path / "compound.toml"
    text = mini_spec_text(repetitions=1).replace('kind = "apache"\nnode = "server"\ncc = "cubic"',
                                                 'kind = "apache"\nnode = "server"\ncc = "compound"', 1)
    assert 'cc = "compound"' in text
    spec.write_text(text)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([CONGESTLAB, "run", str(spec), "--out", str(run_dir)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    prefix = ""
    try:
        deadline = time.monotonic() + 60
        while registry.COMPOUND_KERNEL_NAME not in registry.available():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        notes = [p for p in ownership.NOTES_DIR.glob("*.json") if str(run_dir) in p.read_text()]
        assert len(notes) == 1
        prefix = notes[0].stem
        map_id = registry.struct_ops_id(registry.COMPOUND_KERNEL_NAME)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # no teardown at all
        proc.wait()
    assert registry.COMPOUND_KERNEL_NAME in registry.available()  # left registered by the killed run
    try:
        cleaned = subprocess.run([CONGESTLAB, "clean"], capture_output=True, text=True, timeout=120)
        assert cleaned.returncode == 0, cleaned.stderr
        assert f"compound (map id {map_id}, run {prefix})" in cleaned.stdout, cleaned.stdout
        assert registry.COMPOUND_KERNEL_NAME not in registry.available()
        assert not (ownership.NOTES_DIR / f"{prefix}.json").exists()
        assert namespaces_with(prefix) == []
    finally:
        if registry.struct_ops_id(registry.COMPOUND_KERNEL_NAME) == map_id:
            registry.remove(registry.COMPOUND_KERNEL_NAME)
