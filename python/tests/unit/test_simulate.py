"""`congestlab simulate`: the spec -> leansim scenario mapping, its refusals, and one short
simulated run measured by the pcap analysis (virtual time: no root, about a second)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from congestlab.errors import SpecError
from congestlab.paths import REPO_ROOT
from congestlab.simulate.sim_vs_emulation import compare_rows, conditions, failed_checks, to_markdown
from congestlab.simulate.mapping import sim_points
from congestlab.simulate.simrun import simulate
from congestlab.spec import load_spec
from congestlab.spec.loader import parse_spec

EXAMPLE = REPO_ROOT / "examples" / "lean-sim.toml"


def _spec(extra: str = "", link: str = "rate_bps = 100_000_000, queue_packets = 1000", knobs: str = "",
          server_kind: str = "lean", server_node: str = "bare", link2: str = ""):
    text = f"""
name = "simtest"
repetitions = 2
warmup_s = 0
[topology]
switches = [{{ name = "s0", subnet4 = "10.9.0.0/24", subnet6 = "fd00:9::/64" }},
            {{ name = "s1", subnet4 = "10.9.1.0/24", subnet6 = "fd00:9:0:1::/64" }}]
[[topology.nodes]]
name = "r1"
kind = "router"
links = [{{ switch = "s0", host_id = 1, {link} }}, {{ switch = "s1", host_id = 1{", " + link2 if link2 else ""} }}]
[[topology.nodes]]
name = "client"
links = [{{ switch = "s0", host_id = 10 }}]
[[topology.nodes]]
name = "bare"
links = [{{ switch = "s1", host_id = 11 }}]
stack = "user"
[[topology.nodes]]
name = "src"
links = [{{ switch = "s1", host_id = 20 }}]
[[topology.nodes]]
name = "snk"
links = [{{ switch = "s0", host_id = 20 }}]
[[servers]]
name = "web"
kind = "{server_kind}"
node = "{server_node}"
files_kib = [160]
{knobs}
[[workloads]]
name = "get"
kind = "get"
requests = [{{ client = "client", server = "web", file_kib = 160, families = ["v4", "v6"] }}]
{extra}
"""
    return parse_spec(text, "simtest.toml")


def test_example_maps_to_four_scenarios():
    points = sim_points(load_spec(EXAMPLE))
    assert [p.point_id for p in points] == ["noloss", "shallow", "loss", "udp50"]
    noloss, shallow, loss, udp50 = (p.scenario for p in points)
    assert noloss["data_link"] == {"rate_bps": 100_000_000, "queue_packets": 1000, "delay_ms": 0.0, "loss": 0.0}
    assert shallow["data_link"]["queue_packets"] == 64 and shallow["ack_link"]["queue_packets"] == 64
    # impair_direction = egress on R1's link toward the client's switch: the responses
    assert loss["data_link"]["loss"] == 0.01 and "loss" not in loss["ack_link"]
    assert noloss["gets"] == [{"family": "v4", "path": "/320KiB.bin"}, {"family": "v6", "path": "/320KiB.bin"}]
    assert noloss["gap_ms"] == 300.0 and noloss["background"] == [] and noloss["warmup_ms"] == 0
    assert udp50["background"] == [{"kind": "udp", "family": "v4", "frame_bytes": 1502,
                                    "rate_bps": pytest.approx(50e6 * 1502 / 1460)}]
    assert udp50["warmup_ms"] == 1000.0
    assert points[0].repetitions == 5 and points[0].gets == [("v4", 320), ("v6", 320)]


def test_ingress_impairment_and_both_directions():
    ingress = sim_points(_spec(link="rate_bps = 50_000_000, delay_ms = 5, loss = 0.02, impair_direction = 'ingress'"))
    s = ingress[0].scenario
    assert s["ack_link"] == {"rate_bps": 50_000_000, "queue_packets": 100, "delay_ms": 5.0, "loss": 0.02}
    assert s["data_link"] == {"rate_bps": 50_000_000, "queue_packets": 100}
    both = sim_points(_spec(link="rate_bps = 50_000_000, delay_ms = 5"))[0].scenario
    assert both["data_link"]["delay_ms"] == both["ack_link"]["delay_ms"] == 5.0


def test_knobs_become_leanweb_flags():
    spec = _spec(knobs='knobs = { profile = "modern", weight = "W5", sack = false, rto_min_ms = 300 }')
    assert sim_points(spec)[0].scenario["server_args"] == [
        "--profile", "modern", "--weight", "W5", "--sack", "off", "--rto-min-ms", "300"]


def test_background_udp_and_lean_fetches():
    mgen = """
[[workloads]]
name = "bg"
kind = "mgen"
pairs = [{ family = "v4", source = "src", sink = "snk" }]
rate_bps = 10_000_000
mix = { udp4 = 100 }
[[workloads]]
name = "load"
kind = "http_load"
client = "client"
server = "web"
file_kib = 160
fetches_per_s = 10
"""
    s = sim_points(_spec(mgen))[0].scenario
    udp, fetches = s["background"]
    # MGEN's rate is payload: 1460-byte datagrams become 1502-byte frames
    assert udp == {"kind": "udp", "family": "v4", "frame_bytes": 1502, "rate_bps": pytest.approx(10e6 * 1502 / 1460)}
    assert fetches["kind"] == "get" and fetches["interval_ms"] == 100.0 and fetches["path"] == "/160KiB.bin"


@pytest.mark.parametrize("spec_args, where", [
    ({"server_kind": "apache", "server_node": "src"}, "servers.web.kind"),
    ({"link": "rate_bps = 100_000_000, delay_ms = 5, jitter_ms = 2"}, "jitter is not simulated"),
    ({"link": "rate_bps = 100_000_000, tbf_rate_bps = 10_000_000"}, "tbf_rate_bps"),
    ({"extra": '[[workloads]]\nname = "ip"\nkind = "iperf"\nclient = "client"\nserver = "src"'}, "workloads.ip.kind"),
    ({"extra": '[[workloads]]\nname = "bg"\nkind = "mgen"\npairs = [{ family = "v4", source = "src", sink = "snk" }]'
               '\nrate_bps = 1e6'}, "workloads.bg.mix"),
    ({"extra": '[[workloads]]\nname = "ld"\nkind = "http_load"\nclient = "client"\nserver = "web"\nfile_kib = 160\nfetches_per_s = 5'
               '\nkeepalive = true'}, "workloads.ld.keepalive"),
])
def test_refuses_what_it_cannot_model(spec_args, where):
    with pytest.raises(SpecError) as err:
        sim_points(_spec(**spec_args))
    assert where in str(err.value) and "\n" not in str(err.value)


def test_refuses_two_bottlenecks():
    with pytest.raises(SpecError, match="2 shaped or impaired links"):
        sim_points(_spec(link2="rate_bps = 10_000_000"))


def test_refuses_an_impaired_link_off_the_gets_path():
    far = '[[topology.nodes]]\nname = "far"\nlinks = [{ switch = "s1", host_id = 30, delay_ms = 5 }]'
    with pytest.raises(SpecError, match="nodes.far.links.s1: the link is not on the path from the server's node "
                                        "'bare' to the client 'client'"):
        sim_points(_spec(far, link="queue_packets = 100"))


def test_cli_refusal_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(EXAMPLE.read_text().replace('impair_direction = "egress" }',
                                               'impair_direction = "egress", delay_ms = 5, jitter_ms = 1 }'))
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "simulate", str(bad), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "nodes.r1.links.s0.jitter_ms" in proc.stderr
    assert not (tmp_path / "o").exists(), "nothing written for a refused spec"


def test_simulated_run_is_measured_like_a_capture(tmp_path):
    points = sim_points(load_spec(EXAMPLE), quick=True)
    rows, outcomes = simulate(points, tmp_path, progress=lambda _: None)
    assert [(r["family"], r["ok"]) for r in rows] == [("v4", True), ("v6", True)]
    for row in rows:
        # 320 KiB at 100 Mbit/s in 1514-byte frames: 27.2 ms on the wire, plus the request's round trip
        assert 27.0 < row["delay_ms"] < 28.5 and row["retransmissions"] == 0
        assert 90 < row["goodput_mbps"] < 100
    assert outcomes[0]["data_link"]["dropped_queue"] == 0
    assert (tmp_path / "sim" / "results" / "request.csv").is_file()
    # against itself: every ratio is 1 (the retransmissions are 0 on both sides)
    as_strings = [{k: str(v) for k, v in r.items()} for r in rows]
    compared = compare_rows(as_strings, as_strings)
    assert {r["ratio"] for r in compared if r["metric"] != "retransmissions"} == {1.0}
    assert {r["ratio_best"] for r in compared if r["metric"] != "retransmissions"} == {1.0}
    assert "both 0" in to_markdown(compared, "self")


def test_conditions_and_failed_checks_of_the_emulation(tmp_path):
    emu = tmp_path / "emulation"
    for rep, drops in ((1, 3), (2, 5)):
        d = emu / "points" / "p" / f"r{rep}"
        d.mkdir(parents=True)
        (d / "rep.json").write_text(json.dumps({"bottleneck_drops": {"r1/eth0": drops, "s0/p-r1": 0},
                                                "cpu_busy_pct": 40.0 + rep}))
    (emu / "manifest.json").write_text(json.dumps({"fidelity": {"checks": [
        {"name": "a", "ok": True}, {"name": "b", "ok": False, "message": "bg achieved 7 of 50 Mbit/s"}]}}))
    link = {"dropped_queue": 2, "dropped_loss": 1, "offered": 100}
    outcomes = [{"point_id": "p", "data_link": link, "ack_link": dict(link, dropped_queue=0, dropped_loss=0)}]
    where = conditions(outcomes, emu)
    assert where == [{"point_id": "p", "sim_fifo_drops": 2, "sim_loss_drops": 1, "emulation_fifo_drops": 4,
                      "emulation_cpu_busy_pct": 41.5, "emulation_reps": 2}]
    failed = failed_checks(emu)
    assert failed == ["bg achieved 7 of 50 Mbit/s"]
    assert "- FAILED: bg achieved 7 of 50 Mbit/s" in to_markdown([], "t", where, failed)
    assert failed_checks(tmp_path / "missing") == ["no readable manifest.json"]


def test_axis_points_keep_their_own_files(tmp_path):
    axes = """
[[experiments]]
name = "sweep"
axes = [{ name = "queue", fields = ["nodes.r1.links.s0.queue_packets"], values = [10, 1000] }]
"""
    points = sim_points(_spec(axes))
    assert [p.point_id for p in points] == ["sweep.queue-10", "sweep.queue-1000"]
    rows, outcomes = simulate(points, tmp_path, repetitions=1, progress=lambda _: None)
    assert len({o["point_id"] for o in outcomes}) == 2 and all(r["ok"] for r in rows)
    assert sorted(p.name for p in (tmp_path / "sim").glob("*.pcap")) == ["sweep.queue-10-1.pcap",
                                                                          "sweep.queue-1000-1.pcap"]
    # the 10-packet FIFO overflows under the bare server's window, the 1000-packet one does not
    assert outcomes[0]["data_link"]["dropped_queue"] > 0 and outcomes[1]["data_link"]["dropped_queue"] == 0
