"""The committed lean knob table (spec/lean_knobs.json) is what the built leanweb prints.

leanweb declares its knobs' names, flags and accepted values once (crates/leanweb/src/knobs.rs,
checked there against what it really accepts); `make lean-knobs-json` regenerates the copy the
Python side loads without a built binary.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import congestlab.spec
from congestlab.errors import ToolError
from congestlab.paths import rust_binary

COMMITTED = Path(congestlab.spec.__file__).resolve().parent / "lean_knobs.json"


def _leanweb() -> Path:
    try:
        return rust_binary("leanweb")
    except ToolError:
        pytest.skip("leanweb is not built (make build): cannot compare its --knobs-json with the committed copy")


def test_committed_knob_table_equals_the_binarys_output():
    proc = subprocess.run([str(_leanweb()), "--knobs-json"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, f"leanweb --knobs-json failed ({proc.returncode}): {proc.stderr.strip()}"
    printed = json.loads(proc.stdout)
    committed = json.loads(COMMITTED.read_text())
    assert committed == printed, "spec/lean_knobs.json is stale: run `make lean-knobs-json` and commit it"


def test_committed_knob_table_names_the_same_knobs_as_the_server():
    from congestlab.servers.lean import KNOB_FLAGS

    table = json.loads(COMMITTED.read_text())
    assert table["format"] == 1
    assert [(k["name"], k["flag"]) for k in table["knobs"]] == list(KNOB_FLAGS.items())
