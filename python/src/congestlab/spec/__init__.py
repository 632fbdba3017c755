"""Study specs: pydantic models loaded from TOML, and the studies' presets."""

from congestlab.spec.models import (
    AxisSpec,
    ExperimentSpec,
    LevelSpec,
    LinkSpec,
    NodeSpec,
    QuickSpec,
    ServerSpec,
    StudySpec,
    SwitchSpec,
    TopologySpec,
)
from congestlab.spec.loader import load_preset, load_spec, preset_names

__all__ = [
    "AxisSpec",
    "ExperimentSpec",
    "LevelSpec",
    "LinkSpec",
    "NodeSpec",
    "QuickSpec",
    "ServerSpec",
    "StudySpec",
    "SwitchSpec",
    "TopologySpec",
    "load_preset",
    "load_spec",
    "preset_names",
]
