"""Specs that cannot run as written are refused with one line naming the field (exit 2):
servers on one node and port, overlapping subnets, duplicate addresses, non-finite numbers,
a partial table beside `extends`; every preset and example spec still loads."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

import pytest

from congestlab.paths import REPO_ROOT
from congestlab.spec import load_preset, load_spec, preset_names
from congestlab.spec.loader import parse_spec
from congestlab.spec.shaping import unshaped_links
from congestlab.spec.sweep import expand
from congestlab.testbed.layout import build_layout
from spec_fixtures import TINY_TOPOLOGY, dry_run, refused

TINY = """
name = "tiny"
""" + TINY_TOPOLOGY.lstrip("\n") + """[[workloads]]
name = "get"
kind = "get"
requests = [{ client = "client", server = "apache" }]
"""


def test_the_tiny_spec_loads():
    parse_spec(TINY, "x.toml")


@pytest.mark.parametrize("second", ['name = "nginx"\nkind = "nginx"', 'name = "apache2"\nkind = "apache"'])
def test_two_servers_on_one_node_and_port_arerefused(second):
    message = refused(TINY + f'[[servers]]\n{second}\nnode = "server"\n')
    name = second.split('"')[1]
    assert f"servers.{name}.port: 80 on node 'server' is already servers.apache's port" in message, message


def test_two_servers_on_one_node_with_their_own_ports_load():
    parse_spec(TINY + '[[servers]]\nname = "nginx"\nkind = "nginx"\nnode = "server"\nport = 8080\n', "x.toml")


def test_a_sweep_moving_a_server_onto_another_servers_port_isrefused():
    text = TINY + ('[[servers]]\nname = "nginx"\nkind = "nginx"\nnode = "server"\nport = 8080\n'
                   '[[experiments]]\nname = "main"\n'
                   'axes = [{ name = "p", fields = ["servers.nginx.port"], values = [8080, 80] }]\n')
    message = refused(text)
    assert "experiments.main p=80" in message and "servers.nginx.port: 80 on node 'server'" in message, message


def test_two_lean_servers_on_one_user_stack_node_arerefused():
    message = refused('extends = "ipv6"\nname = "x"\n[set]\n"servers.leanmodern.node" = "bare"\n')
    assert "servers.leanmodern.node: node 'bare' already has lean server 'lean'" in message, message


def test_two_lean_servers_on_one_node_and_port_are_refused_however_the_port_is_given():
    text = 'extends = "ipv6"\nname = "x"\n[set]\n"servers.leanmodern.node" = "bare"\n"servers.leanmodern.port" = 8080\n'
    assert "servers.leanmodern.node" in refused(text)


@pytest.mark.parametrize("old, new, field", [
    ('subnet4 = "10.9.1.0/24"', 'subnet4 = "10.9.0.128/25"', "topology.switches.s1.subnet4: 10.9.0.128/25 overlaps "
                                                             "switch s0's 10.9.0.0/24"),
    ('subnet4 = "10.9.1.0/24"', 'subnet4 = "10.9.0.0/24"', "topology.switches.s1.subnet4: 10.9.0.0/24 overlaps"),
    ('subnet6 = "fd00:9:0:1::/64"', 'subnet6 = "fd00:9:0:0::/64"', "topology.switches.s1.subnet6: fd00:9::/64 "
                                                                   "overlaps switch s0's"),
])
def test_overlapping_subnets_arerefused(old, new, field):
    assert field in refused(TINY.replace(old, new))


def test_a_host_id_used_twice_on_a_switch_isrefused():
    text = TINY.replace('name = "server"\nlinks = [{ switch = "s1" }]',
                        'name = "server"\nlinks = [{ switch = "s1", host_id = 1 }]')
    message = refused(text)
    assert "topology.nodes.server.links.s1.host_id: 1 gives 10.9.1.1, already node r1's address" in message


def test_a_given_host_id_that_an_earlier_default_took_isrefused():
    text = TINY.replace('links = [{ switch = "s0" }]', 'links = [{ switch = "s0", host_id = 100 }]').replace(
        'name = "r1"\nkind = "router"\nlinks = [{ switch = "s0", host_id = 1,', 'name = "r1"\nkind = "router"\n'
        'links = [{ switch = "s0",')
    assert "topology.nodes.client.links.s0.host_id: 100 gives 10.9.0.100, already node r1's" in refused(text)


def test_a_default_host_id_that_does_not_fit_a_small_subnet_isrefused():
    message = refused(TINY.replace('"10.9.1.0/24"', '"10.9.1.0/29"'))
    assert "topology.nodes.server.links.s1.host_id: 100 (not given" in message and "10.9.1.0/29" in message


def test_the_layout_gets_the_addresses_the_spec_checked():
    layout = build_layout(parse_spec(TINY, "x.toml").topology, "cl1a2b3c")
    assert [i.addr4 for i in layout.nodes["client"].interfaces] == ["10.9.0.100"]
    assert [i.addr6 for i in layout.nodes["r1"].interfaces] == ["fd00:9::1", "fd00:9:0:1::1"]


@pytest.mark.parametrize("edit, field", [
    (("", "warmup_s = nan\n"), "warmup_s: nan is not a finite number"),
    (("", "gap_s = -inf\n"), "gap_s: -inf is not a finite number"),
    (("rate_bps = 20_000_000 }", "rate_bps = 20_000_000, delay_ms = inf }"),
     "topology.nodes.r1.links.s0.delay_ms: inf is not a finite number"),
    (('name = "client"\n', 'name = "client"\nsysctls = { "net.ipv4.tcp_rmem" = nan }\n'),
     "topology.nodes.client.sysctls.net.ipv4.tcp_rmem: nan is not a finite number"),
    (('requests = [{ client = "client", server = "apache" }]',
      'requests = [{ client = "client", server = "apache" }]\ntimeout_s = nan'),
     "workloads.get.timeout_s: nan is not a finite number"),
])
def test_non_finite_numbers_arerefused(edit, field):
    old, new = edit
    text = new + TINY if not old else TINY.replace(old, new)
    assert text != TINY
    assert field in refused(text)


def test_non_finite_numbers_in_free_tables_arerefused():
    knob = 'extends = "ipv6"\nname = "x"\n[set]\n"servers.lean.knobs.rto_alpha" = nan\n'
    assert "set.servers.lean.knobs.rto_alpha: nan is not a finite number" in refused(knob)
    axis = TINY + '[[experiments]]\nname = "main"\naxes = [{ name = "d", fields = ["warmup_s"], values = [1.0, nan] }]\n'
    assert "experiments.main.axes.d.values.1: nan is not a finite number" in refused(axis)


def test_extends_with_a_partial_table_hints_at_set():
    message = refused('extends = "ipv6"\nname = "x"\n[topology]\nunshaped_at_or_above_bps = 2_000_000_000\n')
    assert "topology.switches: Field required" in message
    assert 'under [set] as dotted field paths, e.g. "topology.unshaped_at_or_above_bps" = 2000000000' in message
    # the hint's advice works
    fixed = parse_spec('extends = "ipv6"\nname = "x"\n[set]\n"topology.unshaped_at_or_above_bps" = 2_000_000_000\n',
                       "x.toml")
    assert fixed.topology.unshaped_at_or_above_bps == 2_000_000_000


def test_a_missing_field_without_extends_gets_no_hint():
    message = refused(TINY[:TINY.index("[[workloads]]")])
    assert "workloads: Field required" in message and "[set]" not in message, message


def test_every_preset_and_example_spec_loads():
    for name in preset_names():
        load_preset(name)
    specs = [p for p in sorted((REPO_ROOT / "examples").glob("*.toml")) if "[[axes]]" not in p.read_text()]
    assert len(specs) >= 7, specs  # sensitivity-*.toml are axes files, not specs
    for path in specs:
        load_spec(path)


def test_cli_refuses_a_port_clash_in_one_line_exit_2(tmp_path):
    bad = tmp_path / "clash.toml"
    bad.write_text(TINY + '[[servers]]\nname = "nginx"\nkind = "nginx"\nnode = "server"\n')
    proc = dry_run(bad)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "servers.nginx.port" in lines[0] and not proc.stdout, proc.stderr


# --- a link too fast to shape: a warning, not an error ----------------------------------
FAST = TINY.replace("rate_bps = 20_000_000", "rate_bps = 1e17, queue_packets = 50")


def test_a_link_at_or_above_the_unshaped_rate_is_a_dry_run_warning(tmp_path):
    spec = tmp_path / "fast.toml"
    spec.write_text(FAST)
    proc = dry_run(spec)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("# warning:")]
    assert warnings == ["# warning: topology.nodes.r1.links.s0.rate_bps = 1e+17 is at or above "
                        "topology.unshaped_at_or_above_bps = 1e+09: the link runs unshaped at veth speed and its "
                        "queue_packets = 50 is not applied"], proc.stdout
    # the shaper is indeed left out of the plan
    assert "htb" not in proc.stdout


def test_a_shaped_link_gives_no_warning(tmp_path):
    spec = tmp_path / "ok.toml"
    spec.write_text(TINY)
    proc = dry_run(spec)
    assert proc.returncode == 0 and "# warning" not in proc.stdout and "htb" in proc.stdout, proc.stdout


def test_an_unshaped_link_is_a_failed_fidelity_check_in_the_manifest(tmp_path):
    from congestlab.runner import StudyRun

    runner = StudyRun(parse_spec(FAST, "fast.toml"), tmp_path)
    (check,) = [c for c in runner.checks if c.name == "link_shaped_r1_s0"]
    assert not check.ok and check.value == 10**17 and "topology.nodes.r1.links.s0.rate_bps" in check.message
    runner._fail("failed", "stopped by the test")  # what a run records, however it ends
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [c["name"] for c in manifest["fidelity"]["checks"]] == ["link_shaped_r1_s0"]
    # a cluster node's subset leaves the check to its driver (one copy in the manifest)
    node = StudyRun(parse_spec(FAST, "fast.toml"), tmp_path / "node", runs=[("main", 1)])
    assert node.checks == []
    assert StudyRun(parse_spec(TINY, "x.toml"), tmp_path / "ok").checks == []


def test_a_sweep_leaving_one_point_unshaped_names_that_point():
    text = TINY + ('[[experiments]]\nname = "main"\n'
                   'axes = [{ name = "r", fields = ["nodes.r1.links.s0.rate_bps"], values = [10_000_000, 2e9] }]\n')
    (link,) = unshaped_links(expand(parse_spec(text, "x.toml")))
    assert link.message.endswith("(points main.r-2e+09)"), link.message


def test_version_prints_the_package_version_and_git_revision():
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert proc.stdout.startswith(f"congestlab {metadata.version('congestlab')} (git {head.stdout.strip()}"), \
        proc.stdout
    assert len(proc.stdout.splitlines()) == 1


@pytest.mark.parametrize("name", ["round", "block", "family_pair", "previous_closed"])
def test_an_axis_named_like_a_column_the_run_writes_is_refused(name):
    spec = TINY.replace('[[workloads]]', f'[[experiments]]\nname = "e"\naxes = [{{ name = "{name}", '
                        'fields = ["workloads.get.timeout_s"], values = [10, 20] }]\n[[workloads]]')
    assert "reserved column name" in refused(spec)


def test_no_preset_axis_shares_a_name_with_the_run_design_columns():
    # cubic-compound's axis `pair` was once overwritten by the GET's own pair id in request.csv
    from congestlab.results import DESIGN_COLUMNS
    for name in preset_names():
        study = load_preset(name)
        axes = {a.name for e in study.experiments for a in e.axes}
        assert not axes & set(DESIGN_COLUMNS), (name, axes & set(DESIGN_COLUMNS))
