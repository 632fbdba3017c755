"""Run directories: new or empty only, and always absolute (tools in namespaces get these paths)."""

from __future__ import annotations

from pathlib import Path

import pytest

from congestlab.errors import RunDirError
from congestlab.rundir import new_run_dir, prepare_out_dir


def test_default_run_dir_under_a_relative_base_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = new_run_dir(Path("runs"), "ipv6", "cl0a1b2c")
    assert path.is_absolute() and path.parent == tmp_path / "runs"
    assert (path / "logs").is_dir()


def test_relative_out_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert prepare_out_dir(Path("mine")) == tmp_path / "mine"


def test_out_must_be_new_or_empty(tmp_path):
    (tmp_path / "old.txt").write_text("an earlier run")
    with pytest.raises(RunDirError, match="not empty"):
        prepare_out_dir(tmp_path)
