"""Specs: presets load; a wrong spec is one line naming the field, exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from congestlab.errors import SpecError
from congestlab.spec import load_preset, load_spec, preset_names
from congestlab.spec.loader import parse_spec
from congestlab.spec.sweep import expand

PRESET = load_preset("ipv6")


def test_ipv6_preset_is_table_one_plus_c0():
    assert "ipv6" in preset_names()
    levels = {lv.name: lv.set for lv in PRESET.levels}
    assert list(levels) == ["C0", "C1B", "C2B", "C3B", "C4B", "C5B", "C6B"]
    assert levels["C0"] == {"workloads.bg.rate_bps": 0}
    assert levels["C2B"]["workloads.bg.rate_bps"] == 75_000_000
    assert levels["C2B"]["workloads.bg.mix"] == {"tcp4": 22.5, "tcp6": 67.5, "udp4": 2.5, "udp6": 7.5}
    assert levels["C6B"]["workloads.bg.rate_bps"] == 100_000_000
    assert PRESET.repetitions == 10 and PRESET.quick.repetitions == 3
    (get,) = PRESET.workload("get").requests
    assert get.file_kib == 320 and get.families == ["v4", "v6"]
    assert PRESET.servers[0].files_kib == [160, 320, 504]
    points = expand(PRESET)
    assert len(points) == 3 * 7 and all(p.repetitions == 10 for p in points)
    c2b = next(p for p in points if p.id == "main.server-lean.level-C2B")
    # the three servers run side by side (one unit per level); the point's GET measures one
    assert c2b.servers == ["apache", "lean", "leanmodern"] and c2b.measured == ["lean"]
    assert c2b.study.workload("bg").class_rates_bps()["tcp6"] == 75e6 * 0.675
    # seed 000 section 4.1.4: the standard bare server samples one RTT per window
    assert c2b.study.server("lean").knobs["sampling"] == "one"


def _preset_text() -> str:
    from importlib import resources

    return (resources.files("congestlab.spec.presets") / "ipv6.toml").read_text()


LEAN_AXIS = '  { name = "server", fields = ["workloads.get.requests.0.server"], values = ["apache", "lean"] },'


@pytest.mark.parametrize(
    "edit, where, problem",
    [
        (("queue_packets = 1000", "queue_packets = -5"), "topology.nodes[0:r1].links[0].queue_packets",
         "greater than or equal to 1"),
        (("tcp4 = 45, tcp6 = 45, udp4 = 5, udp6 = 5 } }\n\n[[levels]]\nname = \"C2B\"",
          "tcp4 = 55, tcp6 = 45, udp4 = 5, udp6 = 5 } }\n\n[[levels]]\nname = \"C2B\""),
         "experiments.main server=apache level=C1B", "workloads[0:bg].mgen: mix percentages add up to 110, not 100"),
        (('switch = "s4", host_id = 10', 'switch = "s9", host_id = 10'), "topology", "unknown switch 's9'"),
        (('cc = "cubic"\nfiles_kib', 'cc = "vegas"\nfiles_kib'), "servers[0:apache].cc", "Input should be"),
        (("file_kib = 320", "file_kib = 321"), "", "does not serve 321 KiB"),
        (('kind = "lean"\nnode = "bare"', 'kind = "lean"\nnode = "server"'), "",
         "a lean server needs node 'server' with stack = \"user\""),
        (('kind = "lean"\nnode = "bare"', 'kind = "lean"\ncc = "cubic"\nnode = "bare"'), "servers[1:lean]",
         "set knobs.cc"),
        (('kind = "apache"', 'kind = "apache"\nknobs = { weight = "W2" }'), "servers[0:apache]",
         "not for kind 'apache'"),
        (('knobs = { weight = "W1"', 'knobs = { wieght = "W1"'), "servers[1:lean]", "unknown lean knob 'wieght'"),
        (('host_id = 11 }]\nstack = "user"', 'host_id = 11 }]\nstack = "kernel"'), "",
         "a lean server needs node 'bare' with stack = \"user\""),
        # the new fields: workloads, axes, levels, experiments, quick, sysctls, tbf
        (('kind = "mgen"', 'kind = "mgen"\nrate_bpz = 1'), "workloads[0:bg].mgen.rate_bpz", "Extra inputs"),
        (('kind = "mgen"', 'kind = "carrier-pigeon"'), "workloads[0:bg]", "does not match any of the expected tags"),
        (('kind = "mgen"', 'kind = "mgen"\nreverse = ["udp5"]'), "workloads[0:bg].mgen", "unknown MGEN class 'udp5'"),
        (('source = "m4src"', 'source = "m9src"'), "", "workloads.bg.pairs source names unknown node 'm9src'"),
        (('client = "client", server = "apache"', 'client = "client", server = "iis"'), "",
         "workloads.get.requests[0].server names unknown server 'iis'"),
        (("requests.0.server", "requests.0.sever"), "experiments.main server=apache",
         "no field 'sever' here"),
        (('values = ["apache", "lean", "leanmodern"]', 'values = ["apache", "nginx"]'), "experiments.main server=nginx",
         "unknown server 'nginx'"),
        (('values = ["apache", "lean", "leanmodern"]', 'values = ["apache", "apache"]'), "experiments[0:main].axes[0:server]",
         "labels must be unique"),
        (('"C5B", "C6B"]', '"C5B", "C7B"]'), "", "unknown level 'C7B'"),
        (('{ name = "level", levels', '{ name = "level", fields = ["warmup_s"], levels'), "experiments[0:main]",
         "give either fields + values or levels"),
        (('values = ["apache", "lean", "leanmodern"]', 'values = [["apache", 1], ["lean"]]'), "experiments.main server=apache+1",
         "requests[0].server: Input should be a valid string"),
        (("[quick]\nrepetitions = 3", "[quick]\nrepetitions = 3\naxes = { level = [\"C9\"] }"), "",
         "quick.axes.level: unknown value 'C9'"),
        (("[quick]\nrepetitions = 3", "[quick]\nrepetitions = 3\nexperiments = [\"nope\"]"), "",
         "quick.experiments names unknown experiment 'nope'"),
        (('name = "main"\naxes', 'name = "main"\nworkloads = ["bg", "gett"]\naxes'), "",
         "experiments.main.workloads names unknown workload 'gett'"),
        (('name = "client"\nlinks', 'name = "client"\nsysctls = { "kernel.panic" = 1 }\nlinks'),
         "topology.nodes[4:client].sysctls", "only per-namespace"),
        (("queue_packets = 1000 }", "queue_packets = 1000, tbf_rate_bps = 50_000_000 }"), "", ""),  # valid
        (("{ switch = \"s1\", host_id = 1 }", "{ switch = \"s1\", host_id = 1, tbf_rate_bps = 5 }"),
         "topology.nodes[0:r1].links[1]", "tbf_rate_bps needs rate_bps"),
    ],
)
def test_wrong_spec_names_field_and_problem(edit, where, problem):
    text = _preset_text().replace(*edit, 1)
    assert text != _preset_text(), "the edit must apply"
    if not problem and not where:
        parse_spec(text, "x.toml")  # the edit is valid
        return
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
    assert sum(line.startswith("[namespaces] ip netns add") for line in out) == 17  # r1-r4, client, server, bare, modern, 4 MGEN hosts, 5 switches


# --- variants: extends + [set] ---------------------------------------------------------------

def _warmups(study, quick):
    return {p.study.warmup_s for p in expand(study, quick=quick)}


def test_a_variants_set_wins_over_the_quick_section_it_inherits():
    # cubic-compound's [quick] sets warmup_s = 20; a variant's warm-up must hold under --quick too
    variant = parse_spec('extends = "cubic-compound"\nname = "v"\n[set]\nwarmup_s = 60\n', "v.toml")
    assert _warmups(variant, quick=False) == _warmups(variant, quick=True) == {60.0}
    assert _warmups(load_preset("cubic-compound"), quick=True) == {20.0}
    # a per-experiment quick setting (tcp-lab's check_rtt count = 200) yields the same way
    variant = parse_spec('extends = "tcp-lab"\nname = "v"\n[set]\n"workloads.rtt.count" = 50\n', "v.toml")
    rtt = [p for p in expand(variant, quick=True) if p.experiment == "check_rtt"]
    assert rtt and {p.study.workload("rtt").count for p in rtt} == {50}


def test_a_quick_section_written_in_the_variant_itself_stands():
    text = 'extends = "cubic-compound"\nname = "v"\n[set]\nwarmup_s = 60\n[quick]\nset = { warmup_s = 30 }\n'
    variant = parse_spec(text, "v.toml")
    assert _warmups(variant, quick=False) == {60.0} and _warmups(variant, quick=True) == {30.0}


def test_a_file_may_extend_a_preset_that_extends_another():
    # ipv6-seed-fit = ipv6 + [set]; a variant of it keeps those settings and adds its own
    text = 'extends = "ipv6-seed-fit"\nname = "v"\nrepetitions = 4\n[set]\n"workloads.get.timeout_s" = 12\n'
    variant, fit = parse_spec(text, "v.toml"), load_preset("ipv6-seed-fit")
    r1 = next(n for n in variant.topology.nodes if n.name == "r1")
    assert r1.links[0].queue_packets == 64 and variant.server("lean").knobs["send_window_segments"] == 4
    assert variant.workload("get").timeout_s == 12 and variant.repetitions == 4
    assert variant.report == fit.report and variant.published == fit.published
    assert [p.id for p in expand(variant, quick=True)] == [p.id for p in expand(fit, quick=True)]


def test_a_variant_of_a_variant_with_a_wrong_field_names_the_file():
    with pytest.raises(SpecError, match=r"^v.toml: set: nodes.r1.links.s0.queue: no field 'queue'"):
        parse_spec('extends = "ipv6-seed-fit"\nname = "v"\n[set]\n"nodes.r1.links.s0.queue" = 64\n', "v.toml")
