"""The tcp-lab and cc-share presets: expansion (full and quick), field paths, settings per
point, the new spec fields' errors, `--dry-run` (no root)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import resources

import pytest

from congestlab.errors import SpecError
from congestlab.spec import load_preset, preset_names
from congestlab.spec.loader import validate_spec
from congestlab.spec.sweep import expand, run_order

TCP_LAB = load_preset("tcp-lab")
FIGURES = ["window_receiver", "window_sender", "length_receiver", "length_sender", "rate", "delay", "loss_30s",
           "loss_60s", "bdp", "parallel", "udp1", "udp2"]
CHECKS = ["check_rtt", "check_loss", "check_fill"]


def _toml(name: str) -> dict:
    return tomllib.loads((resources.files("congestlab.spec.presets") / f"{name}.toml").read_text())


def _by_id(points):
    return {p.id: p for p in points}


def test_presets_listed():
    assert {"tcp-lab", "cc-share"} <= set(preset_names())


def test_tcp_lab_one_experiment_per_figure_each_with_axis_x():
    assert [e.name for e in TCP_LAB.experiments] == CHECKS + FIGURES
    for exp in TCP_LAB.experiments:
        assert [a.name for a in exp.axes] == ([] if exp.name in CHECKS else ["x"])


def test_tcp_lab_point_counts_full_and_quick():
    full, quick = expand(TCP_LAB), expand(TCP_LAB, quick=True)
    per_exp = {name: sum(1 for p in full if p.experiment == name) for name in FIGURES}
    assert per_exp == {"window_receiver": 9, "window_sender": 9, "length_receiver": 8, "length_sender": 8, "rate": 9,
                       "delay": 7, "loss_30s": 7, "loss_60s": 7, "bdp": 6, "parallel": 8, "udp1": 5, "udp2": 5}
    assert len(full) == 88 + 3 and len(quick) == 34 + 3
    assert all(p.repetitions == 1 for p in quick)
    assert len(run_order(quick, TCP_LAB.order)) == 37


def test_tcp_lab_settings_resolve_per_point():
    full = _by_id(expand(TCP_LAB))
    p = full["window_receiver.x-2000"].study.workload("iperf")
    assert (p.server_window_bytes, p.client_window_bytes, p.duration_s) == (2000, 10_000, 30)
    link = full["rate.x-10000000"].study.topology.node("r").links[1]
    assert (link.switch, link.rate_bps, link.queue_packets, link.tbf_rate_bps) == ("sb", 100_000_000, 1000, 10_000_000)
    assert (link.tbf_burst_bytes, link.tbf_latency_ms, link.impair_direction) == (5120, 50, "egress")
    d0, d20 = (full[f"delay.x-{x}"].study.topology.node("r").links[1] for x in (0, 20))
    assert (d0.delay_ms, d0.jitter_ms, d20.delay_ms, d20.jitter_ms) == (0, 0, 20, 10)  # jitter only with delay
    bdp = full["bdp.x-200000"].study
    assert bdp.workload("iperf").server_window_bytes == 200_000
    assert (bdp.topology.node("r").links[1].tbf_rate_bps, bdp.topology.node("r").links[1].delay_ms) == (200e6, 80)
    assert full["loss_30s.x-0_01"].study.topology.node("r").links[1].loss == 0.01
    assert full["loss_60s.x-0_01"].study.workload("iperf").duration_s == 60
    udp2 = full["udp2.x-3"].study.workload("iperf")
    assert (udp2.tcp_sessions, udp2.udp_sessions, udp2.udp_rate_bps, udp2.duration_s) == (3, 2, 1e6, 60)
    rtt = full["check_rtt"].study
    assert rtt.topology.node("r").links[1].impair_direction == "both"
    assert (rtt.workload("rtt").count, rtt.workload("rtt").expect_rtt_ms) == (300, 40)
    assert full["check_loss"].study.workload("loss").count == 10_000
    assert full["check_rtt"].workloads == ["rtt"] and full["rate.x-1000000"].workloads == ["iperf"]


def test_tcp_lab_quick_values_and_durations():
    quick = _by_id(expand(TCP_LAB, quick=True))
    assert sorted(k for k in quick if k.startswith("rate.")) == [
        "rate.x-10000000", "rate.x-150000000", "rate.x-50000000"]
    assert sorted(k for k in quick if k.startswith("udp1.")) == ["udp1.x-1", "udp1.x-2"]
    durations = {p.experiment: p.study.workload("iperf").duration_s for p in quick.values()}
    assert durations["loss_60s"] == 4 and durations["bdp"] == 4 and durations["rate"] == 2
    assert durations["loss_60s"] == 2 * durations["loss_30s"]  # the study's 30:60
    assert quick["check_rtt"].study.workload("rtt").count == 200
    assert quick["check_loss"].study.workload("loss").count == 5000
    assert quick["check_fill"].study.workload("fill").duration_s == 6


def test_tcp_lab_published_numbers_name_points():
    ids = {(p.experiment, p.labels.get("x")) for p in expand(TCP_LAB)}
    assert TCP_LAB.published
    for entry in TCP_LAB.published:
        assert (entry["experiment"], entry["x"]) in ids, entry
    parallel4 = next(e for e in TCP_LAB.published if e["experiment"] == "parallel" and e["x"] == "4")
    assert parallel4 == {"experiment": "parallel", "x": "4", "total_mbps": 94, "tcp_per_session_mbps": 23.5}


def test_cc_share_pairs_move_together():
    spec = load_preset("cc-share")
    points = expand(spec)
    assert [p.labels["pair"] for p in points] == ["cubic-compound", "compound-compound", "cubic-cubic"]
    flows = [[(f.client, f.cc) for f in p.study.workload("share").flows] for p in points]
    assert flows[0] == [("s1", "cubic"), ("s2", "compound")]
    assert flows[2] == [("s1", "cubic"), ("s2", "cubic")]
    link = spec.topology.node("r").links[1]
    assert (link.rate_bps, link.queue_packets) == (100_000_000, 100)
    assert expand(spec, quick=True)[0].study.workload("share").duration_s == 5


def test_cc_share_options_become_settings():
    from congestlab.cc.share import preset_with

    spec = preset_with(seconds=3, rate_bps=50_000_000, queue_packets=50, ack_delay_ms=20)
    link = spec.topology.node("r").links[1]
    assert spec.workload("share").duration_s == 3
    assert (link.rate_bps, link.queue_packets, link.delay_ms, link.impair_direction) == (50e6, 50, 20, "ingress")


@pytest.mark.parametrize("edit, where, problem", [
    (lambda d: d["quick"]["per_experiment"].update(nope={"axes": {"x": ["1"]}}), "quick", "unknown experiment 'nope'"),
    (lambda d: d["quick"]["per_experiment"]["rate"].update(axes={"x": ["7"]}), "quick", "unknown value '7'"),
    (lambda d: d["quick"]["per_experiment"]["rate"].update(axes={"y": ["7"]}), "quick", "unknown axis 'y'"),
    (lambda d: d["workloads"][0].update(flows=[{"cc": "cubic"}]), "workloads", "need version = 3"),
    (lambda d: d["workloads"][0].update(tcp_sessions=0, udp_sessions=0), "workloads", "no sessions"),
    (lambda d: d["workloads"][1].update(flood=True), "workloads", "flood ping"),
    (lambda d: d["workloads"][3].update(omit_s=20), "workloads", "leaves less than one"),
    (lambda d: d["workloads"][3].update(duration_s=1.5, omit_s=0), "workloads", "duration_s >= 2"),
])
def test_new_fields_are_spec_errors(edit, where, problem):
    data = _toml("tcp-lab")
    edit(data)
    with pytest.raises(SpecError, match=problem) as info:
        validate_spec(data, "t")
    assert where in str(info.value)


def test_iperf_flow_client_must_be_a_host():
    data = _toml("cc-share")
    data["workloads"][0]["flows"][1]["client"] = "r"
    with pytest.raises(SpecError, match=r"flows\[1\].client 'r' must be a host"):
        validate_spec(data, "t")


@pytest.mark.parametrize("name, points", [("tcp-lab", 37), ("cc-share", 3)])
def test_dry_run_prints_every_point(name, points):
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "reproduce", name, "--quick", "--dry-run"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("[point] ") == points
    assert "tc -n" in proc.stdout and "htb" in proc.stdout
