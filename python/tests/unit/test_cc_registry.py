"""congestlab.cc without root: name checks, spec mapping, parsing of bpftool output."""

from __future__ import annotations

import json
import subprocess

import pytest

from congestlab.cc import registry, share
from congestlab.errors import SpecError, ToolError


def test_available_lists_builtin_kernel_algorithms():
    names = registry.available()
    assert "reno" in names and len(names) == len(set(names))


def test_ensure_maps_builtins_to_themselves():
    assert registry.ensure("reno") == "reno"
    if "cubic" in registry.available():
        assert registry.ensure("cubic") == "cubic"


@pytest.mark.parametrize("bad", ["vegas", "Compound", "", "compound "])
def test_ensure_rejects_unknown_spec_values(bad):
    with pytest.raises(SpecError) as err:
        registry.ensure(bad)
    assert err.value.exit_code == 2 and "cc" in str(err.value)


def test_install_only_knows_compound():
    with pytest.raises(SpecError):
        registry.install("cubic")


@pytest.mark.parametrize("bad", ["a" * 13, "1abc", "ab-c", "AB", "x y"])
def test_kernel_names_are_checked(bad):
    with pytest.raises(SpecError):
        registry.install("compound", kernel_name=bad)


def test_builtins_cannot_be_removed():
    with pytest.raises(SpecError):
        registry.remove("cubic")


def test_default_objects_live_in_bpf_build():
    assert registry.default_object("compound").name == "ctcp.bpf.o"
    assert registry.default_object("ct1234").name == "ctcp_ct1234.bpf.o"
    assert registry.default_object("compound").parent == registry.BPF_BUILD_DIR


def test_install_without_object_names_the_fix(tmp_path):
    with pytest.raises(registry.CcError, match="make"):
        registry.install("compound", kernel_name="ctnone1", object_path=tmp_path / "missing.o")


def test_flow_stats_parses_bpftool_json(monkeypatch):
    dump = [{"key": {"local_port": 40000, "remote_port": 5201},
             "value": {"win": 10, "dwnd": 3, "rounds": 7}},
            {"formatted": {"key": {"local_port": 1, "remote_port": 2}, "value": {"win": 4}}}]

    def fake_run(argv, **_):
        assert argv[-1] == "ct9_st"
        return subprocess.CompletedProcess(argv, 0, json.dumps(dump), "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    flows = registry.flow_stats("ct9")
    assert flows[0] == {"local_port": 40000, "remote_port": 5201, "win": 10, "dwnd": 3, "rounds": 7}
    assert flows[1]["win"] == 4


def test_share_table_percentages():
    rows = [share.FlowShare("a vs b", 1, 1, "cubic", "cubic", 60e6, 3, 60.0, 120.0),
            share.FlowShare("a vs b", 1, 2, "compound", "compound", 40e6, 5, 40.0, 80.0)]
    table = share.markdown_table(rows)
    assert "| a vs b | 1 | 1 | cubic | cubic | 60.0 | 60.0 | 120.0 | 3 |" in table
    assert table.count("\n") == 3


def test_shares_from_a_cc_share_run_directory(tmp_path):
    """results/iperf.csv of the cc-share preset -> each flow's share of the pair and of fair, fair
    being half of the point's own bottleneck (a swept rate counts: 50 Mbit/s at the second point)."""
    from congestlab.results import write_results
    from congestlab.rundir import FORMAT_VERSION, write_manifest
    from congestlab.spec import load_preset

    spec = load_preset("cc-share")
    points = [{"id": "pairs.pair-cubic-compound", "experiment": "pairs", "axes": {"pair": "cubic-compound"}},
              {"id": "pairs.pair-slow", "experiment": "pairs", "axes": {"pair": "slow"},
               "settings": {"topology.nodes.r.links.sr.rate_bps": 50_000_000}}]
    write_manifest(tmp_path, {"format_version": FORMAT_VERSION, "study": "cc-share", "status": "complete",
                              "spec": spec.model_dump(mode="json"), "points": points, "axes": ["pair"]})
    rows = []
    for point in points:
        common = {"point_id": point["id"], "experiment": "pairs", "pair": point["axes"]["pair"],
                  "repetition": 1, "workload": "share", "version": 3, "server": "c", "protocol": "tcp"}
        rows += [common | {"session": 1, "client": "s1", "cc": "cubic", "cc_kernel": "cubic", "throughput_mbps": 60.0,
                           "retransmits": 30},
                 common | {"session": 2, "client": "s2", "cc": "compound", "cc_kernel": "compound",
                           "throughput_mbps": 35.0, "retransmits": 12}]
    write_results(tmp_path, "iperf", ["pair"], rows)
    rows = share.shares(tmp_path)
    assert [(r.pair, r.flow, r.cc, r.kernel_cc) for r in rows[:2]] == [
        ("cubic vs compound", 1, "cubic", "cubic"), ("cubic vs compound", 2, "compound", "compound")]
    assert rows[0].share_of_total_pct == pytest.approx(100 * 60 / 95)
    assert rows[3].pct_of_fair_share == pytest.approx(140.0)  # 35 of 50/2 Mbit/s
    assert rows[1].pct_of_fair_share == pytest.approx(70.0)  # 35 of 100/2 Mbit/s


def test_a_struct_ops_unregistered_but_still_held_counts_as_removed(monkeypatch):
    """After an unregister the map stays listed while sockets hold it (bpftool answers
    EINPROGRESS to another): removing it again is done, not an error, and runs no bpftool."""
    monkeypatch.setattr(registry, "struct_ops_id", lambda name: 436)
    monkeypatch.setattr(registry, "available", lambda: ["reno", "cubic"])
    monkeypatch.setattr(registry, "_run", lambda argv: pytest.fail(f"ran {argv}"))
    assert registry.pending_free("st195278") and registry.remove("st195278") is True


def test_a_failed_unregister_of_a_registered_struct_ops_is_an_error(monkeypatch):
    monkeypatch.setattr(registry, "struct_ops_id", lambda name: 436)
    monkeypatch.setattr(registry, "available", lambda: ["reno", "cubic", "st195278"])
    monkeypatch.setattr(registry, "_require_root", lambda what: None)
    monkeypatch.setattr(registry, "_run", lambda argv: subprocess.CompletedProcess(argv, 255, "", "Error: busy"))
    assert not registry.pending_free("st195278")
    with pytest.raises(ToolError):
        registry.remove("st195278")
