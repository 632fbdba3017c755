"""The presets' `published` values and `[report]` sections, read from the preset files
(python/src/congestlab/spec/presets/<name>.toml), for the report tests."""

from __future__ import annotations

import tomllib
from importlib import resources

PRESETS = "congestlab.spec.presets"


def declaration_names() -> list[str]:
    """Presets that declare a report."""
    names = []
    for p in resources.files(PRESETS).iterdir():
        if p.name.endswith(".toml") and tomllib.loads(p.read_text()).get("report"):
            names.append(p.name.removesuffix(".toml"))
    return sorted(names)


def load_declaration(name: str) -> dict:
    """{"published": [...], "report": {...}} of a preset."""
    doc = tomllib.loads((resources.files(PRESETS) / f"{name}.toml").read_text())
    return {"published": doc.get("published", []), "report": doc.get("report", {})}
