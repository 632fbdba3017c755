"""The configurations of a sensitivity sweep: every combination of plausible values of the
fields a seed leaves open, each applied to the preset and validated before anything runs.

An axis is the spec's own `AxisSpec` (fields + values [+ labels]); on the command line
`--axis FIELD=V1,V2` (one field; the values parsed as a TOML array, e.g. `1000,64` or
`[],["udp4","udp6"]`, else as bare words `all,one`), or `[[axes]]` tables in a TOML file for
axes that move several fields together (e.g. a receive window on four hosts).
"""

from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from congestlab.errors import SpecError
from congestlab.input_files import InputFileError, load_toml, read_text
from congestlab.spec.loader import apply_settings
from congestlab.spec.models import AxisSpec, StudySpec

_UNSAFE = re.compile(r"[^A-Za-z0-9_+-]")


@dataclass
class Configuration:
    id: str  # e.g. "sink_window-xp.queue_packets-64": a directory name
    labels: dict[str, str]  # axis name -> value label, in axis order
    settings: dict[str, Any]  # field path -> value

    def describe(self) -> dict:
        return {"id": self.id, "labels": self.labels, "settings": self.settings}


def parse_axis_option(text: str) -> AxisSpec:
    """`FIELD=V1,V2,...` -> an axis named after the field's last segment."""
    field, sep, values_text = text.partition("=")
    field = field.strip()
    if not sep or not field or not values_text.strip():
        raise SpecError(f"--axis {text!r}", "write FIELD=V1,V2,... (e.g. nodes.r1.links.s0.queue_packets=1000,64)")
    try:
        values = tomllib.loads(f"v = [{values_text}]")["v"]
    except tomllib.TOMLDecodeError:
        values = [v.strip() for v in values_text.split(",")]
    name = re.sub(r"[^a-z0-9_]", "_", field.rsplit(".", 1)[-1].lower()).lstrip("_0123456789")[:24] or "axis"
    return _axis({"name": name, "fields": [field], "values": values}, f"--axis {text!r}")


def load_axes_file(path: Path) -> list[AxisSpec]:
    """`[[axes]]` tables (name, fields, values, labels) of a TOML file."""
    try:
        data = load_toml(read_text(Path(path)))
    except InputFileError as err:
        raise SpecError(str(path), str(err)) from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(str(path), f"not valid TOML: {err}") from None
    unknown = sorted(set(data) - {"axes"})
    if unknown or not isinstance(data.get("axes"), list) or not data["axes"]:
        raise SpecError(str(path), "give one or more [[axes]] tables (name, fields, values, labels) and nothing else")
    return [_axis(entry, f"{path}: axes[{i}]") for i, entry in enumerate(data["axes"])]


def _axis(entry: dict, where: str) -> AxisSpec:
    try:
        axis = AxisSpec.model_validate(entry)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(map(str, first["loc"]))
        raise SpecError(f"{where}{': ' + loc if loc else ''}", first["msg"].removeprefix("Value error, ")) from None
    if axis.levels:
        raise SpecError(where, "a sensitivity axis sets fields; levels belong to the preset's own axes")
    return axis


def value_labels(axis: AxisSpec) -> list[str]:
    """The axis's labels; an empty list value (e.g. `reverse = []`) is labelled "none"."""
    labels = axis.point_labels()
    return [label or "none" for label in labels]


def configurations(axes: list[AxisSpec]) -> list[Configuration]:
    names = [a.name for a in axes]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SpecError(f"axis {dupes[0]!r}", "two axes have this name; name them apart (an axes file's `name`)")
    fields = [f for a in axes for f in a.fields]
    twice = sorted({f for f in fields if fields.count(f) > 1})
    if twice:
        raise SpecError(f"field {twice[0]!r}", "set by two axes; one axis per field")
    per_axis = []
    for axis in axes:
        entries = []
        for label, value in zip(value_labels(axis), axis.values):
            settings = {axis.fields[0]: value} if len(axis.fields) == 1 else dict(zip(axis.fields, value))
            entries.append((axis.name, label, settings))
        per_axis.append(entries)
    out = []
    for combo in itertools.product(*per_axis):
        labels = {name: label for name, label, _ in combo}
        settings: dict[str, Any] = {}
        for _, _, values in combo:
            settings |= values
        config_id = ".".join(f"{n}-{_UNSAFE.sub('_', lab)}" for n, lab in labels.items())
        out.append(Configuration(config_id, labels, settings))
    return out


def swept_fields(study: StudySpec) -> set[str]:
    """Fields the study's own axes and levels set: a configuration must not set them too."""
    out = set()
    for exp in study.experiments:
        out |= set(exp.set)
        for axis in exp.axes:
            out |= set(axis.fields)
            for level in axis.levels:
                out |= set(study.level(level).set)
    return out


def apply_configuration(study: StudySpec, config: Configuration, origin: str) -> StudySpec:
    """The study with the configuration's fields set, validated like a spec file (its
    sweeps and report too); a wrong field or value is one SpecError line."""
    clash = sorted(set(config.settings) & swept_fields(study))
    if clash:
        raise SpecError(f"{origin}: {clash[0]}", "the study's own axes or levels set this field; sweep another")
    # over_quick: a swept value holds under --quick too (cubic-compound's [quick] warmup_s = 20
    # would otherwise replace a swept warmup_s)
    return apply_settings(study, config.settings, f"{origin} [{config.id}]", over_quick=True)
