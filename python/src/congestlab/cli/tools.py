"""The command line's tools: `presets`, `schema`, `clean`, `doctor` and `--version`."""

from __future__ import annotations

import json

import typer

from congestlab import __version__
from congestlab.cc.ownership import clean_dead_registrations
from congestlab.cluster.node import clean_work_dirs, work_parent  # (no Ray import there)
from congestlab.doctor import diagnose
from congestlab.paths import REPO_ROOT
from congestlab.rundir import git_revision
from congestlab.runner import require_root
from congestlab.spec import load_preset, preset_names
from congestlab.spec.models import StudySpec
from congestlab.spec.reference import render
from congestlab.suite.spec import load_suite, suite_names
from congestlab.testbed.namespaces import OWNERS_DIR, clean_dead_runs


def print_version(value: bool) -> None:
    """`--version` (an eager option of the whole command line)."""
    if value:
        print(f"congestlab {__version__} (git {git_revision()})")
        raise typer.Exit(0)


def presets() -> None:
    """List the studies' presets (each a TOML file; `congestlab schema` describes the format)."""
    for name in preset_names():
        spec = load_preset(name)
        print(f"{name:10} {spec.title}  [{spec.source}]")
    for name in suite_names():
        print(f"{name:10} suite: {load_suite(name=name)[0].title}")


def schema(
    markdown: bool = typer.Option(False, "--markdown", help="the field reference (docs/spec.md) instead"),
) -> None:
    """Print the JSON Schema of a study spec (for editors that validate TOML as you type)."""
    if markdown:
        print(render(REPO_ROOT / "examples" / "lean-weights.toml"), end="")
        return
    print(json.dumps(StudySpec.model_json_schema(), indent=1))


def clean(
    all_runs: bool = typer.Option(False, "--all", help="also remove namespaces of runs still in progress"),
) -> None:
    """Remove what crashed runs left: namespaces (and their processes), owner records,
    temporary docroots, cluster work directories and BPF struct_ops registrations (Compound
    TCP) whose owning process is gone."""
    require_root("removes what crashed runs left (network namespaces, their processes, BPF registrations)")
    removed = clean_dead_runs(include_running=all_runs)
    works = clean_work_dirs()
    bpf = clean_dead_registrations()  # (only dead runs': a live run may share the registration)
    for what, items in (("namespaces", removed.namespaces), (f"owner records in {OWNERS_DIR}", removed.owner_records),
                        ("temporary docroots", removed.temp_dirs),
                        ("BPF sampler processes (owner records' probes)", removed.samplers),
                        (f"cluster work directories under {work_parent()}", [str(w) for w in works]),
                        ("BPF struct_ops congestion controls", bpf.removed)):
        print(f"removed {len(items)} {what}" + (": " + " ".join(items) if items else ""))
    for item in bpf.kept:
        print(f"kept BPF struct_ops {item}")


def doctor() -> None:
    """What is present or missing on this machine, and the command that fixes each."""
    missing = 0
    for item in diagnose():
        mark = "ok  " if item.ok else ("MISS" if item.required else "----")
        missing += item.required and not item.ok
        print(f"[{mark}] {item.name:14} {item.detail}" + ("" if item.ok else f"  -> {item.fix}"))
    raise typer.Exit(1 if missing else 0)
