"""The sensitivity sweep without root: configurations and their checks, the distance to the
published numbers, robustness across configurations, and the report from hand-made runs."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from congestlab import study
from congestlab.errors import RunDirError, SpecError
from congestlab.report.claims import FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURED
from congestlab.sensitivity.configurations import (apply_configuration, configurations, load_axes_file,
                                                   parse_axis_option)
from congestlab.sensitivity.distance import (DEPENDS, NEVER, ROBUST, CellDistance, best, by_metric, distance,
                                             robustness)
from congestlab.sensitivity.report import build_sensitivity_report
from congestlab.sensitivity import sweep_run
from congestlab.sensitivity.sweep_run import STATE, SensitivitySweep, run_sensitivity, sensitivity_sweep
from congestlab.spec import load_preset

from report_fixtures import delay_claim_run


# --- configurations -------------------------------------------------------------------------

def test_axis_option_parses_numbers_lists_and_words():
    assert parse_axis_option("nodes.r1.links.s0.queue_packets=1000,64").values == [1000, 64]
    axis = parse_axis_option('workloads.bg.reverse=[],["udp4","udp6"]')
    assert axis.name == "reverse" and axis.values == [[], ["udp4", "udp6"]]
    assert parse_axis_option("servers.lean.knobs.sampling=all,one").values == ["all", "one"]


def test_configurations_are_the_cartesian_product_with_stable_ids():
    axes = [parse_axis_option("nodes.r1.links.s0.queue_packets=1000,64"),
            parse_axis_option('workloads.bg.reverse=[],["udp4","udp6"]')]
    configs = configurations(axes)
    assert [c.id for c in configs] == ["queue_packets-1000.reverse-none", "queue_packets-1000.reverse-udp4+udp6",
                                       "queue_packets-64.reverse-none", "queue_packets-64.reverse-udp4+udp6"]
    assert configs[3].settings == {"nodes.r1.links.s0.queue_packets": 64, "workloads.bg.reverse": ["udp4", "udp6"]}


def test_configuration_is_applied_to_the_preset():
    study = load_preset("ipv6")
    config = configurations([parse_axis_option("nodes.r1.links.s0.queue_packets=64")])[0]
    applied = apply_configuration(study, config, "preset ipv6")
    r1 = next(n for n in applied.topology.nodes if n.name == "r1")
    assert r1.links[0].queue_packets == 64
    assert applied.published == study.published  # the report's published values stay


@pytest.mark.parametrize("option, says", [
    ("nodes.r1.links.s0.queue_pkts=1,2", "no field 'queue_pkts'"),
    ("nodes.r1.links.s0.queue_packets=0,64", "greater than or equal to 1"),
    ("workloads.bg.rate_bps=1", "the study's own axes or levels set this field"),
])
def test_bad_configuration_is_one_spec_error(option, says):
    study = load_preset("ipv6")
    config = configurations([parse_axis_option(option)])[0]
    with pytest.raises(SpecError, match=says):
        apply_configuration(study, config, "preset ipv6")


def test_bad_axis_text_and_file(tmp_path):
    with pytest.raises(SpecError, match="FIELD=V1,V2"):
        parse_axis_option("queue_packets")
    bad = tmp_path / "axes.toml"
    bad.write_text('[[axes]]\nname = "q"\nfields = ["a", "b"]\nvalues = [1, 2]\n')
    with pytest.raises(SpecError, match="each value must be a list of 2"):
        load_axes_file(bad)
    with pytest.raises(SpecError, match="two axes have this name"):
        configurations([parse_axis_option("a.x=1"), parse_axis_option("b.x=2")])


def test_example_axes_file_applies_to_ipv6():
    from congestlab.paths import REPO_ROOT

    axes = load_axes_file(REPO_ROOT / "examples" / "sensitivity-ipv6.toml")
    configs = configurations(axes)
    assert len(configs) == 8
    study = load_preset("ipv6")
    xp = next(c for c in configs if c.labels["sink_window"] == "xp")
    sink = next(n for n in apply_configuration(study, xp, "t").topology.nodes if n.name == "m4snk")
    assert sink.sysctls == {"net.ipv4.tcp_window_scaling": 0, "net.ipv4.tcp_rmem": "4096 65535 65535"}


def test_swept_field_wins_over_the_quick_section():
    # cubic-compound's [quick] sets warmup_s = 20: a swept warm-up must hold under --quick too
    from congestlab.spec.sweep import expand

    study = load_preset("cubic-compound")
    assert study.quick.set["warmup_s"] == 20.0
    config = configurations([parse_axis_option("warmup_s=60")])[0]
    applied = apply_configuration(study, config, "preset cubic-compound")
    assert {p.study.warmup_s for p in expand(applied, quick=True)} == {60.0}
    assert {p.study.warmup_s for p in expand(study, quick=True)} == {20.0}


@pytest.mark.parametrize("axes_file, count", [("sensitivity-ipv6-client.toml", 3), ("sensitivity-cubic-compound.toml", 4)])
def test_example_axes_files_of_the_client_windows_apply(axes_file, count):
    from congestlab.paths import REPO_ROOT

    configs = configurations(load_axes_file(REPO_ROOT / "examples" / axes_file))
    assert len(configs) == count
    study = load_preset("ipv6-seed-fit" if "ipv6" in axes_file else "cubic-compound")
    for config in configs:
        client = next(n for n in apply_configuration(study, config, "t").topology.nodes if n.name == "client")
        assert client.sysctls["net.ipv4.tcp_window_scaling"] in (0, 1)


def test_cli_rejects_a_bad_axis_before_anything_runs(tmp_path):
    out = tmp_path / "sens"
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "sensitivity", "ipv6", "--quick", "--out", str(out),
                           "--axis", "nodes.r1.links.s0.queue_pkts=1000,64"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "queue_pkts" in proc.stderr
    assert not out.exists()


# --- distance ------------------------------------------------------------------------------

def test_distance_median_worst_and_unmeasured():
    cells = [CellDistance("a", "delay_ms", 100, 100), CellDistance("b", "delay_ms", 100, 200),
             CellDistance("c", "delay_ms", 100, 50), CellDistance("d", "delay_ms", 100, 125),
             CellDistance("e", "delay_ms", 100, None)]
    d = distance(cells)
    assert d.measured == 4 and [c.cell for c in d.unmeasured] == ["e"]
    # |ln| = 0, ln2, ln2, ln1.25 -> median (ln1.25 + ln2) / 2, worst ln2 (over and under alike)
    assert d.median == pytest.approx((math.log(1.25) + math.log(2)) / 2)
    assert d.worst == pytest.approx(math.log(2))
    assert [c.cell for c in d.furthest(2)] == ["b", "c"]
    assert d.within() == 2  # a and d (ln 1.25 itself counts as within)


def test_distance_by_metric_keeps_the_delays_apart_from_the_throughputs():
    # near throughputs must not hide delays at a tenth of the seed's
    cells = [CellDistance(f"c{i}", "mbps", 50, 50) for i in range(5)] + [
        CellDistance("a", "delay_s", 20, 2), CellDistance("b", "delay_s", 20, 4), CellDistance("c", "delay_s", 20, None)]
    assert distance(cells).median == 0
    per = by_metric(cells)
    assert list(per) == ["mbps", "delay_s"] and per["mbps"].median == 0
    assert per["delay_s"].measured == 2 and len(per["delay_s"].unmeasured) == 1
    assert per["delay_s"].worst == pytest.approx(math.log(10))


def test_distance_of_nothing_measured():
    d = distance([CellDistance("a", "m", 10, None), CellDistance("b", "m", 10, 0.0)])
    assert d.median is None and d.measured == 0 and len(d.unmeasured) == 2


def test_best_prefers_complete_configurations():
    near_but_partial = distance([CellDistance("a", "m", 10, 10), CellDistance("b", "m", 10, None)])
    complete = distance([CellDistance("a", "m", 10, 12), CellDistance("b", "m", 10, 30)])
    worse = distance([CellDistance("a", "m", 10, 20), CellDistance("b", "m", 10, 40)])
    assert best({"partial": near_but_partial, "complete": complete, "worse": worse}) == "complete"
    assert best({}) is None


def test_robustness_categories():
    verdicts = {"c1": {"14": HOLDS, "15": HOLDS, "16": FAILS, "17": HOLDS},
                "c2": {"14": HOLDS, "15": FAILS, "16": INCONCLUSIVE, "17": NOT_MEASURED},
                "c3": {"14": HOLDS, "15": HOLDS, "16": FAILS}}
    by_claim = {r.claim: r for r in robustness(verdicts)}
    assert by_claim["14"].category == ROBUST
    assert by_claim["15"].category == DEPENDS and by_claim["15"].holds_in == ["c1", "c3"]
    assert by_claim["16"].category == NEVER
    # not measured in c2, absent in c3: not robust
    assert by_claim["17"].category == DEPENDS and by_claim["17"].verdicts["c3"] == NOT_MEASURED


# --- the report from hand-made runs ----------------------------------------------------------

def _config_run(parent, config_id, v4_ms, v6_ms):
    delay_claim_run(v4_ms, v6_ms).write(parent / "configs" / config_id)


def test_report_ranks_configurations_and_sorts_findings(tmp_path):
    axes = [parse_axis_option("nodes.r1.links.s0.queue_packets=1000,64")]
    configs = configurations(axes)
    sweep = SensitivitySweep("ipv6", True, axes, configs, {})
    state = sweep.state() | {"runs": {c.id: {"dir": f"configs/{c.id}", "status": "complete", "wall_s": 100.0,
                                            "load_avg_1m": 2.5} for c in configs}}
    (tmp_path / STATE).write_text(json.dumps(state))
    # 1000 packets (as the preset is written): 2x the seed's delays, v6 above v4 (holds);
    # 64: near the seed but v6 below v4 (does not hold)
    _config_run(tmp_path, configs[0].id, [200, 201, 199], [240, 241, 239])
    _config_run(tmp_path, configs[1].id, [110, 111, 109], [100, 101, 99])
    built = build_sensitivity_report(tmp_path)
    d1000, d64 = built.distances[configs[0].id], built.distances[configs[1].id]
    assert d1000.median == pytest.approx(math.log(2))
    assert d64.worst == pytest.approx(abs(math.log(100 / 120)))
    assert built.verdicts[configs[0].id]["v6slower"] == HOLDS
    assert built.verdicts[configs[1].id]["v6slower"] == FAILS
    md = built.markdown_path.read_text()
    lines = [line for line in md.splitlines() if line.startswith("| [queue_packets-")]
    assert lines[0].startswith("| [queue_packets-64]") and "nearest" in lines[0]
    assert "the preset as written" in lines[1]
    assert "**depends on the configuration**: v6slower (1/2)" in md
    assert "| v6slower | none | 1 | 0 |" in md  # its one check (server=apache) depends too
    assert (tmp_path / "plots" / "distance.svg").exists() and (tmp_path / "plots" / "verdicts.png").exists()
    assert "data:image/svg+xml;base64," in built.html_path.read_text()  # self-contained page


def test_report_lists_a_configuration_that_did_not_complete(tmp_path):
    axes = [parse_axis_option("nodes.r1.links.s0.queue_packets=1000,64")]
    configs = configurations(axes)
    state = SensitivitySweep("ipv6", True, axes, configs, {}).state() | {
        "runs": {configs[1].id: {"dir": f"configs/{configs[1].id}", "status": "failed", "error": "boom"}}}
    (tmp_path / STATE).write_text(json.dumps(state))
    _config_run(tmp_path, configs[1].id, [110, 111, 109], [130, 131, 129])
    built = build_sensitivity_report(tmp_path)
    assert list(built.distances) == [configs[1].id]
    assert "not run" in built.markdown_path.read_text()
    assert not built.warnings  # a configuration not yet run is no warning


def test_sweep_runs_each_configuration_records_it_and_keeps_complete_ones(tmp_path, monkeypatch):
    axes = [parse_axis_option("nodes.r1.links.s0.queue_packets=1000,64")]
    p = sensitivity_sweep("ipv6", axes, quick=True)
    ran, reported = [], []

    def fake_run_child(spec, run_dir, quick, calibrate, cluster, console, preset=None):
        ran.append(run_dir.name)
        if run_dir.name.endswith("-64") and len(ran) == 2:
            raise RunDirError("the testbed broke")  # recorded; the sweep goes on
        _config_run(run_dir.parent.parent, run_dir.name, [200, 201, 199], [240, 241, 239])
        return run_dir

    monkeypatch.setattr(study, "run_child", fake_run_child)  # study.run_children runs each
    monkeypatch.setattr(sweep_run, "print_report", lambda report, console: reported.append(report.markdown_path.parent.name))
    parent = run_sensitivity(p, tmp_path / "out", echo=lambda *_: None)
    assert ran == reported + [p.configs[1].id] == [c.id for c in p.configs]
    runs = json.loads((parent / STATE).read_text())["runs"]
    done, broke = runs[p.configs[0].id], runs[p.configs[1].id]
    # wall_s holds the run and its report; nothing of earlier attempts
    assert list(done) == ["dir", "load_avg_1m_start", "status", "wall_s", "load_avg_1m"]
    assert done["dir"] == f"configs/{p.configs[0].id}" and done["status"] == "complete"
    assert list(broke) == ["dir", "load_avg_1m_start", "status", "error", "wall_s", "load_avg_1m"]
    assert broke["status"] == "failed" and broke["error"] == "the testbed broke"
    # run again into the same parent: the complete one is kept, the failed one runs again
    ran.clear()
    run_sensitivity(p, parent, echo=lambda *_: None)
    assert ran == [p.configs[1].id]
    assert json.loads((parent / STATE).read_text())["runs"][p.configs[1].id]["status"] == "complete"


# --- a preset's variant: extends + set ------------------------------------------------------

def test_variant_sets_fields_of_the_preset_it_extends():
    from congestlab.spec.loader import parse_spec

    variant = parse_spec('extends = "ipv6"\nname = "ipv6-variant"\n[set]\n"nodes.r1.links.s0.queue_packets" = 64\n'
                         '"nodes.m4snk.sysctls.net.ipv4.tcp_rmem" = "4096 65535 65535"\n', "variant.toml")
    base = load_preset("ipv6")
    assert next(n for n in variant.topology.nodes if n.name == "r1").links[0].queue_packets == 64
    assert next(n for n in variant.topology.nodes if n.name == "m4snk").sysctls == {"net.ipv4.tcp_rmem": "4096 65535 65535"}
    assert variant.report == base.report and variant.published == base.published  # its claims stay declared


def test_variant_with_a_wrong_field_is_one_spec_error():
    from congestlab.spec.loader import parse_spec

    with pytest.raises(SpecError, match=r"variant.toml: set: nodes.r1.links.s0.queue: no field 'queue'"):
        parse_spec('extends = "ipv6"\n[set]\n"nodes.r1.links.s0.queue" = 64\n', "variant.toml")


def test_distance_command_of_one_run(tmp_path):
    _config_run(tmp_path, "one", [200, 200, 200], [120, 120, 120])  # v4 2x the seed's 100, v6 = 120
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "distance", str(tmp_path / "configs" / "one")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # |ln| = ln 2 and 0: median ln2 / 2 = 0.35, worst 0.69
    assert "median 0.35 (x1.41), worst 0.69 (x2.00), 1/2 cells within 25 %" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "distance", "--by-metric",
                           str(tmp_path / "configs" / "one")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "  delay_ms: ours/published median 1.50x (1.00-2.00x), |ln| median 0.35, 1/2 cells within 25 %" in proc.stdout


def test_ipv6_seed_fit_preset_is_ipv6_with_its_settings():
    fit, base = load_preset("ipv6-seed-fit"), load_preset("ipv6")
    assert next(n for n in fit.topology.nodes if n.name == "r1").links[0].queue_packets == 64
    assert fit.server("lean").knobs["send_window_segments"] == 4
    assert fit.server("lean").knobs["sampling"] == base.server("lean").knobs["sampling"]
    assert fit.report == base.report and fit.published == base.published  # both variants report the claims
    assert fit.name == "ipv6-seed-fit" and fit.levels == base.levels
