"""A suite: several studies run as one (docs/suite.md). A TOML file with one [suite] table:

    [suite]
    name = "mine"
    studies = ["cubic-compound", "rto", "my-study.toml"]   # presets or spec files
    seed_fit = true                                        # also each `<preset>-seed-fit`

or `[[suite.studies]]` tables with `study` and `label`. Suites shipped with congestlab live
in spec/presets/suites/ (`congestlab reproduce dissertation`)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from congestlab.errors import SpecError
from congestlab.input_files import InputFileError, load_toml, read_text
from congestlab.spec import load_preset, load_spec, preset_names
from congestlab.spec.models import StudySpec

SUITES = "congestlab.spec.presets"
SEED_FIT_SUFFIX = "-seed-fit"


class SuiteStudy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    study: str = Field(min_length=1, description="a preset name, or a spec file (relative to the suite file)")
    label: str = ""


class SuiteSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    title: str = ""
    seed_fit: bool = False
    studies: list[SuiteStudy] = Field(min_length=1)

    @field_validator("studies", mode="before")
    @classmethod
    def _names_as_tables(cls, value):
        if isinstance(value, list):
            return [{"study": v} if isinstance(v, str) else v for v in value]
        return value


@dataclass
class SuiteMember:
    """One study of a resolved suite: `key` names its sub-run directory (studies/<key>)."""
    key: str
    label: str
    source: str  # the preset name or the spec file's absolute path
    spec: StudySpec


def suite_names() -> list[str]:
    folder = resources.files(SUITES) / "suites"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml")) if folder.is_dir() else []


def is_suite(name: str) -> bool:
    return name in suite_names()


def load_suite(name: str | None = None, path: Path | None = None) -> tuple[SuiteSpec, Path | None]:
    """A shipped suite by name, or a suite file; returns it and the folder its relative spec
    paths are read from (None for a shipped one). A bad one is one SpecError (exit 2)."""
    if name is not None:
        resource = resources.files(SUITES) / "suites" / f"{name}.toml"
        if not resource.is_file():
            raise SpecError(f"suite {name!r}", f"unknown suite; known: {', '.join(suite_names()) or 'none'}")
        return parse_suite(resource.read_text(), f"suite {name}"), None
    assert path is not None
    if not path.exists():
        raise SpecError(str(path), "no such suite file")
    try:
        text = read_text(path)  # a regular file: a FIFO or a device is refused, not read
    except InputFileError as err:
        raise SpecError(str(path), str(err)) from None
    return parse_suite(text, str(path)), path.parent.absolute()


def parse_suite(text: str, origin: str) -> SuiteSpec:
    try:
        data = load_toml(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(origin, f"not valid TOML: {err}") from None
    except InputFileError as err:
        raise SpecError(origin, str(err)) from None
    if set(data) != {"suite"} or not isinstance(data["suite"], dict):
        raise SpecError(origin, "a suite file holds exactly one [suite] table (name, studies, seed_fit)")
    try:
        return SuiteSpec.model_validate(data["suite"])
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise SpecError(f"{origin}: suite.{where}", first["msg"]) from None


def members(suite: SuiteSpec, base: Path | None, seed_fit: bool | None = None) -> list[SuiteMember]:
    """The suite's studies in order, each loaded and checked; with seed fit (the suite's
    flag unless `seed_fit` says otherwise) each preset's seed-fit variant follows it."""
    seed_fit = suite.seed_fit if seed_fit is None else seed_fit
    known = set(preset_names())
    out: list[SuiteMember] = []
    for entry in suite.studies:
        if entry.study.endswith(".toml"):
            path = Path(entry.study)
            path = path if path.is_absolute() or base is None else base / path
            spec = load_spec(path)
            out.append(SuiteMember(spec.name, entry.label or spec.title or spec.name, str(path.absolute()), spec))
            continue
        spec = load_preset(entry.study)
        out.append(SuiteMember(entry.study, entry.label or spec.title or entry.study, entry.study, spec))
        variant = entry.study + SEED_FIT_SUFFIX
        if seed_fit and variant in known:
            fit = load_preset(variant)
            out.append(SuiteMember(variant, f"{entry.label or spec.title} (seed fit)", variant, fit))
    keys = [m.key for m in out]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise SpecError(f"suite {suite.name}: studies", f"listed twice: {', '.join(twice)}")
    return out
