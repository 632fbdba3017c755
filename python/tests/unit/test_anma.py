"""The anma preset (seed 004) without root: its points full and --quick, the records its
runner makes from dualbench's JSON, and the report built from results/anma.csv alone."""

from __future__ import annotations

import json

import pytest

from congestlab.bench.results import parse_report
from congestlab.results import KIND_COLUMNS, write_results
from congestlab.rundir import FORMAT_VERSION, write_manifest
from congestlab.spec import load_preset
from congestlab.spec.sweep import expand, longest_streaks, run_order
from congestlab.workloads import runner_for
from congestlab.workloads.anma import AnmaRunner, address_lines, anma_row

PRESET = load_preset("anma")
LABELS = ["A", "B", "C", "D", "E"]


def test_full_points_are_both_servers_times_patterns_a_to_e():
    points = expand(PRESET)
    assert [p.id for p in points] == [f"main.server-{s}.pattern-{p}" for s in ("apache", "lean") for p in LABELS]
    for point in points:
        anma = point.study.workload("anma")
        assert (anma.requests, anma.concurrency, anma.file_kib, anma.timeout_s) == (10_000, 1_000, 4, 5.0)
        # the server axis picks which server the workload targets (measured, captured); both
        # servers run side by side through the unit (spec/sweep.py)
        assert point.measured == [anma.server] == [point.labels["server"]]
        assert sorted(point.servers) == ["apache", "lean"]
        assert point.repetitions == 3
    ratios = {p.labels["pattern"]: (p.study.workload("anma").v6, p.study.workload("anma").v4) for p in points}
    assert ratios == {name: (v6, v4) for name, v6, v4 in PATTERNS}
    # one unit: both servers' patterns interleave, never one server twice in a row
    assert {p.unit for p in points} == {0}
    runs = run_order(points, PRESET.order, PRESET.seed)
    assert len(runs) == 30 and longest_streaks(runs)["server"] <= 2


def test_quick_points_are_a_tenth_of_the_load():
    points = expand(PRESET, quick=True)
    assert len(points) == 10 and all(p.repetitions == 2 for p in points)
    assert {(p.study.workload("anma").requests, p.study.workload("anma").concurrency) for p in points} == {(1000, 100)}


def test_preset_servers_and_client_sysctls():
    lean = PRESET.server("lean")
    assert (lean.knobs["max_connections"], lean.knobs["max_half_open"]) == (8192, 2048)
    assert PRESET.server("apache").cc == "cubic" and PRESET.server("apache").files_kib == [4]
    client = PRESET.topology.node("client")
    assert client.sysctls == {"net.ipv4.ip_local_port_range": "1024 65000", "net.ipv4.tcp_tw_reuse": 1}
    assert not [n for n in PRESET.topology.nodes if n.name.startswith("m")]  # no MGEN hosts
    assert runner_for(PRESET.workload("anma")) is AnmaRunner


def test_address_list_in_the_pattern_ratio():
    assert address_lines("fd00::1", "10.0.0.1", 4, 1) == ["fd00::1"] * 4 + ["10.0.0.1"]
    assert address_lines("fd00::1", "10.0.0.1", 0, 1) == ["10.0.0.1"]


def test_time_bound_covers_every_round():
    anma = PRESET.workload("anma")
    assert AnmaRunner.time_bound_s(anma, PRESET) == 10 * 5.0 * 2 + 60


def summary(avg: float, count: int) -> dict:
    return {"count": count, "avg": avg, "p50": avg * 0.5, "p90": avg * 1.5, "p99": avg * 2, "max": avg * 3}


def family(requests: int, normal: int, reset: int = 0, est_us: float = 30.0, cont_ms: float = 2.0) -> dict:
    return {"requests": requests, "normal": normal, "reset": reset, "timeout": requests - normal - reset,
            "refused": 0, "other": 0, "other_kinds": {}, "connect_us": summary(est_us, requests),
            "continuation_ms": summary(cont_ms, normal), "latency_ms": summary(cont_ms, normal),
            "body_bytes": normal * 4096, "throughput_mbps": 1.0}


def anma_doc(n6: int, n4: int, reset6: int = 0) -> dict:
    return {"tool": "dualbench", "version": "0.1.0", "format_version": 1, "mode": "anma", "config": {},
            "wall_s": 1.5, "families": {"v6": family(n6, n6 - reset6, reset6, 40.0, 2.7),
                                        "v4": family(n4, n4, 0, 20.0, 1.9),
                                        "all": family(n6 + n4, n6 + n4 - reset6, reset6)}}


def test_anma_rows_have_the_results_columns():
    rep = parse_report(json.dumps(anma_doc(800, 0, reset6=5)))
    row = anma_row("anma", "apache", "v6", rep.family("v6"))
    assert list(row) == KIND_COLUMNS["anma"]
    assert (row["requests"], row["normal"], row["reset"]) == (800, 795, 5)
    assert row["connect_mean_ms"] == pytest.approx(0.04) and row["continuation_p90_ms"] == pytest.approx(4.05)
    empty = anma_row("anma", "apache", "v4", rep.family("v4"))  # pattern D: no IPv4 request
    assert empty["requests"] == 0 and empty["connect_mean_ms"] is None and empty["continuation_mean_ms"] is None


# the seed's patterns: name, IPv6 share, IPv4 share
PATTERNS = [("A", 1, 1), ("B", 4, 1), ("C", 1, 4), ("D", 1, 0), ("E", 0, 1)]


def _stored_run(tmp_path, repetitions: int = 1):
    """A run directory of the quick preset as the runner and analysis would leave it."""
    points = expand(PRESET, quick=True)
    manifest = {"format_version": FORMAT_VERSION, "study": "anma", "status": "complete", "spec": PRESET.model_dump(mode="json"),
                "axes": ["server", "pattern"], "points": [p.describe() for p in points],
                "servers": {"apache": [{"version": "Apache/2.4"}], "lean": [{"version": "leanweb 0.1"}]},
                "fidelity": {"warnings": []}}
    write_manifest(tmp_path, manifest)
    rows = []
    for point in points:
        anma = point.study.workload("anma")
        n6 = 1000 * anma.v6 // (anma.v6 + anma.v4)
        rep = parse_report(json.dumps(anma_doc(n6, 1000 - n6)))
        for r in range(1, repetitions + 1):
            for fam in ("v6", "v4", "all"):
                row = anma_row("anma", anma.server, fam, rep.family(fam))
                if r == 2 and row["normal"]:
                    row["normal"] -= 1  # a spread between repetitions (a family without requests has none)
                rows.append({"point_id": point.id, "experiment": "main", "repetition": r} | point.labels | row)
    write_results(tmp_path, "anma", ["server", "pattern"], rows)
    return tmp_path


def test_report_from_results_alone(tmp_path):
    """The one report engine renders the preset's declared anma tables from results/anma.csv."""
    from congestlab.report import build_report

    report = build_report(_stored_run(tmp_path, repetitions=2))
    text = report.markdown_path.read_text()
    assert "| A |" in text and "| E |" in text
    assert report.html_path.exists() and report.plots
