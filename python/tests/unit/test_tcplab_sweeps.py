"""The study's sweeps (seed 003, Figures 2-13), quick variants, expectations, report tables."""

from __future__ import annotations

import csv

import pytest

from congestlab.errors import SpecError
from congestlab.tcplab import sweeps
from congestlab.tcplab.report import PointSummary, read_results, sweep_table
from congestlab.tcplab.study import RESULT_FIELDS


def by_key(items):
    return {s.key: s for s in items}


def test_one_sweep_per_figure_2_to_13():
    full = sweeps.study_sweeps()
    assert [s.figure for s in full] == list(range(2, 14))
    assert len({s.key for s in full}) == 12


def test_study_durations_and_fixed_values():
    full = by_key(sweeps.study_sweeps())
    assert full["loss_30s"].duration_s == 30 and full["loss_60s"].duration_s == 60
    assert all(full[k].duration_s == 60 for k in ("parallel", "udp1", "udp2"))
    assert all(p.client_window_bytes == 10_000 for p in full["window_receiver"].points)
    assert all(p.server_window_bytes == 10_000 for p in full["window_sender"].points)
    assert all(p.client_length_bytes == 65536 for p in full["length_receiver"].points)
    assert all(p.network.tbf_rate_kbit == 200_000 and p.network.delay_ms == 80 and p.network.jitter_ms == 10
               for p in full["bdp"].points)
    assert max(p.x for p in full["bdp"].points) == 200_000  # "maximum window size was set to be 200 KB"
    assert [p.udp_sessions for p in full["udp2"].points] == [2] * len(full["udp2"].points)
    assert [p.tcp_sessions for p in full["parallel"].points][0] == 1
    delay = full["delay"].points
    assert delay[0].network.delay_ms == 0 and not delay[0].network.emulated  # the study's "no delay" point
    assert all(p.network.jitter_ms == 10 for p in delay[1:])
    assert all(not p.network.emulated for p in full["rate"].points)  # rate is the qdisc's job


def test_quick_is_a_short_subset():
    full, quick = by_key(sweeps.study_sweeps()), by_key(sweeps.quick_sweeps())
    assert quick.keys() == full.keys()
    for key, q in quick.items():
        assert 2 <= len(q.points) <= 3
        assert set(p.x for p in q.points) <= set(p.x for p in full[key].points)
        assert q.duration_s <= 4
    total_s = sum(q.duration_s * len(q.points) for q in quick.values())
    assert total_s < 120
    assert quick["loss_60s"].duration_s == 2 * quick["loss_30s"].duration_s


def test_select_names_unknown_tasks():
    assert [s.key for s in sweeps.select(sweeps.study_sweeps(), ["rate"])] == ["rate"]
    with pytest.raises(SpecError, match="unknown nope"):
        sweeps.select(sweeps.study_sweeps(), ["nope"])


def test_study_expectations():
    P = sweeps.Point
    assert sweeps.study_expectation("parallel", P(4, tcp_sessions=4)) == {"total": 94.0, "tcp_per_session": 23.5}
    assert sweeps.study_expectation("udp2", P(2, tcp_sessions=2, udp_sessions=2)) == {
        "total": 94.0, "udp_per_session": 1.0, "tcp_per_session": 46.0}
    assert sweeps.study_expectation("rate", P(50_000)) == {}
    assert sweeps.study_expectation("rate", P(150_000)) == {"total": 94.0}
    assert sweeps.study_expectation("window_receiver", P(2_000)) == {}
    assert sweeps.study_expectation("delay", P(0)) == {"total": 94.0}
    assert sweeps.window_limit_mbps(100_000, 80) == pytest.approx(10.0)


def test_results_csv_round_trip_and_table(tmp_path):
    path = tmp_path / "results.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, RESULT_FIELDS, restval="")
        w.writeheader()
        for session, (proto, mbps) in enumerate([("tcp", 46.0), ("tcp", 48.0), ("udp", 1.0)], 1):
            w.writerow({"sweep": "udp1", "figure": 12, "point": 0, "x": 2, "protocol": proto, "session": session,
                        "throughput_mbps": mbps, "bytes": int(mbps * 1e6 / 8 * 2), "tcp_sessions": 2, "udp_sessions": 1})
    points = read_results(path)["udp1"]
    assert len(points) == 1
    p = points[0]
    assert (p.tcp_total, p.tcp_mean, p.udp_mean, p.total) == (94.0, 47.0, 1.0, 95.0)
    table = sweep_table("udp1", points, "TCP sessions")
    assert table[2].split(" | ")[:3] == ["| 2", "94.00", "47.00"]
    assert "46.50" in table[2]  # the study's (94 - 1)/2 beside ours


def test_single_flow_table_shows_study_value():
    table = sweep_table("delay", [PointSummary(0, [93.1]), PointSummary(20, [60.0])], "delay (ms)")
    assert table[2] == "| 0 | 93.10 | 94.00 |"
    assert table[3] == "| 20 | 60.00 |  |"
