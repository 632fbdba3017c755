"""The presets' `published` values and `[report]` sections, one TOML file per preset
(ipv6, tcp-lab, anma), kept here while the presets move to the one-spec runner (issue 9)."""

from __future__ import annotations

import tomllib
from importlib import resources


def declaration_names() -> list[str]:
    return sorted(p.name.removesuffix(".toml") for p in resources.files(__name__).iterdir()
                  if p.name.endswith(".toml"))


def load_declaration(name: str) -> dict:
    """{"published": [...], "report": {...}} of a preset."""
    text = (resources.files(__name__) / f"{name}.toml").read_text()
    doc = tomllib.loads(text)
    return {"published": doc.get("published", []), "report": doc.get("report", {})}
