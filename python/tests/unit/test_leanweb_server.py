"""LeanServer without root: the command line it builds and the mistakes it refuses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from congestlab.errors import SpecError
from congestlab.paths import REPO_ROOT
from congestlab.servers import lean
from congestlab.servers.lean import KNOB_FLAGS, LeanServer


@pytest.fixture(autouse=True)
def fake_binary(monkeypatch):
    monkeypatch.setattr(lean, "rust_binary", lambda name: Path(f"/opt/bin/{name}"))


def make(**overrides) -> LeanServer:
    args = dict(netns="t1234-srv", tap="lw0", bridge="br0", addr4_cidr="10.0.1.10/24", addr6_cidr="fd00:1::10/64",
                gateway4="10.0.1.1", gateway6=None, root_dir=Path("/srv/www"), log_path=Path("/run/x/lean.jsonl"),
                knobs={"weight": "W4", "sampling": "one", "rto_min_ms": 250, "rto_g_us": 250})
    args.update(overrides)
    return LeanServer(**args)


def test_argv_carries_addresses_root_log_and_every_knob():
    argv = make().argv
    assert argv[:9] == ["/opt/bin/leanweb", "--tap", "lw0", "--addr4", "10.0.1.10/24", "--addr6", "fd00:1::10/64",
                        "--root", "/srv/www"]
    assert argv[argv.index("--log") + 1] == "/run/x/lean.jsonl"
    assert argv[argv.index("--gateway4") + 1] == "10.0.1.1"
    assert "--gateway6" not in argv
    assert argv[argv.index("--weight") + 1] == "W4"
    assert argv[argv.index("--sampling") + 1] == "one"
    assert argv[argv.index("--rto-min-ms") + 1] == "250"


def test_modern_profile_and_boolean_switches_reach_the_command_line():
    argv = make(knobs={"profile": "modern", "rack_tlp": False, "sack": True, "recovery": "sack"}).argv
    assert argv[argv.index("--profile") + 1] == "modern"
    assert argv[argv.index("--rack-tlp") + 1] == "off"
    assert argv[argv.index("--sack") + 1] == "on"
    assert argv[argv.index("--recovery") + 1] == "sack"


def test_unknown_knob_and_long_tap_name_are_spec_errors():
    with pytest.raises(SpecError, match="rto_minimum"):
        make(knobs={"rto_minimum": 1})
    with pytest.raises(SpecError, match="15"):
        make(tap="a-very-long-tap-name")


def test_knob_flags_match_leanweb_options():
    assert all(flag.startswith("--") and "_" not in flag for flag in KNOB_FLAGS.values())
    rto_knobs = {"rto_alpha", "rto_beta", "rto_k", "rto_g_us", "rto_min_ms", "rto_initial_ms", "sampling", "weight"}
    assert rto_knobs <= set(KNOB_FLAGS)


def leanweb_long_options() -> set[str]:
    """The long options leanweb's clap `Args` struct declares (read from its source: no binary needed)."""
    source = (REPO_ROOT / "crates" / "leanweb" / "src" / "config.rs").read_text()
    struct = source[source.index("pub struct Args"):]
    struct = struct[:struct.index("\n}\n")]
    return {"--" + m.replace("_", "-") for m in re.findall(r"pub (\w+): Option<", struct)}


def test_every_knob_maps_to_a_real_leanweb_option():
    options = leanweb_long_options()
    assert {"--tap", "--rto-min-ms", "--sampling", "--weight"} <= options, "parser of config.rs broke"
    missing = {name: flag for name, flag in KNOB_FLAGS.items() if flag not in options}
    assert missing == {}, f"KNOB_FLAGS names options leanweb does not have: {missing}"
    # and every tuning option leanweb has is reachable as a knob (addresses, root, log are set by LeanServer)
    set_by_lean_server = {"--tap", "--addr4", "--addr6", "--gateway4", "--gateway6", "--root", "--log", "--config"}
    assert options - set_by_lean_server - set(KNOB_FLAGS.values()) == set()


def test_not_started_server_has_no_pids_and_stop_is_harmless():
    server = make()
    assert server.pids == []
    server.stop()


def test_the_requested_cc_follows_the_profile_unless_the_knobs_name_one():
    """The runner checks leanweb's first log line against this (runner.py cc_requested):
    `profile = "modern"` alone runs CUBIC (crates/leantcp/src/config.rs TcpConfig::modern)."""
    assert lean.requested_cc({}) == "none"
    assert lean.requested_cc({"profile": "bare"}) == "none"
    assert lean.requested_cc({"profile": "modern"}) == "cubic"
    assert lean.requested_cc({"profile": "modern", "cc": "reno"}) == "reno"
    assert lean.requested_cc({"profile": "bare", "cc": "compound"}) == "compound"
    conn_rs = (REPO_ROOT / "crates/leantcp/src/config.rs").read_text()
    for profile, cc in lean.PROFILE_CC.items():
        body = conn_rs[conn_rs.index(f"pub fn {profile}() -> Self"):]
        assert re.search(r"cc: CcKind::(\w+)", body).group(1).lower() == cc
