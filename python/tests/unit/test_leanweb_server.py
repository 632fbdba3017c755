"""LeanServer without root: the command line it builds and the mistakes it refuses."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from congestlab.errors import SpecError, ToolError
from congestlab.paths import REPO_ROOT
from congestlab.servers import lean
from congestlab.servers.lean import LeanServer
from congestlab.spec import lean_knobs
from congestlab.spec.lean_knobs import KNOB_FLAGS


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
    """The runner checks leanweb's first log line against this (runner/servers.py cc_requested):
    `profile = "modern"` alone runs CUBIC (crates/leantcp/src/config.rs TcpConfig::modern)."""
    assert lean_knobs.requested_cc({}) == "none"
    assert lean_knobs.requested_cc({"profile": "bare"}) == "none"
    assert lean_knobs.requested_cc({"profile": "modern"}) == "cubic"
    assert lean_knobs.requested_cc({"profile": "modern", "cc": "reno"}) == "reno"
    assert lean_knobs.requested_cc({"profile": "bare", "cc": "compound"}) == "compound"
    conn_rs = (REPO_ROOT / "crates/leantcp/src/config.rs").read_text()
    for profile, cc in lean_knobs.PROFILE_CC.items():
        body = conn_rs[conn_rs.index(f"pub fn {profile}() -> Self"):]
        assert re.search(r"cc: CcKind::(\w+)", body).group(1).lower() == cc


class RecordingExecutor:
    """Stands in for the testbed's Executor: records the steps it is given."""

    def __init__(self):
        self.commands: list[str] = []

    def run(self, steps) -> None:
        self.commands += [str(step) for step in steps]


def test_the_tap_device_is_made_and_removed_through_the_testbeds_executor(tmp_path):
    """So `--dry-run` can show it (study.dry_run): leanweb itself fails here (no such
    namespace), and stop() removes the TAP device through the same executor."""
    executor = RecordingExecutor()
    server = make(netns="cl-no-such-ns", root_dir=tmp_path, log_path=tmp_path / "lean.jsonl", executor=executor)
    with pytest.raises(ToolError):
        server.start()
    assert executor.commands == ["ip -n cl-no-such-ns tuntap add dev lw0 mode tap",
                                 "ip -n cl-no-such-ns link set lw0 master br0",
                                 "ip -n cl-no-such-ns link set lw0 up",
                                 "ip -n cl-no-such-ns link del lw0"]


def test_the_dry_run_shows_the_lean_servers_tap_commands():
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "reproduce", "ipv6", "--quick", "--dry-run"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    taps = [line for line in proc.stdout.splitlines() if line.startswith("[user-stack]")]
    assert any(re.search(r"ip -n cl\w+-bare tuntap add dev tap0 mode tap  # server lean$", t) for t in taps), taps
    assert any(re.search(r"ip -n cl\w+-bare link del tap0  # server lean$", t) for t in taps), taps


def test_a_given_mac_reaches_the_command_line_and_a_node_keeps_one_mac():
    assert "--mac" not in make().argv  # leanweb picks a random one
    argv = make(mac=lean.node_mac("10.0.4.10/24")).argv
    assert argv[argv.index("--mac") + 1] == "02:00:0a:00:04:0a"
    assert lean.node_mac("10.0.4.10") == lean.node_mac("10.0.4.10/24") != lean.node_mac("10.0.4.11")
    assert lean_knobs.knob_value_problem({"mac": lean.node_mac("10.0.4.10")}) is None  # one leanweb accepts
    with pytest.raises(SpecError, match="mac"):
        make(mac="02:00:00:00:00:01", knobs={"mac": "02:00:00:00:00:02"})
