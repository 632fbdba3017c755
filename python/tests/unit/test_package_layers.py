"""Every top-level module of congestlab has its place in the layers contract
(pyproject.toml [tool.importlinter], checked by lint-imports in `make test`): a new package
cannot escape it by not being listed."""

from __future__ import annotations

import pkgutil
import tomllib

import congestlab
from congestlab.paths import REPO_ROOT


def test_every_top_level_module_is_in_a_layer():
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    listed = {name.strip().removeprefix("congestlab.") for layer in layers for name in layer.split("|")}
    modules = {m.name for m in pkgutil.iter_modules(congestlab.__path__)}
    assert modules == listed
