"""Specs: presets load; a wrong spec is one line naming the field, exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from congestlab.errors import SpecError
from congestlab.spec import load_preset, load_spec, preset_names
from congestlab.spec.loader import parse_spec

PRESET = load_preset("ipv6")


def test_ipv6_preset_is_table_one_plus_c0():
    assert "ipv6" in preset_names()
    levels = {lv.name: lv for lv in PRESET.levels}
    assert list(levels) == ["C0", "C1B", "C2B", "C3B", "C4B", "C5B", "C6B"]
    assert levels["C0"].rate_bps == 0
    assert levels["C2B"].rate_bps == 75_000_000
    assert (levels["C2B"].tcp4_pct, levels["C2B"].tcp6_pct, levels["C2B"].udp4_pct, levels["C2B"].udp6_pct) == (
        22.5, 67.5, 2.5, 7.5)
    assert levels["C6B"].rate_bps == 100_000_000
    assert PRESET.repetitions == 10 and PRESET.quick_repetitions == 3
    assert PRESET.measure.file_kib == 320 and PRESET.measure.families == ["v4", "v6"]
    assert PRESET.servers[0].files_kib == [160, 320, 504]


def _preset_text() -> str:
    from importlib import resources

    return (resources.files("congestlab.spec.presets") / "ipv6.toml").read_text()


@pytest.mark.parametrize(
    "edit, where, problem",
    [
        (('cc = "cubic"\nfiles_kib', 'cc = "vegas"\nfiles_kib'), "servers[0:apache].cc", "Input should be"),
        (("tcp4_pct = 22.5", "tcp4_pct = 32.5"), "levels[2:C2B]", "add up to 110"),
        (('{ switch = "s1", host_id = 2 }', '{ switch = "s9", host_id = 2 }'), "topology",
         "unknown switch 's9'"),
        (("warmup_s = 3.0", "warmup_s = 3.0\nwarmpu = 1"), "warmpu", "Extra inputs are not permitted"),
        (("file_kib = 320", "file_kib = 321"), "", "does not serve the measured file"),
        (('kind = "lean"\nnode = "bare"', 'kind = "lean"\nnode = "server"'), "",
         "server 'lean' (lean) needs node 'server' with stack = \"user\""),
        (('kind = "lean"\nnode = "bare"', 'kind = "lean"\ncc = "cubic"\nnode = "bare"'), "servers[1:lean]",
         "set knobs.cc"),
        (('kind = "apache"', 'kind = "apache"\nknobs = { weight = "W2" }'), "servers[0:apache]",
         "not for kind 'apache'"),
        (('host_id = 11 }]\nstack = "user"', 'host_id = 11 }]\nstack = "kernel"'), "",
         "server 'lean' (lean) needs node 'bare' with stack = \"user\""),
    ],
)
def test_wrong_spec_names_field_and_problem(edit, where, problem):
    text = _preset_text().replace(*edit, 1)
    assert text != _preset_text(), "the edit must apply"
    with pytest.raises(SpecError) as err:
        parse_spec(text, "x.toml")
    message = str(err.value)
    assert where in message and problem in message, message
    assert "\n" not in message


def test_not_toml_is_a_spec_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed\n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(bad)


def test_cli_wrong_spec_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(_preset_text().replace("queue_packets = 1000", "queue_packets = -5"))
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "run", str(bad), "--dry-run"],
                          capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "queue_packets" in lines[0] and "Traceback" not in proc.stderr, proc.stderr


def test_cli_missing_spec_file_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "run", str(tmp_path / "nope.toml"), "--dry-run"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "No such file" in proc.stderr


def test_cli_unknown_preset_exit_2():
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "reproduce", "ipv7", "--dry-run"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown preset" in proc.stderr


def test_dry_run_prints_every_command_and_touches_nothing():
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "reproduce", "ipv6", "--dry-run"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert any("htb rate 100000000bit" in line for line in out)
    assert any("pfifo limit 1000" in line for line in out)
    assert sum(line.startswith("[namespaces] ip netns add") for line in out) == 16  # r1-r4, client, server, bare, 4 MGEN hosts, 5 switches
