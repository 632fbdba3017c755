"""Lean knob values are checked when a spec loads: one line naming the knob, exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from congestlab.errors import SpecError
from congestlab.spec.lean_knobs import KNOB_FLAGS, KNOB_VALUES, knob_value_problem
from congestlab.spec.loader import parse_spec


def _variant(knob: str, value: str) -> str:
    return f'extends = "ipv6"\nname = "ipv6-knob"\n[set]\n"servers.lean.knobs.{knob}" = {value}\n'


def test_every_leanweb_flag_has_a_value_rule():
    assert set(KNOB_VALUES) == set(KNOB_FLAGS)


@pytest.mark.parametrize(
    "knob, value, problem",
    [
        ("weight", '"W12"', "lean knob weight = 'W12': expected W1, W2"),
        ("sampling", '"most"', "lean knob sampling = 'most': expected all, one, some"),
        ("send_window_segments", "-3", "lean knob send_window_segments = -3: expected an integer >= 1"),
        ("send_window_segments", "0", "expected an integer >= 1"),
        ("send_window_segments", "true", "expected an integer >= 1"),
        ("send_window_segments", "4.5", "expected an integer >= 1"),
        ("pacing_mbps", "0", "lean knob pacing_mbps = 0: expected a number in [0.001, 100000]"),
        ("hystart", '"rfc"', "lean knob hystart = 'rfc': expected true or false"),
        ("send_buffer_max_bytes", "-1", "expected an integer >= 0"),
        ("rto_alpha", "1.5", "expected a number in (0, 1]"),
        ("rto_k", "-1", "expected a number in [0, inf]"),  # nan: test_spec_validation.py
        ("mtu", "200", "expected an integer 1280..9000"),
        ("sack", '"maybe"', "expected true or false"),
        ("recovery", '"tahoe"', "expected go-back-n, gbn, newreno, sack"),
        ("mac", '"01:00:00:00:00:01"', "expected a unicast MAC address"),
        ("mac", '"02:00:00:00:01"', "expected six hex bytes"),
        ("rto_alpha", "0.2", "weight conflicts with rto_alpha/rto_beta"),  # ipv6's lean server sets weight
        ("rto_max_ms", "500", "rto_min_ms = 1000 is above rto_max_ms = 500"),
    ],
)
def test_wrong_knob_value_is_one_spec_error(knob, value, problem):
    with pytest.raises(SpecError) as err:
        parse_spec(_variant(knob, value), "variant.toml")
    message = str(err.value)
    assert "servers[1:lean]" in message and problem in message, message
    assert "\n" not in message


@pytest.mark.parametrize(
    "knobs",
    [
        {"weight": "w5", "sampling": "ONE", "send_window_segments": 4, "pacing_mbps": 5},
        {"sack": "on", "timestamps": False, "recovery": "sack", "cc": "compound", "profile": "modern"},
        {"rto_alpha": 0.25, "rto_beta": 1, "rto_k": 0, "mac": "02:0a:0B:00:00:01", "syn_cookies": "never"},
        {"hystart": False, "send_buffer_max_bytes": 0, "send_buffer_bytes": 4194304},
    ],
)
def test_values_leanweb_accepts_pass(knobs):
    assert knob_value_problem(knobs) is None


def test_sweep_value_is_checked_before_anything_runs(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "congestlab.cli", "sensitivity", "ipv6", "--axis", "servers.lean.knobs.sampling=all,most",
         "--quick", "--dry-run", "--out", str(tmp_path / "sweep")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "lean knob sampling = 'most': expected all, one, some" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "sweep").exists()


def test_the_spec_layer_alone_rejects_a_bad_lean_knob_value():
    """The spec sits at the bottom of the package graph: loading a spec needs no server,
    testbed or workload module, and still refuses a value leanweb would refuse."""
    text = _variant("sampling", '"most"')
    code = (
        "import sys\n"
        "from congestlab.errors import SpecError\n"
        "from congestlab.spec.loader import parse_spec\n"
        f"text = {text!r}\n"
        "try:\n"
        "    parse_spec(text, 'variant.toml')\n"
        "except SpecError as err:\n"
        "    print(err)\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('congestlab.servers', 'congestlab.testbed',\n"
        "                                                        'congestlab.workloads')))\n"
        "print('loaded:', ' '.join(loaded))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rejected, loaded = proc.stdout.strip().splitlines()
    assert "lean knob sampling = 'most': expected all, one, some" in rejected
    assert loaded == "loaded:", loaded
