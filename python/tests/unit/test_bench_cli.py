"""`congestlab bench`: every argument reaches dualbench unchanged; --netns wraps it in
`ip netns exec`; dualbench's exit code is the command's exit code."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from congestlab.cli import bench as bench_cli
from congestlab.cli import app


@pytest.fixture
def fake_dualbench(tmp_path, monkeypatch):
    """A stand-in binary that records its argv as JSON and exits with $FAKE_RC."""
    record = tmp_path / "argv.json"
    exe = tmp_path / "dualbench"
    exe.write_text("#!/usr/bin/env python3\nimport json, os, sys\n"
                   f"open({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
                   "sys.exit(int(os.environ.get('FAKE_RC', '0')))\n")
    exe.chmod(0o755)
    monkeypatch.setattr(bench_cli, "rust_binary", lambda name: exe)
    return exe, record


def test_argv_plain_and_in_a_namespace():
    exe = Path("/opt/dualbench")
    args = ["--addresses", "a.txt", "--requests", "10"]
    assert bench_cli.dualbench_argv("anma", args, None, exe) == ["/opt/dualbench", "anma", *args]
    assert bench_cli.dualbench_argv("load", ["--rate", "5"], "t1a2-client", exe) == [
        "ip", "netns", "exec", "t1a2-client", "/opt/dualbench", "load", "--rate", "5"]


def test_anma_passes_every_option_through(fake_dualbench):
    _, record = fake_dualbench
    args = ["--addresses", "x.txt", "--path", "/4KiB.bin", "--port", "8080", "--requests", "100",
            "--concurrency", "10", "--timeout", "300ms", "--seed", "3", "--json", "o.json", "--help"]
    result = CliRunner().invoke(app, ["bench", "anma", *args])
    assert result.exit_code == 0, result.output
    assert json.loads(record.read_text()) == ["anma", *args]


def test_load_passes_repeated_urls_and_flags(fake_dualbench):
    _, record = fake_dualbench
    args = ["--url", "http://127.0.0.1:8080/a", "--url", "http://[::1]:8080/b", "--rate", "50", "--seconds", "2",
            "--keepalive", "--quiet"]
    result = CliRunner().invoke(app, ["bench", "load", *args])
    assert result.exit_code == 0, result.output
    assert json.loads(record.read_text()) == ["load", *args]


def test_exit_code_of_dualbench_is_kept(fake_dualbench, monkeypatch):
    monkeypatch.setenv("FAKE_RC", "3")
    result = CliRunner().invoke(app, ["bench", "anma", "--addresses", "bad.txt"])
    assert result.exit_code == 3


@pytest.mark.skipif(os.geteuid() == 0, reason="checks the non-root refusal")
def test_netns_needs_root(fake_dualbench):
    result = CliRunner().invoke(app, ["bench", "anma", "--netns", "x", "--requests", "1"])
    assert result.exit_code != 0
