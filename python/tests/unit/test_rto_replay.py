"""The offline RTO replay (analysis/rto_replay.py) against hand-computed sequences: the
estimator and Table 5, each sampling mode with Karn's rule and a go-back-N timeout in the
middle, both sources (log, pcap), every Table 6 column, both readings of Tables 34-35, and
bad input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from pcap_builder import Conversation

from congestlab.analysis.packets import ACK, SYN
from congestlab.analysis.rto_estimator import WEIGHTS, Estimator, RtoSettings, Sampler
from congestlab.analysis.rto_replay import (BIN_COLUMNS, Sample, avoid_pct, replay_run, replay_stream, sample_stream,
                                            table6_bins)
from congestlab.analysis.rto_streams import ConnStream, pcap_streams, read_lean_log
from congestlab.errors import LeanLogError, RunDirError
from congestlab.rundir import FORMAT_VERSION
from congestlab.stored import StoredRun
from record_fixtures import tiny_stored_spec

REPO = Path(__file__).resolve().parents[3]
W1 = RtoSettings(alpha=1 / 8, beta=1 / 4)
NO_FLOOR = RtoSettings(alpha=1 / 8, beta=1 / 4, min_us=0)


def test_table5_is_the_one_in_rto_rs():
    """One table in two languages: the Python copy must equal Weight::alpha_beta."""
    source = (REPO / "crates/leantcp/src/rto.rs").read_text()
    arms = re.findall(r"Weight::(W\d) => \((\d+)\.0 / (\d+)\.0, (\d+)\.0 / (\d+)\.0\)", source)
    in_rust = {w: (Fraction(int(a), int(b)), Fraction(int(c), int(d))) for w, a, b, c, d in arms}
    assert len(in_rust) == 9
    assert in_rust == WEIGHTS


@pytest.mark.parametrize(("weight", "srtt_ms", "rttvar_ms", "rto_ms"), [
    ("W1", 112.5, 62.5, 362.5), ("W2", 112.5, 68.75, 387.5), ("W3", 112.5, 56.25, 337.5),
    ("W4", 118.75, 62.5, 368.75), ("W5", 118.75, 68.75, 393.75), ("W6", 118.75, 56.25, 343.75),
    ("W7", 106.25, 62.5, 356.25), ("W8", 106.25, 68.75, 381.25), ("W9", 106.25, 56.25, 331.25)])
def test_estimator_matches_rto_rs_hand_computed_vector(weight, srtt_ms, rttvar_ms, rto_ms):
    """rto.rs's every_weight_matches_hand_computed_vector: 100 ms then 200 ms, no floor."""
    alpha, beta = WEIGHTS[weight]
    est = Estimator(RtoSettings(alpha=float(alpha), beta=float(beta), min_us=0))
    assert est.unfloored_us() is None and est.rto_us() == 1_000_000  # the initial RTO
    est.on_sample(100_000)
    assert (est.srtt_us, est.rttvar_us, est.rto_us()) == (100_000, 50_000, 300_000)
    est.on_sample(200_000)
    assert (est.srtt_us, est.rttvar_us, est.unfloored_us()) == (srtt_ms * 1000, rttvar_ms * 1000, rto_ms * 1000)
    assert est.rto_us() == rto_ms * 1000
    assert est.rto_us(min_us=1_000_000) == 1_000_000


def test_estimator_granularity_floor_and_cap():
    est = Estimator(NO_FLOOR)
    est.on_sample(400)  # RTTVAR 200 µs: K·RTTVAR = 800 µs > G
    assert est.rto_us() == 1200
    for _ in range(200):
        est.on_sample(400)
    assert est.rto_us() == 650  # RTTVAR ~ 0: SRTT + G
    capped = Estimator(RtoSettings(alpha=1 / 8, beta=1 / 4, max_us=2_000_000))
    capped.on_sample(5_000_000)
    assert capped.unfloored_us() == 15_000_000 and capped.rto_us() == 2_000_000


def _send(sampler, end, t_ms, retransmission=False):
    sampler.on_send(end - 100, end, t_ms * 1000, retransmission)


def _acks(sampler, ack, t_ms):
    return [rtt // 1000 for rtt, _, _ in sampler.on_ack(ack, t_ms * 1000)]


def test_sampler_vectors_of_rto_rs():
    """The vectors of rto.rs's sampler tests, each mode and Karn's rule."""
    s = Sampler("all")
    for end, t in ((100, 0), (200, 2), (300, 4)):
        _send(s, end, t)
    _send(s, 200, 50, retransmission=True)  # segment 2 resent alone
    assert _acks(s, 300, 60) == [60, 56]
    s = Sampler("some")
    for i in range(1, 7):
        _send(s, i * 100, i * 10)
    assert [_acks(s, i * 100, i * 10 + 7) for i in range(1, 7)] == [[7], [], [7], [], [7], []]
    s = Sampler("one")
    _send(s, 100, 0)
    _send(s, 200, 1)
    _send(s, 100, 30, retransmission=True)  # covers the timed segment: no sample (Karn)
    assert _acks(s, 200, 40) == []
    _send(s, 300, 41)
    _send(s, 400, 42)
    assert _acks(s, 400, 45) == [4]
    for mode in ("all", "one", "some"):
        s = Sampler(mode)
        _send(s, 100, 0)
        s.on_retransmit_all()
        _send(s, 100, 1000, retransmission=True)
        assert _acks(s, 100, 1001) == [], mode


# One connection, hand-computed (W1, K = 4, G = 250 µs, initial RTO 1 s): the SYN-ACK, two
# data segments, the second lost and resent by go-back-N after a timeout, then a third.
#   SYN-ACK sent 1 ms, ACKed 11 ms: R = 10 ms, RTO in force = initial 1 s
#     -> SRTT 10 ms, RTTVAR 5 ms, unfloored RTO 30 ms
#   data [1, 1001) sent 13 ms, ACKed 113 ms: R = 100 ms, RTO in force 30 ms
#     -> RTTVAR 0.75·5 + 0.25·90 = 26.25, SRTT 0.875·10 + 0.125·100 = 21.25: RTO 126.25 ms
#   data [1001, 2001) sent 13 ms, resent 1113 ms (timeout): never sampled (Karn)
#   data [2001, 3001) sent 1214 ms, ACKed 1614 ms: R = 400 ms, RTO in force 126.25 ms
#     -> RTTVAR 0.75·26.25 + 0.25·378.75 = 114.375, SRTT 18.59375 + 50 = 68.59375: 526.09375 ms
EXPECTED_ALL = [(10_000, 1_000_000.0, 1_000_000), (100_000, 30_000.0, 1_000_000), (400_000, 126_250.0, 1_000_000)]
# `one` times the SYN-ACK, then [1, 1001) (sent while nothing was timed), then [2001, 3001).
# `some` samples odd ACKs of new data: ACK 1 times the SYN-ACK; ACK 3 covers only the resent
# segment (nothing clean to time, Karn); ACKs 2 and 4 are even.
EXPECTED_SOME = [(10_000, 1_000_000.0)]


def _conversation() -> Conversation:
    c = Conversation("v4")
    base = 1000.0
    c.segment(base + 0.000, True, 0, 0, SYN, 0)
    c.segment(base + 0.001, False, 0, 1, SYN | ACK, 0)
    c.segment(base + 0.011, True, 1, 1, ACK, 0)
    c.segment(base + 0.012, True, 1, 1, ACK, 100)  # the request
    c.segment(base + 0.013, False, 1, 101, ACK, 1000)
    c.segment(base + 0.013, False, 1001, 101, ACK, 1000)
    c.segment(base + 0.113, True, 101, 1001, ACK, 0)
    c.segment(base + 1.113, False, 1001, 101, ACK, 1000)  # go-back-N after the timeout
    c.segment(base + 1.213, True, 101, 2001, ACK, 0)
    c.segment(base + 1.214, False, 2001, 101, ACK, 1000)
    c.segment(base + 1.614, True, 101, 3001, ACK, 0)
    return c


def _log_lines(isn: int = 4_294_960_000) -> list[dict]:
    """The same connection as leanweb logs it (stack time 0 = epoch 1000 s)."""
    def tx(t_ms, off, length, syn=False, retransmission=False, rto_unfloored=None):
        return {"event": "tx", "conn": 1, "t_us": int(t_ms * 1000) + 5, "seq": (isn + off) % (1 << 32), "len": length,
                "syn": syn, "fin": False, "retransmission": retransmission, "sent_us": int(t_ms * 1000),
                "srtt_us": None, "rttvar_us": 0, "rto_unfloored_us": rto_unfloored, "rto_us": 1_000_000}

    def ack(t_ms, off):
        return {"event": "ack", "conn": 1, "t_us": int(t_ms * 1000) + 3, "ack": (isn + off) % (1 << 32),
                "at_us": int(t_ms * 1000)}

    def sample(t_ms, rtt_us, rto_us=1_000_000):
        return {"event": "rtt_sample", "conn": 1, "t_us": int(t_ms * 1000) + 3, "rtt_us": rtt_us, "srtt_us": 1,
                "rttvar_us": 1, "rto_us": rto_us}

    return [
        {"event": "start", "t_us": 0, "unix_us": 1_000_000_000, "rto_alpha": 0.125, "rto_beta": 0.25, "rto_k": 4.0,
         "rto_g_us": 250, "rto_initial_ms": 1000, "rto_min_ms": 1000, "rto_max_ms": 60000, "sampling": "all",
         "recovery": "go-back-n"},
        {"event": "open", "conn": 1, "t_us": 0, "unix_us": 1_000_000_000, "peer": "10.0.0.10:40000",
         "family": "ipv4"},
        tx(1, 0, 0, syn=True), ack(11, 1), sample(11, 10_000),
        tx(13, 1, 1000, rto_unfloored=30_000.0), tx(13, 1001, 1000, rto_unfloored=30_000.0),
        ack(113, 1001), sample(113, 100_000),
        {"event": "timeout", "conn": 1, "t_us": 1113, "rto_us": 2_000_000, "backoff_shift": 1,
         "outstanding_bytes": 1000},
        tx(1113, 1001, 1000, retransmission=True, rto_unfloored=126_250.0),
        ack(1213, 2001), tx(1214, 2001, 1000, rto_unfloored=126_250.0), ack(1614, 3001), sample(1614, 400_000),
    ]


def _write_log(path: Path, lines: list[dict], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in lines) + tail)
    return path


def _replayed(stream: ConnStream, sampling: str, settings=W1) -> list[tuple]:
    return [(s.rtt_us, s.rto_unfloored_us, s.rto_us) for s in replay_stream(sample_stream(stream, sampling), settings)]


def test_pcap_source_karn_and_timeout_in_the_middle(tmp_path):
    [stream] = pcap_streams(_conversation().write(tmp_path / "c.pcap"), 80, go_back_n=True)
    assert stream.key == ("v4", 40000)
    assert [e[4] for e in stream.events if e[0] == "send"] == [False, False, False, True, False]
    assert _replayed(stream, "all") == EXPECTED_ALL
    assert [x[:2] for x in _replayed(stream, "some")] == EXPECTED_SOME
    assert [x[:2] for x in _replayed(stream, "one")] == [x[:2] for x in EXPECTED_ALL]
    # without the floor the RTO after the last sample is 526.09375 ms, in whole µs truncated
    # as leanweb logs it (Duration::as_micros)
    assert _replayed(stream, "all", NO_FLOOR)[-1][2] == 526_093


def test_log_source_gives_the_same_samples_as_the_capture(tmp_path):
    log = read_lean_log(_write_log(tmp_path / "leanweb.jsonl", _log_lines(), tail='{"event": "tx", "co'))
    [stream] = log.conns
    assert log.has_tx and stream.key == ("v4", 40000)
    assert [e[0] for e in stream.events].count("timeout") == 1
    assert _replayed(stream, "all") == EXPECTED_ALL
    assert [x[:2] for x in _replayed(stream, "some")] == EXPECTED_SOME
    # what leanweb logged as the RTO in force at each transmission is what the replay used
    in_force = {s.sent_us: s.rto_unfloored_us for s in replay_stream(sample_stream(stream, "all"), W1)}
    for event in _log_lines():
        if event["event"] == "tx" and event["rto_unfloored_us"] is not None and event["sent_us"] in in_force:
            assert in_force[event["sent_us"]] == event["rto_unfloored_us"]


def test_sent_and_previous_sample_bases_differ_within_a_window():
    """Two segments leave together; ACKs come 100 ms and 300 ms later. Judged by the RTO in
    force when it left, the second has the initial 1 s; by the previous sample's, 300 ms."""
    stream = ConnStream("v4", 40000, 0, events=[
        ("send", 0, 0, 100, False), ("send", 0, 100, 200, False),
        ("ack", 100_000, 100), ("ack", 300_000, 200)])
    first, second = replay_stream(sample_stream(stream, "all"), W1)
    assert (first.rto("sent"), first.rto("previous_sample")) == (1_000_000.0, 1_000_000.0)
    assert (second.rtt_us, second.rto("sent"), second.rto("previous_sample")) == (300_000, 1_000_000.0, 300_000.0)
    assert table6_bins([first, second], "previous_sample")["rto_le_1s_rtt_gt_rto_lt_1s_pct"] == 0.0
    assert avoid_pct([first, second], 250_000, "seed", "previous_sample") == 0.0
    assert avoid_pct([second], 300_000, "seed", "previous_sample") == 100.0
    with pytest.raises(ValueError):
        first.rto("other")


def test_every_table6_column_and_both_readings():
    def s(rtt_ms, rto_ms):
        return Sample(0, rtt_ms * 1000, rtt_ms * 1000, rto_ms * 1000.0, 0)

    samples = [s(400, 500), s(600, 500), s(1200, 500), s(1000, 1500), s(1600, 1500)]
    assert table6_bins(samples) == dict.fromkeys(BIN_COLUMNS, 20.0)
    assert table6_bins([]) == dict.fromkeys(BIN_COLUMNS, None)
    assert [avoid_pct(samples, t, "literal") for t in (250_000, 1_000_000)] == [40.0, 60.0]
    assert [avoid_pct(samples, t, "seed") for t in (250_000, 500_000, 1_000_000)] == [0.0, 60.0, 60.0]
    with pytest.raises(ValueError):
        avoid_pct(samples, 1, "other")


def test_seed_example_picks_the_seed_reading():
    """Table 6 W9/One at 125 Mbit/s is 50 / 0 / 4 / 46 / 0 %: 12, 1 and 11 of 24 samples.
    Table 35 gives 54.17 % at T = 1 s: the seed reading (13/24), not the literal one (23/24)."""
    samples = ([Sample(0, 0, 400_000, 500_000.0, 0)] * 12 + [Sample(0, 0, 1_200_000, 500_000.0, 0)]
               + [Sample(0, 0, 1_000_000, 1_500_000.0, 0)] * 11)
    bins = table6_bins(samples)
    assert [round(bins[c]) for c in BIN_COLUMNS] == [50, 0, 4, 46, 0]
    assert round(avoid_pct(samples, 1_000_000, "seed"), 2) == 54.17
    assert round(avoid_pct(samples, 1_000_000, "literal"), 2) == 95.83


def test_corrupt_log_line_is_named(tmp_path):
    lines = [json.dumps(e) for e in _log_lines()]
    lines.insert(3, "{not json")
    path = tmp_path / "leanweb.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LeanLogError, match=r"leanweb.jsonl:4: not a leanweb log line"):
        read_lean_log(path)
    missing_field = _log_lines()
    del missing_field[5]["sent_us"]
    with pytest.raises(LeanLogError, match=r":6: tx event lacks a valid field"):
        read_lean_log(_write_log(path, missing_field))
    with pytest.raises(LeanLogError, match="no start event"):
        read_lean_log(_write_log(path, _log_lines()[1:]))


def _run_dir(tmp_path: Path, lean: bool = True) -> Path:
    run = tmp_path / "run"
    rep = run / "points" / "main.server-lean" / "r1"
    (rep / "pcap").mkdir(parents=True)
    _conversation().write(rep / "pcap" / "lean.pcap")
    (rep / "rep.json").write_text(json.dumps({"servers": {"lean": "i1"}}))
    (rep / "records.jsonl").write_text("")
    logs = run / "logs" / "servers" / "lean-i1"
    logs.mkdir(parents=True)
    _write_log(logs / "leanweb.jsonl", _log_lines())
    kind = "lean" if lean else "apache"
    table6 = {"t6": {"kind": "rto_bins", "column": "samples"}}  # the report reads the replay (replay_wanted)
    manifest = {"format_version": FORMAT_VERSION, "status": "complete", "study": "t",
                "spec": tiny_stored_spec(server="lean") | {"report": {"metrics": table6}},
                "axes": ["server"], "points": [{"id": "main.server-lean", "experiment": "main",
                                                "axes": {"server": "lean"}}],
                "servers": {"lean": [{"instance": "i1", "kind": kind, "port": 80, "log_dir": "logs/servers/lean-i1"}]}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_replay_run_rows_both_sources_and_overrides(tmp_path):
    run = StoredRun(_run_dir(tmp_path))
    result = replay_run(run)
    bins = {r["source"]: r for r in result.rows["rto_bins"]}
    assert set(bins) == {"log", "pcap"} and result.samples_replayed == 6
    for row in bins.values():
        assert (row["weight"], row["sampling"], row["live_settings"], row["samples"]) == ("W1", "all", True, 3)
        assert row["rto_le_1s_rtt_le_rto_pct"] == round(100 / 3, 4)
        assert row["rto_le_1s_rtt_gt_rto_lt_1s_pct"] == round(200 / 3, 4)
        # one segment per RTT here, so judged by the previous sample's RTO the same
        assert row["previous_sample_rto_le_1s_rtt_gt_rto_lt_1s_pct"] == round(200 / 3, 4)
    logged = [r["logged_rto_us"] for r in result.rows["rto_samples"] if r["source"] == "log"]
    assert logged == [1_000_000] * 3
    assert len(result.rows["rto_threshold"]) == 2 * 4 * 2  # sources x thresholds x readings
    wider = replay_run(run, ["W1", "W9"], ["all", "one", "some"], (500,))
    assert len(wider.rows["rto_bins"]) == 2 * 3 * 2
    assert sum(r["live_settings"] for r in wider.rows["rto_bins"]) == 2
    assert {r["sample"] for r in wider.rows["rto_samples"]} == {1, 2, 3}  # only the live settings


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "congestlab.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_cli_prints_tables_writes_csvs_and_refuses_bad_input(tmp_path):
    run = _run_dir(tmp_path)
    done = _cli("rto-replay", str(run), "--weight", "W1,W5", "--sampling", "one")
    assert done.returncode == 0, done.stderr
    assert "Table 6" in done.stdout and "replayed 12 samples" in done.stdout  # 3 per weight and source
    assert (run / "results" / "rto_bins.csv").read_text().count("\n") == 1 + 2 * 2  # weights x sources
    bad = _cli("rto-replay", str(run), "--weight", "W10")
    assert (bad.returncode, bad.stderr.strip()) == (2, "congestlab: --weight: 'W10' is not one of W1, W2, W3, W4, "
                                                       "W5, W6, W7, W8, W9")
    log = run / "logs" / "servers" / "lean-i1" / "leanweb.jsonl"
    log.write_text(log.read_text().replace('"event": "ack"', '"event": ack', 1))
    corrupt = _cli("rto-replay", str(run))
    assert corrupt.returncode == 9 and len(corrupt.stderr.strip().splitlines()) == 1
    assert "leanweb.jsonl:4: not a leanweb log line" in corrupt.stderr
    no_lean = _cli("rto-replay", str(_run_dir(tmp_path / "apache", lean=False)))
    assert no_lean.returncode == 7 and "no lean server" in no_lean.stderr
    with pytest.raises(RunDirError):
        replay_run(StoredRun(_run_dir(tmp_path / "again", lean=False)))


def test_analyze_adds_replay_rows_and_the_log_check_and_survives_a_corrupt_log(tmp_path):
    from congestlab.analysis.run_analysis import analyze_run

    run = _run_dir(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    result = analyze_run(run, manifest)
    assert len(result.rows["rto_bins"]) == 2 and result.summary["rto_replay"]["samples"] == 6
    (check,) = [c for c in result.checks if c.name == "retransmissions_pcap_vs_log_lean"]
    assert (check.ok, check.value) == (True, "1/1")  # the resent segment, in the capture and in the log
    log = run / "logs" / "servers" / "lean-i1" / "leanweb.jsonl"
    log.write_text(log.read_text().replace('"retransmission": true', '"retransmission": false'))
    (check,) = [c for c in analyze_run(run, manifest).checks if c.name == "retransmissions_pcap_vs_log_lean"]
    assert not check.ok and "pcap 1 vs log 0 retransmissions" in check.message
    log.write_text(log.read_text().replace('"event": "ack"', '"event": ack', 1))
    result = analyze_run(run, manifest)
    assert "rto_replay" not in result.summary
    assert any("leanweb.jsonl:4: not a leanweb log line" in p for p in result.summary["problems"])


def test_analyze_replays_only_for_a_report_that_reads_the_replay(tmp_path):
    from congestlab.analysis.run_analysis import analyze_run

    run = _run_dir(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    analyze_run(run, manifest)
    assert (run / "results" / "rto_samples.csv").exists()
    manifest["spec"]["report"]["metrics"] = {"delay": {"kind": "request", "column": "delay_ms"}}
    result = analyze_run(run, manifest)
    assert not result.rows["rto_bins"] and not result.rows["rto_samples"] and "rto_replay" not in result.summary
    assert not (run / "results" / "rto_samples.csv").exists()  # an earlier analysis's table does not linger
    assert "congestlab rto-replay RUN" in result.summary["rto_replay_skipped"]
    (check,) = [c for c in result.checks if c.name == "retransmissions_pcap_vs_log_lean"]
    assert check.ok  # the lean log is still checked against the capture


def test_a_log_cut_short_replays_what_it_holds_and_says_how_much(tmp_path):
    """The issue's case: a half-written leanweb log replayed 21 of 42 connections, exit 0. The
    replay says how many connections the captures opened and how many the logs hold; `analyze`
    names the log's missing connections; both exit 6 after writing their rows."""
    run = _run_dir(tmp_path)
    _write_log(run / "logs" / "servers" / "lean-i1" / "leanweb.jsonl", _log_lines()[:1])  # the start event only
    result = replay_run(StoredRun(run))
    assert (result.opened, result.from_log) == (1, 0)
    assert result.coverage() == "1 connections opened in the captures, 0 of them in the leanweb logs (1 missing)"
    (damaged,) = result.damaged
    assert damaged.endswith("leanweb.jsonl: holds 0 of the 1 connections main.server-lean #1's capture saw open "
                            "(not: v4 40000)"), damaged
    assert {r["source"]: r["connections"] for r in result.rows["rto_bins"]} == {"log": 0, "pcap": 1}
    done = _cli("rto-replay", str(run))
    assert done.returncode == 6 and "from 1 connections opened in the captures, 0 of them" in done.stdout
    assert done.stderr.strip() == "congestlab: replayed with problems: 1 (listed above)"
    analysed = _cli("analyze", str(run))
    assert analysed.returncode == 6 and "input problems" in analysed.stderr
    assert "lean log check:" in analysed.stdout and "v4 port 40000: not in the log" in analysed.stdout
