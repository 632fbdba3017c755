"""Which runs `congestlab compare` may set side by side, and what differs between them.

Runs of different studies, or with no cell measured in both, are refused (their "0
differences beyond the spread" would mean nothing); variants of one study (a seed-fit
variant, a sensitivity configuration, a user spec extending a preset) are compared with a
warning that names the spec fields and the environment that differ.
"""

from __future__ import annotations

from pathlib import Path

from congestlab.errors import RunDirError

# fields that name a run rather than change what it measures
_NAMING_FIELDS = ("name", "title")
# the most differing spec fields a warning lists by name
MAX_FIELDS_LISTED = 12


def study_identity(spec: dict) -> str:
    """What a run is a run of: the seed tables it reproduces (`source`), else its name.
    Variants of a preset keep the preset's source; another study has its own."""
    return str(spec.get("source") or spec.get("name") or "?")


def same_runs(names: list[str], run_dirs: list[Path]) -> list[str]:
    """A warning for each run given again (the same directory, by whatever path): compared
    with itself, its every difference is 0 and says nothing."""
    seen: dict[Path, str] = {}
    warnings = []
    for name, run_dir in zip(names, run_dirs):
        real = Path(run_dir).resolve()
        if real in seen:
            warnings.append(f"{name} is {seen[real]} again ({run_dir}): a run compared with itself differs by nothing")
        else:
            seen[real] = name
    return warnings


def check_same_study(names: list[str], specs: list[dict], force: bool) -> list[str]:
    """Raise RunDirError when a run is of another study than the first (unless `force`);
    the warnings for variants: which spec fields differ from the first run's."""
    base_name, base = names[0], specs[0]
    warnings = []
    for name, spec in zip(names[1:], specs[1:]):
        if study_identity(spec) != study_identity(base):
            problem = (f"{name} is a run of another study than {base_name} "
                       f"({study_identity(spec)!r} vs {study_identity(base)!r})")
            if not force:
                raise RunDirError(f"compare: {problem}; --force compares them anyway")
            warnings.append(problem)
            continue
        fields = differing_fields(base, spec)
        if fields:
            listed = ", ".join(fields[:MAX_FIELDS_LISTED])
            more = f" and {len(fields) - MAX_FIELDS_LISTED} more" if len(fields) > MAX_FIELDS_LISTED else ""
            warnings.append(f"{name} is a variant of {base_name}: spec fields differ: {listed}{more}")
    return warnings


def check_cells_shared(names: list[str], shared_cells: list[int], force: bool) -> list[str]:
    """`shared_cells[i]`: cells with samples in both the first run and run i+1."""
    warnings = []
    for name, shared in zip(names[1:], shared_cells):
        if shared == 0:
            problem = f"{name} has no cell with samples in common with {names[0]}"
            if not force:
                raise RunDirError(f"compare: {problem}; --force compares them anyway")
            warnings.append(problem)
    return warnings


def environment_differences(names: list[str], manifests: list[dict]) -> list[str]:
    """Warnings for the git revision, kernel and bottleneck calibration that differ from the first run's."""
    def facts(manifest: dict) -> dict:
        env = manifest.get("environment") if isinstance(manifest.get("environment"), dict) else {}
        return {"git revision": env.get("git_revision"), "kernel": env.get("kernel"),
                "calibration": manifest.get("calibration")}

    base = facts(manifests[0])
    warnings = []
    for name, manifest in zip(names[1:], manifests[1:]):
        other = facts(manifest)
        for what in base:
            if other[what] != base[what]:
                values = "" if what == "calibration" else f" ({other[what] or 'none'} vs {base[what] or 'none'})"
                warnings.append(f"{name}: {what} differs from {names[0]}'s{values}")
    return warnings


def differing_fields(a: dict, b: dict, prefix: str = "") -> list[str]:
    """Dotted paths where two resolved specs differ (lists compared whole), naming fields left out."""
    paths = []
    for key in sorted(set(a) | set(b), key=str):
        if not prefix and key in _NAMING_FIELDS:
            continue
        path = f"{prefix}{key}"
        left, right = a.get(key), b.get(key)
        if isinstance(left, dict) and isinstance(right, dict):
            paths += differing_fields(left, right, path + ".")
        elif left != right:
            paths.append(path)
    return paths
