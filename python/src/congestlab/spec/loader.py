"""Load specs from TOML files or presets; every problem becomes one SpecError line."""

from __future__ import annotations

import json
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from congestlab.errors import SpecError
from congestlab.input_files import InputFileError, load_toml, read_text
from congestlab.spec.fieldpath import FieldPathError, apply, field_path
from congestlab.spec.models import StudySpec
from congestlab.spec.report import validate_report
from congestlab.spec.sweep import SweepError, expand

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
        text = read_text(Path(path))  # a regular file: a FIFO or /dev/zero is refused, not read
    except InputFileError as err:
        raise SpecError(str(path), str(err)) from None
    return parse_spec(text, str(path))


def parse_spec(text: str, origin: str) -> StudySpec:
    return _resolve(_toml(text, origin), origin, ())


def _resolve(data: dict[str, Any], origin: str, chain: tuple[str, ...]) -> StudySpec:
    """The file's study: its preset (resolved the same way, so a variant of a variant works),
    its own top-level keys, then its `[set]`. A `[set]` value wins over the `[quick]`
    settings the file inherits (a variant's warmup_s = 60 stays 60 under --quick); a
    `[quick]` the file writes itself stands as written."""
    inherits_quick = "extends" in data and "quick" not in data
    replaced = {}
    if "extends" in data:
        replaced = {key: value for key, value in data.items() if isinstance(value, dict)}
        data = extend_preset(data, origin, chain)
    study = validate_spec(data, origin, replaced)
    if not study.set:
        return study
    return apply_settings(study, study.set, f"{origin}: set", over_quick=inherits_quick)


def apply_settings(study: StudySpec, settings: dict[str, Any], origin: str, over_quick: bool = False) -> StudySpec:
    """The study with `settings` (dotted field path -> value, spec/fieldpath.py) applied and
    validated again like a spec file; a wrong path or value is one SpecError line.
    `over_quick`: the settings hold under --quick too (the same fields leave `[quick]`)."""
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
        return load_toml(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(origin, f"not valid TOML: {err}") from None
    except InputFileError as err:
        raise SpecError(origin, str(err)) from None


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


def validate_spec(data: dict[str, Any], origin: str, replaced: dict[str, dict] | None = None) -> StudySpec:
    """The study, its report declaration and every point of its sweeps (full and quick)
    checked now, so a wrong value fails before anything is built. `replaced`: the tables a
    file that `extends` a preset gives (they replace the preset's whole)."""
    try:
        study = StudySpec.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = field_path(first["loc"], data)
        message = first["msg"].removeprefix("Value error, ") + _partial_table_hint(first, replaced or {})
        raise SpecError(f"{origin}: {where}" if where else origin, message) from None
    _validate_report(study, origin)
    try:
        expand(study, quick=False)
        expand(study, quick=True)
    except SweepError as err:
        raise SpecError(f"{origin}: {err.where}", err.problem) from None
    return study


def _partial_table_hint(error: dict, replaced: dict[str, dict]) -> str:
    """A field missing from a table the file gives beside `extends`: the table replaced the
    preset's whole, where the author most likely meant to change a few of its fields."""
    table = error["loc"][0] if error["loc"] else None
    if error["type"] != "missing" or table not in replaced:
        return ""
    given = [key for key, value in replaced[table].items() if not isinstance(value, (dict, list))]
    example = f'"{table}.{given[0]}" = {json.dumps(replaced[table][given[0]])}' if given else f'"{table}.FIELD" = VALUE'
    return (f" (with extends, a [{table}] table replaces the preset's whole; to change some of its fields, "
            f"give them under [set] as dotted field paths, e.g. {example})")


def _validate_report(study: StudySpec, origin: str) -> None:
    """The `[report]` table's schema: spec/report.py (the report package renders it)."""
    if not study.report:
        return
    axes = list(dict.fromkeys(a.name for e in study.experiments for a in e.axes))
    try:
        validate_report(study.report, axes, study.published)
    except SpecError as err:
        raise SpecError(f"{origin}: {err.where}", err.problem) from None
