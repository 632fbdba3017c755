"""Load specs from TOML files or presets; every problem becomes one SpecError line."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from congestlab.errors import SpecError
from congestlab.spec.models import StudySpec

PRESETS = "congestlab.spec.presets"


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files(PRESETS).iterdir() if p.name.endswith(".toml"))


def load_preset(name: str) -> StudySpec:
    resource = resources.files(PRESETS) / f"{name}.toml"
    if not resource.is_file():
        raise SpecError(f"preset {name!r}", f"unknown preset; known: {', '.join(preset_names())}")
    return parse_spec(resource.read_text(), f"preset {name}")


def load_spec(path: Path) -> StudySpec:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(str(path), err.strerror or str(err)) from None
    except UnicodeDecodeError as err:
        raise SpecError(str(path), f"not UTF-8 text (byte {err.start}); TOML files are UTF-8") from None
    return parse_spec(text, str(path))


def parse_spec(text: str, origin: str) -> StudySpec:
    return _resolve(_toml(text, origin), origin, ())


def _resolve(data: dict[str, Any], origin: str, chain: tuple[str, ...]) -> StudySpec:
    """The file's study: its preset (resolved the same way, so a variant of a variant works),
    its own top-level keys, then its `[set]`. A `[set]` value wins over the `[quick]`
    settings the file inherits (a variant's warmup_s = 60 stays 60 under --quick); a
    `[quick]` the file writes itself stands as written."""
    inherits_quick = "extends" in data and "quick" not in data
    if "extends" in data:
        data = extend_preset(data, origin, chain)
    study = validate_spec(data, origin)
    if not study.set:
        return study
    return apply_settings(study, study.set, f"{origin}: set", over_quick=inherits_quick)


def apply_settings(study: StudySpec, settings: dict[str, Any], origin: str, over_quick: bool = False) -> StudySpec:
    """The study with `settings` (dotted field path -> value, spec/fieldpath.py) applied and
    validated again like a spec file; a wrong path or value is one SpecError line.
    `over_quick`: the settings hold under --quick too (the same fields leave `[quick]`)."""
    from congestlab.spec.fieldpath import FieldPathError, apply

    full = study.model_dump(mode="json")
    as_set = study.model_dump(mode="json", exclude_unset=True)
    try:
        apply(full, settings)  # checks every path against a dump with every field present
        data = apply(as_set, settings, create=True)
    except FieldPathError as err:
        raise SpecError(origin, str(err)) from None
    applied = validate_spec(data, origin)
    return _quick_without(applied, settings) if over_quick else applied


def _quick_without(study: StudySpec, settings: dict[str, Any]) -> StudySpec:
    """The study whose `[quick]` settings (global and per experiment) no longer touch the
    fields of `settings` nor anything inside them."""
    paths = {_canonical(path) for path in settings}

    def keep(path: str) -> bool:
        path = _canonical(path)
        return not any(path == p or path.startswith(p + ".") for p in paths)

    quick = study.quick
    per_experiment = {name: own.model_copy(update={"set": {k: v for k, v in own.set.items() if keep(k)}})
                      for name, own in quick.per_experiment.items()}
    return study.model_copy(update={"quick": quick.model_copy(update={
        "set": {k: v for k, v in quick.set.items() if keep(k)}, "per_experiment": per_experiment})})


def _canonical(path: str) -> str:
    return "topology." + path if path.split(".", 1)[0] == "nodes" else path


def _toml(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(origin, f"not valid TOML: {err}") from None


def extend_preset(data: dict[str, Any], origin: str, chain: tuple[str, ...] = ()) -> dict[str, Any]:
    """`extends = "ipv6"`: the preset, with every top-level key the user's file gives
    replaced whole (e.g. its own experiments and [quick], the preset's network and
    workloads). A preset's report and published values stay only if the user keeps
    its experiments, since they are declared over them. A preset that extends another
    (ipv6-seed-fit) is resolved first, its own `[set]` applied."""
    name = data["extends"]
    resource = resources.files(PRESETS) / f"{name}.toml" if isinstance(name, str) else None
    if resource is None or not resource.is_file():
        raise SpecError(f"{origin}: extends", f"unknown preset {name!r}; known: {', '.join(preset_names())}")
    if name in chain:
        raise SpecError(f"{origin}: extends", f"preset {name!r} extends itself through {' -> '.join(chain)}")
    base = _toml(resource.read_text(), f"preset {name}")
    if "extends" in base:
        resolved = _resolve(base, f"preset {name}", (*chain, name))
        # its [set] is applied; the derived file's own [set] (if any) comes on top
        base = resolved.model_dump(mode="json", exclude_unset=True, exclude={"extends", "set"})
    if "experiments" in data:
        for key in ("report", "published"):
            base.pop(key, None)
    return base | data


def validate_spec(data: dict[str, Any], origin: str) -> StudySpec:
    """The study, its report declaration and every point of its sweeps (full and quick)
    checked now, so a wrong value fails before anything is built."""
    from congestlab.spec.sweep import SweepError, expand

    try:
        study = StudySpec.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = _field_path(first["loc"], data)
        message = first["msg"].removeprefix("Value error, ")
        raise SpecError(f"{origin}: {where}" if where else origin, message) from None
    _validate_report(study, origin)
    try:
        expand(study, quick=False)
        expand(study, quick=True)
    except SweepError as err:
        raise SpecError(f"{origin}: {err.where}", err.problem) from None
    return study


def _validate_report(study: StudySpec, origin: str) -> None:
    """The report package owns the `[report]` table's schema (report/declaration.py)."""
    if not study.report:
        return
    from congestlab.report.declaration import validate_report

    axes = list(dict.fromkeys(a.name for e in study.experiments for a in e.axes))
    try:
        validate_report(study.report, axes, study.published)
    except SpecError as err:
        raise SpecError(f"{origin}: {err.where}", err.problem) from None


def _field_path(loc: tuple, data: Any) -> str:
    """`servers[0].cc` style path; list items named by their `name` when they have one."""
    parts: list[str] = []
    node = data
    for key in loc:
        if isinstance(key, int):
            label = f"[{key}]"
            if isinstance(node, list) and key < len(node) and isinstance(node[key], dict):
                name = node[key].get("name")
                if name:
                    label = f"[{key}:{name}]"
            parts.append(label)
            node = node[key] if isinstance(node, list) and key < len(node) else None
        else:
            parts.append(("." if parts else "") + str(key))
            node = node.get(key) if isinstance(node, dict) else None
    return "".join(parts)
