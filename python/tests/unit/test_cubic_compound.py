"""The cubic-compound preset (seed 002) without root: its expansion (points, units, quick),
its levels against the seed's, and the two computations its tables rest on, from hand-made
captures through the run analysis: every connection on a server's port (captured and NRT
throughput) and the load clients' shared bandwidth."""

from __future__ import annotations

import json

import pytest
from pcap_builder import ACK, MSS, Conversation, transfer_with_loss_and_reordering
from report_fixtures import RunBuilder

from congestlab.analysis.run_analysis import analyze_run
from congestlab.rundir import FORMAT_VERSION
from record_fixtures import get_row, tiny_stored_spec
from congestlab.report.claims import evaluate_claims
from congestlab.report.data import RunData
from congestlab.spec.report import validate_report
from congestlab.results import read_results
from congestlab.spec import load_preset
from congestlab.spec.sweep import expand, run_order


@pytest.fixture(scope="module")
def study():
    return load_preset("cubic-compound")


def test_full_study_is_30_points_of_3_repetitions_in_18_warm_ups(study):
    points = expand(study)
    runs = run_order(points, study.order, study.seed)
    experiments = ("same", "different", "competing", "four")
    assert [len([p for p in points if p.experiment == e]) for e in experiments] == [18, 6, 3, 3]
    assert len(runs) == 90 and {p.repetitions for p in points} == {3}
    # a unit = a pairing x level: its load runs across its file sizes and repetitions
    assert len({p.unit for p in points}) == 18
    assert points[0].study.warmup_s >= 60


def test_quick_is_504_kib_only_2_repetitions_and_a_shorter_warm_up(study):
    points = expand(study, quick=True)
    assert len(points) == 18 and len(run_order(points, study.order, study.seed)) == 36
    assert {p.labels.get("size_kib", "504") for p in points} == {"504"}
    assert {p.study.warmup_s for p in points} == {20.0}
    assert len([p for p in points if p.experiment == "four"]) == 3  # Tables 16-18 filled by --quick too


@pytest.mark.parametrize("level, udp, bt, stress", [("C1", 10, 40, 50), ("C2", 15, 60, 25), ("C3", 10, 30, 60)])
def test_levels_are_the_seeds_and_add_up_to_100_mbits(study, level, udp, bt, stress):
    point = next(p for p in expand(study) if p.labels.get("level") == level)
    s = point.study
    assert s.workload("udp").rate_bps == udp * 1e6 and s.workload("udp").mix == {"udp4": 100}
    assert (s.workload("bt").rate_mbps, s.workload("stress").rate_mbps) == (bt, stress)
    # 320 KiB per fetch: the fetch rate that offers the level's Mbit/s of body bytes
    assert s.workload("stress").fetch_rate_per_s() == pytest.approx(stress * 1e6 / (320 * 1024 * 8))
    assert udp + bt + stress == 100


def test_server_types_are_congestion_controls_and_competing_runs_both_servers(study):
    points = {p.id: p for p in expand(study)}
    ii = points["same.pair-IIS-IIS.level-C2.size_kib-160"]
    assert (ii.study.server("s1").cc, ii.study.server("bts").cc) == ("compound", "compound")
    ia = points["different.pair-IIS-Apache.level-C1.size_kib-504"]
    assert (ia.study.server("s1").cc, ia.study.server("bts").cc) == ("compound", "cubic")
    mixed = next(p for p in points.values() if p.labels.get("pair") == "S1 IIS, S2 Apache, BTS Apache")
    assert sorted(mixed.servers) == ["bts", "s1", "s2"]
    assert [mixed.study.server(n).cc for n in ("s1", "s2", "bts")] == ["compound", "cubic", "cubic"]
    assert [mixed.study.workload(n).rate_mbps for n in ("bt", "stress", "stress2")] == [30, 30, 30]
    for name in ("bt", "stress", "stress2"):
        assert mixed.study.workload(name).max_connections == 200


# --- the analysis of a hand-made repetition -----------------------------------------------
T0 = 1_700_000_000.0


def _stress_fetch_mid_stream(port: int) -> tuple[Conversation, int, int]:
    """A load fetch already running when the capture began (no handshake): four server
    segments, the second resent 200 ms later, client ACKs. Returns it, its captured bytes
    and the bytes of its one retransmission."""
    conv = Conversation("v4", client_port=port)
    mss = MSS["v4"]
    for i in range(4):
        conv.segment(T0 - 0.01 + i * 0.0003, False, 1 + i * mss, 101, ACK, mss)
    conv.segment(T0 - 0.008, True, 101, 1 + mss, ACK, 0)
    conv.segment(T0 + 0.19, False, 1 + mss, 101, ACK, mss, retransmission=True)
    conv.segment(T0 + 0.2, True, 101, 1 + 4 * mss, ACK, 0)
    resent = [f for f in conv.frames if f.retransmission]
    return conv, sum(len(f.data) for f in conv.frames), sum(len(f.data) for f in resent)


def _run_dir(tmp_path, conversations, records) -> object:
    run = tmp_path / "run"
    rep = run / "points" / "same.pair-Apache-Apache.level-C1.size_kib-504" / "r1"
    (rep / "pcap").mkdir(parents=True)
    merged = Conversation("v4")
    merged.frames = [f for c in conversations for f in c.frames]
    merged.write(rep / "pcap" / "s1.pcap")
    (rep / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (rep / "rep.json").write_text(json.dumps({"servers": {"s1": "i1"}}))
    manifest = {"axes": ["pair", "level", "size_kib"],
                "points": [{"id": rep.parent.name, "experiment": "same",
                            "axes": {"pair": "Apache-Apache", "level": "C1", "size_kib": "504"}}],
                "servers": {"s1": [{"instance": "i1", "port": 80}]}, "format_version": FORMAT_VERSION,
                "spec": tiny_stored_spec(server="s1", files_kib=(504,))}
    return run, manifest


def test_port_aggregate_counts_every_connection_both_ways_with_and_without_retransmissions(tmp_path):
    get, answers = transfer_with_loss_and_reordering("v4", t0=T0)
    stress, stress_bytes, stress_resent = _stress_fetch_mid_stream(40001)
    get_bytes = sum(len(f.data) for f in get.frames)
    get_resent = sum(len(f.data) for f in get.frames if f.retransmission)
    frames = get.frames + stress.frames
    first, last = min(f.ts for f in frames), max(f.ts for f in frames)
    # curl's own time: the capture's SYN to last ACK (the request follows the SYN by 3 ms) and a little
    raw = {"kind": "get_raw", "row": get_row(server="s1", file_kib=504, client_port=40000, start_ts=T0,
                                             end_ts=T0 + 0.3, time_total_s=(answers["delay_ms"] + 3.5) / 1e3)}
    load = {"kind": "load", "row": {"workload": "stress", "client": "stress", "server": "s1", "family": "v4",
                                    "file_kib": 320, "configured_mbps": 50.0, "achieved_mbps": 42.2,
                                    "shared_bandwidth_pct": 84.4, "fetches_skipped": 0}}
    run, manifest = _run_dir(tmp_path, [get, stress], [raw, load])
    analyze_run(run, manifest)

    port, = read_results(run, "port")
    assert (port["server"], port["pair"], port["level"], port["size_kib"]) == ("s1", "Apache-Apache", "C1", "504")
    assert int(port["connections"]) == 2 and int(port["retransmissions"]) == 2
    interval = last - first
    assert float(port["interval_s"]) == pytest.approx(interval, abs=1e-5)
    assert float(port["captured_throughput_mbps"]) == pytest.approx(
        (get_bytes + stress_bytes) * 8 / interval / 1e6, rel=1e-4)
    assert float(port["nrt_throughput_mbps"]) == pytest.approx(
        (get_bytes + stress_bytes - get_resent - stress_resent) * 8 / interval / 1e6, rel=1e-4)

    request, = read_results(run, "request")
    assert request["ok"] == "True"
    assert float(request["delay_ms"]) == pytest.approx(answers["delay_ms"], abs=0.01)
    # the request's own connection, not the port: fewer bytes than the port carried
    assert int(request["bytes_captured"]) < get_bytes + stress_bytes

    row, = read_results(run, "load")
    assert float(row["shared_bandwidth_pct"]) == pytest.approx(84.4) and row["level"] == "C1"


def test_claim_4_compares_the_share_gaps_of_the_like_pairs(study, tmp_path):
    """Claim 4 on hand-made load rows shaped like Table 2 (+-1 point of noise, 5 repetitions: at 3
    the engine's CI of one level still meets 0): the preset's
    share_gap_pts is |stress % - BT %| per repetition, and IIS-IIS's gap is below Apache-Apache's."""
    b = RunBuilder("cubic-compound", ["pair", "level", "size_kib"], study.report, study.published, experiment="same")
    table2 = {pair: {e["level"]: (e["stress_share_pct"], e["bt_share_pct"]) for e in study.published
                     if e.get("pair") == pair and "bt_share_pct" in e} for pair in ("IIS-IIS", "Apache-Apache")}
    gaps = {}
    for pair, levels in table2.items():
        for level, (stress, bt) in levels.items():
            for rep, noise in enumerate((-1.0, -0.5, 0.0, 0.5, 1.0), start=1):
                axes = {"pair": pair, "level": level, "size_kib": 504}
                b.add("load", axes, rep, workload="stress", shared_bandwidth_pct=stress + noise)
                b.add("load", axes, rep, workload="bt", shared_bandwidth_pct=bt - noise / 2)
                gaps.setdefault((pair, level), []).append(abs(stress + noise - (bt - noise / 2)))
    data = RunData(b.write(tmp_path / "run"))
    metric = data.report.metrics["share_gap_pts"]
    for (pair, level), want in gaps.items():
        got = sorted(data.samples(metric, {"experiment": "same", "pair": pair, "level": level}),
                     key=lambda x: x.repetition)
        assert [x.value for x in got] == pytest.approx(want)
    claim4 = next(c for c in evaluate_claims(data) if c.claim.id == "4")
    assert claim4.verdict == "holds", [(c.verdict, c.detail) for c in claim4.checks]
    assert len(claim4.checks) == 3  # one per level


def test_four_servers_load_s3_and_s4_and_send_the_gets_to_s1_and_s2(study):
    """Tables 16-18 (set-up inferred): the measured servers S1, S2 carry no stress; three
    30 Mbit/s loads go to S3 (= BTS), S4 and S5, and the captions' server types are swept."""
    four = {p.labels["pair"]: p for p in expand(study) if p.experiment == "four"}
    assert list(four) == ["S1, S2 Apache, S3, S4 IIS", "S1, S2 IIS, S3, S4 Apache", "S1, S3 Apache, S2, S4 IIS"]
    for label, types in zip(four, (("cubic", "cubic", "compound", "compound"), ("compound", "compound", "cubic", "cubic"),
                                   ("cubic", "compound", "cubic", "compound"))):
        point = four[label]
        s = point.study
        assert tuple(s.server(n).cc for n in ("s1", "s2", "bts", "s4")) == types
        assert sorted(point.servers) == ["bts", "s1", "s2", "s4", "s5"]
        loads = [s.workload(n) for n in point.workloads if s.workload(n).kind == "http_load"]
        assert sorted((w.server, w.rate_mbps) for w in loads) == [("bts", 30), ("s4", 30), ("s5", 30)]
        assert s.server("s5").cc == "cubic"
        assert {(r.client, r.server, r.file_kib) for r in s.workload("getpair").requests} == {
            ("client", "s1", 504), ("client2", "s2", 504)}
        assert s.workload("udp").rate_bps == 10e6


# --- the published values against each other ------------------------------------------------
def test_published_four_server_s1_s2_carry_only_their_get(study):
    """The inference behind experiment "four": in Tables 16-18, S1's and S2's throughput is
    one 504 KB file over its delay (72-88 % of it: the capture outlasts the GET a little)."""
    four = [e for e in study.published if "s4_captured_mbps" in e]
    assert len(four) == 3
    for e in four:
        for mbps, delay in (("s1_captured_mbps", "delay_s"), ("s2_captured_mbps", "s2_delay_s")):
            one_get_mbps = 504 * 1024 * 8 / e[delay] / 1e6
            assert 0.7 < e[mbps] / one_get_mbps < 0.9, (e["pair"], mbps)
        assert 35 < e["bts_captured_mbps"] < 38 and 35 < e["s4_captured_mbps"] < 38  # one 30 Mbit/s load each



RATES_MBPS = {"C1": (40, 50), "C2": (60, 25), "C3": (30, 60)}  # (BT, stress), seed 002 section 3.2


def test_published_shares_are_the_published_client_throughputs_over_the_rates(study):
    """Tables 2-4 (shares) follow from Tables 8-15 and 20/22/24 (client Mbit/s): Table 2 over
    the three sizes, Table 3 at 504 KB, Table 4 over 30 Mbit/s. The seed rounds or cuts to
    0.1, so each within 0.11 points."""
    pub = study.published
    shares = [e for e in pub if "stress_share_pct" in e and "level" in e]
    assert len(shares) == 12
    for e in shares:
        bt_rate, stress_rate = RATES_MBPS[e["level"]]
        rows = [r for r in pub if r.get("pair") == e["pair"] and r.get("level") == e["level"] and "stress_mbps" in r]
        assert len(rows) == (3 if e["pair"] in ("Apache-Apache", "IIS-IIS") else 1), e
        stress = sum(r["stress_mbps"] for r in rows) / len(rows) / stress_rate * 100
        bt = sum(r["bt_mbps"] for r in rows) / len(rows) / bt_rate * 100
        assert abs(stress - e["stress_share_pct"]) <= 0.11, (e, stress)
        assert abs(bt - e["bt_share_pct"]) <= 0.11, (e, bt)
    competing = [e for e in pub if "stress2_share_pct" in e]
    assert len(competing) == 3
    for e in competing:
        for mbps, pct in (("stress_mbps", "stress_share_pct"), ("stress2_mbps", "stress2_share_pct"),
                          ("bt_mbps", "bt_share_pct")):
            assert abs(e[mbps] / 30 * 100 - e[pct]) <= 0.11, (e, mbps)


def test_report_declaration_is_valid_for_the_report_engine(study):
    report = validate_report(study.report, ["pair", "level", "size_kib"], study.published)
    assert {t.id for t in report.tables} >= {"t2", "t3", "t4", "t8", "t13", "t14", "t15", "t19-21-23", "t20-22-24"}
    assert [c.id for c in report.claims] == ["1", "2", "3", "4", "5", "6", "7"]


@pytest.mark.parametrize("preset, quick", [("cubic-compound", True), ("cubic-compound", False),
                                           ("cubic-compound-seed-fit", True)])
def test_a_background_kept_across_units_is_bounded_by_every_run_that_keeps_it(preset, quick):
    """The MGEN UDP of 10 Mbit/s stays the same from the last `different` unit through the
    competing and four-server units while the HTTP loads change around it; the runner keeps
    it running, so its own end (MGEN's OFF, the loads' --seconds) must lie beyond all of
    those runs, not only its first unit's (with the seed-fit's 60 s warm-ups it ran out
    before the last unit)."""
    from congestlab.runner import StudyRun, run_bound_s
    from congestlab.spec.sweep import block_backgrounds

    runner = StudyRun(load_preset(preset), "/nonexistent", quick=quick)
    runs = runner.runs
    checked = 0
    for i, (point, rep) in enumerate(runs):
        before = block_backgrounds(runs[i - 1][0]) if i else {}
        for name, spec in block_backgrounds(point).items():
            if before.get(name) == spec:
                continue  # kept from the previous run, not started here
            end = next((j for j in range(i, len(runs)) if block_backgrounds(runs[j][0]).get(name) != spec), len(runs))
            assert runner.backgrounds.bound_s(point, rep) >= sum(run_bound_s(p) for p, _ in runs[i:end]), (name, point.id)
            checked += 1
    udp_starts = [p.id for i, (p, _) in enumerate(runs) if
                  block_backgrounds(p).get("udp") != (block_backgrounds(runs[i - 1][0]).get("udp") if i else None)]
    # the last start is in `different`, at the level its order ends with (the mirrored order of
    # the full run ends at C1, where it began; the quick's one pass at its last level), then kept
    # through the competing and four-server units
    last_level = [p.labels["level"] for p, _ in runs if p.experiment == "different"][-1]
    assert last_level == ("C3" if quick else "C1")
    assert udp_starts[-1].startswith("different.") and udp_starts[-1].split(".")[2] == f"level-{last_level}"
    assert checked > 18


def test_seed_fit_preset_is_cubic_compound_with_a_longer_warm_up_and_the_loads_cap_also_under_quick(study):
    fit = load_preset("cubic-compound-seed-fit")
    r1 = next(n for n in fit.topology.nodes if n.name == "r1")
    assert r1.links[0].queue_packets == 1000  # the preset's: 64 was farther from the seed
    loads = [w for w in fit.workloads if w.kind == "http_load"]
    assert len(loads) == 5 and {w.max_connections for w in loads} == {1000}
    assert {w.max_connections for w in study.workloads if w.kind == "http_load"} == {200}
    assert fit.report == study.report and fit.published == study.published  # both variants report the claims
    assert fit.name == "cubic-compound-seed-fit" and fit.levels == study.levels
    # the same points and repetitions; the seed-fit warm-up also in --quick, where the
    # preset's own [quick] shortens it to 20 s
    for quick in (False, True):
        assert [p.id for p in expand(fit, quick=quick)] == [p.id for p in expand(study, quick=quick)]
        assert {p.study.warmup_s for p in expand(fit, quick=quick)} == {120.0}
    assert {p.study.warmup_s for p in expand(study, quick=True)} == {20.0}
