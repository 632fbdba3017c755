"""The samplers' recordings turned into series on the capture's clock: a recorded sample of
bpf/clprobe (python/tests/unit/data/probe-sample: a 2 MB GET from a kernel server through a
20 Mbit/s HTB with a 4-packet FIFO, the capture taken at the same interface), the aligner's
interpolation, and the lean log in the same shape."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import dpkt
import pytest

from congestlab.analysis.probe_clock import ProbeClock, probe_clock
from congestlab.analysis.queue_series import queue_rows, read_queue_series, write_queue_series
from congestlab.analysis.sender_series import (SENDER_COLUMNS, kernel_rows, lean_rows, read_sender_series,
                                               write_sender_series)
from congestlab.capture import probes
from congestlab.capture.probes import (SockTarget, QueueTarget, clprobe_argv, read_clock, recording_commands,
                                       stop_summary)
from congestlab.errors import RunDirError, ToolError
from congestlab.runner import captures
from congestlab.testbed import namespaces

SAMPLE = Path(__file__).parent / "data" / "probe-sample"
SERVER_PORT = 8080


def _pcap_acks(path: Path) -> tuple[int, list[tuple[int, int, int]]]:
    """The server's first sequence number and every client segment's (client port, relative
    ACK, epoch ns) in the capture."""
    isn, acks = None, []
    for ts, buf in dpkt.pcap.Reader(open(path, "rb")):
        tcp = dpkt.ethernet.Ethernet(buf).data.data
        if tcp.sport == SERVER_PORT and tcp.flags & dpkt.tcp.TH_SYN:
            isn = tcp.seq
        elif tcp.dport == SERVER_PORT and tcp.flags & dpkt.tcp.TH_ACK and isn is not None:
            acks.append((tcp.sport, (tcp.ack - isn) % 2**32, round(ts * 1e9)))
    assert isn is not None
    return isn, acks


def test_the_recorded_acks_land_on_the_captured_ones_within_a_millisecond(within):
    """Every ack row is a client segment of the capture: the same relative ACK number (so the
    first sequence number derived from bytes_acked is the server's ISN) at the capture's time,
    within 1 ms (the tracepoint runs a few µs after the capture's tap; pcap keeps µs)."""
    clock = probe_clock(SAMPLE / "clock.jsonl")
    (web,) = kernel_rows(SAMPLE / "kernel-probe.csv", clock).values()
    _, acks = _pcap_acks(SAMPLE / "web.pcap")
    by_ack: dict[tuple[int, int], list[int]] = {}
    for port, ack, ts in acks:
        by_ack.setdefault((port, ack), []).append(ts)
    rows = [r for r in web if r["event"] == "ack"]
    assert len(rows) >= 30
    deltas = []
    for row in rows:  # the nearest capture segment with that ACK (the handshake's and the request's are equal)
        times = by_ack.get((row["client_port"], row["ack_off"]))
        assert times, f"ack {row['ack_off']} from port {row['client_port']} is not in the capture"
        deltas.append(min((row["ts_ns"] - ts for ts in times), key=abs))
    deltas.sort()
    within("median probe − capture µs", deltas[len(deltas) // 2] / 1e3, 0.0, 100.0)
    for d in deltas:
        within("probe − capture µs", d / 1e3, 0.0, 1000.0)


def test_kernel_rows_are_relative_and_consistent():
    clock = probe_clock(SAMPLE / "clock.jsonl")
    (web,) = kernel_rows(SAMPLE / "kernel-probe.csv", clock).values()
    first = web[0]
    assert first["snd_una_off"] == 1 and first["in_flight_bytes"] == 0  # the request arrives: nothing sent yet
    assert first["ssthresh_bytes"] is None  # no loss yet: the kernel's "infinite" ssthresh
    assert [r["ts_ns"] for r in web] == sorted(r["ts_ns"] for r in web)
    for r in web:
        assert r["snd_cwnd_bytes"] == r["snd_cwnd_pkts"] * r["mss_bytes"]
        assert r["snd_nxt_off"] - r["snd_una_off"] == r["in_flight_bytes"] >= 0
        assert r["family"] == "v4" and r["srtt_us"] > 0 and r["pacing_rate_bps"] > 0
        assert r["ca_state"] in ("open", "disorder", "cwr", "recovery", "loss")
    assert max(r["snd_cwnd_pkts"] for r in web) > 10  # the window grew from the initial 10


def test_aligner_interpolates_the_offset_between_start_and_stop():
    clock = ProbeClock(start_mono_ns=1_000, start_offset_ns=5_000_000, stop_mono_ns=11_000,
                       stop_offset_ns=5_000_100, read_ns=30)
    assert clock.drift_ns == 100
    assert clock.epoch_ns(1_000) == 1_000 + 5_000_000
    assert clock.epoch_ns(6_000) == 6_000 + 5_000_050
    assert clock.epoch_ns(11_000) == 11_000 + 5_000_100
    still = ProbeClock(1_000, 7, 1_000, 7, 30)  # killed before its stop line: the start offset alone
    assert still.epoch_ns(50_000) == 50_007


def test_the_sample_clock_is_consistent():
    start, stop = read_clock(SAMPLE / "clock.jsonl")
    clock = probe_clock(SAMPLE / "clock.jsonl")
    assert abs(clock.drift_ns) < 1_000_000 and clock.read_ns < 10_000
    assert stop["realtime_ns"] - start["realtime_ns"] == pytest.approx(stop["monotonic_ns"] - start["monotonic_ns"],
                                                                       abs=1_000_000)


def test_queue_rows_count_drops_from_the_first_row(tmp_path):
    clock = probe_clock(SAMPLE / "clock.jsonl")
    rows = queue_rows(SAMPLE / "queue-probe.csv", clock)
    assert rows and rows[0]["drops"] == 0 and {r["link"] for r in rows} == {"a/va"}
    drops = [r["drops"] for r in rows]
    assert drops == sorted(drops) and drops[-1] > 0  # the 4-packet FIFO overflowed
    assert all(r["max_backlog_pkts"] >= r["backlog_pkts"] and r["max_backlog_pkts"] <= 5 for r in rows)
    gaps = [b["ts_ns"] - a["ts_ns"] for a, b in zip(rows, rows[1:])]
    assert min(gaps) >= 0
    path = tmp_path / "bottleneck-queue.csv"
    assert write_queue_series(path, rows) == len(rows)
    assert read_queue_series(path) == rows


def test_series_round_trip(tmp_path):
    clock = probe_clock(SAMPLE / "clock.jsonl")
    (web,) = kernel_rows(SAMPLE / "kernel-probe.csv", clock).values()
    path = tmp_path / "web-tcp_probe.csv"
    assert write_sender_series(path, web) == len(web)
    assert path.read_text().splitlines()[0] == ",".join(SENDER_COLUMNS)
    assert read_sender_series(path) == web


def test_a_bad_recording_is_one_clear_error(tmp_path):
    clock = probe_clock(SAMPLE / "clock.jsonl")
    bad = tmp_path / "kernel-probe.csv"
    bad.write_text("mono_ns,what\n1,2\n")
    with pytest.raises(RunDirError, match="not a kernel probe recording"):
        kernel_rows(bad, clock)
    lines = (SAMPLE / "kernel-probe.csv").read_text().splitlines()
    cut = tmp_path / "cut.csv"
    cut.write_text("\n".join(lines[:5] + [lines[5][:20]]) + "\n")  # the sampler killed mid-line
    assert len(kernel_rows(cut, clock)["web"]) == 4
    garbled = tmp_path / "garbled.csv"
    garbled.write_text("\n".join(lines[:2] + ["12x" + lines[2]]) + "\n")
    with pytest.raises(RunDirError, match="line 3"):
        kernel_rows(garbled, clock)
    garbled.write_text("\n".join(lines[:2] + [lines[2].replace(",ack,", ",acked,", 1)]) + "\n")
    with pytest.raises(RunDirError, match="line 3: event 'acked'"):
        kernel_rows(garbled, clock)
    nostart = tmp_path / "clock.jsonl"
    nostart.write_text('{"event":"stop"}\n')
    with pytest.raises(RunDirError, match="no start line"):
        probe_clock(nostart)


def test_lean_log_maps_into_the_same_columns(tmp_path):
    """leanweb's lines (docs/leanweb.md): the handshake, two data segments, one sent again
    after a timeout, the ACKs."""
    log = tmp_path / "leanweb.jsonl"
    lines = [
        {"event": "open", "conn": 1, "peer": "10.0.0.2:40000", "family": "ipv4", "unix_us": 100},
        {"event": "tx", "conn": 1, "seq": 1000, "len": 0, "syn": True, "fin": False, "retransmission": False,
         "srtt_us": None, "rttvar_us": 0, "rto_us": 1000000, "unix_us": 110},
        {"event": "tx", "conn": 1, "seq": 1001, "len": 1448, "syn": False, "fin": False, "retransmission": False,
         "srtt_us": 500, "rttvar_us": 250, "rto_us": 1000000, "unix_us": 200},
        {"event": "tx", "conn": 1, "seq": 2449, "len": 1448, "syn": False, "fin": False, "retransmission": False,
         "srtt_us": 500, "rttvar_us": 250, "rto_us": 1000000, "unix_us": 201},
        {"event": "ack", "conn": 1, "ack": 2449, "cwnd_bytes": 14480, "unix_us": 300},
        {"event": "timeout", "conn": 1, "rto_us": 2000000, "backoff_shift": 1, "unix_us": 1_000_300},
        {"event": "tx", "conn": 1, "seq": 2449, "len": 1448, "syn": False, "fin": False, "retransmission": True,
         "kind": "timeout", "srtt_us": 500, "rttvar_us": 250, "rto_us": 2000000, "unix_us": 1_000_301},
        {"event": "recovery", "conn": 1, "entered": True, "cwnd_bytes": 1448, "ssthresh_bytes": 2896,
         "unix_us": 1_000_302},
        {"event": "ack", "conn": 1, "ack": 3897, "cwnd_bytes": 1448, "unix_us": 1_000_400},
    ]
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n{\"event\": \"cut")
    rows = list(lean_rows(log))
    assert [r["event"] for r in rows] == ["ack", "rto", "retransmit", "ack"]
    first, rto, again, last = rows
    assert set(first) == set(SENDER_COLUMNS)
    assert first["ts_ns"] == 300_000 and first["family"] == "v4" and first["client_port"] == 40000
    assert first["ack_off"] == first["snd_una_off"] == 1449 and first["in_flight_bytes"] == 1448
    assert first["snd_cwnd_bytes"] == 14480 and first["srtt_us"] == 500 and first["ssthresh_bytes"] is None
    assert rto["rto_us"] == 2_000_000
    assert again["seq_off"] == 1449 and again["len_bytes"] == 1448
    assert last["ack_off"] == 2897 and last["in_flight_bytes"] == 0 and last["ssthresh_bytes"] == 2896


def test_sampler_argv_and_summary(tmp_path):
    argv = clprobe_argv(tmp_path, [SockTarget("apache", 4026532177, 80)], [QueueTarget("r1/x-e0", 4026532180, 3)],
                        1000, 5_000_000) if (Path(__file__).parents[3] / "bpf/build/clprobe").exists() else None
    if argv is not None:
        assert argv[argv.index("--sock") + 1] == "4026532177:80:apache"
        assert argv[argv.index("--queue") + 1] == "4026532180:3:r1/x-e0"
    (tmp_path / "clock.jsonl").write_text((SAMPLE / "clock.jsonl").read_text())
    start, _ = read_clock(tmp_path / "clock.jsonl")
    summary = stop_summary(tmp_path, start, ["clprobe"])
    assert summary["stopped"] and summary["drift_ok"] and summary["lost"] == 0 and summary["truncated"] == 0
    assert summary["tcp_rows"] > 0 and 0 < summary["cpu_s"] < summary["wall_s"]
    assert summary["recording"] == 1  # a one-shot sampler's lines say nothing of recordings


def test_a_recording_is_its_targets_output_and_cap():
    text = recording_commands(Path("/runs/x/points/p/r2/probes"), [SockTarget("apache", 4026532177, 80)],
                              [QueueTarget("r1/x-e0", 4026532180, 3)], 5_000_000)
    assert text.splitlines() == ["out /runs/x/points/p/r2/probes", "max-bytes 5000000",
                                 "sock 4026532177:80:apache", "queue 4026532180:3:r1/x-e0", "begin"]
    with pytest.raises(RunDirError, match="no newline"):
        recording_commands(Path("/runs/x\ny"), [], [], 1)


def test_a_later_recordings_summary_separates_its_cpu_from_the_samplers(tmp_path):
    """A sampler's second recording: its own CPU and BPF time; the loading it paid once."""
    start = {"event": "start", "realtime_ns": 5_000_000_000, "monotonic_ns": 1_000_000_000, "read_ns": 31,
             "pid": 77, "recording": 2, "prog_ids": [1, 2, 3], "cpu_s": 0.081, "load_cpu_s": 0.072}
    stop = {"event": "stop", "realtime_ns": 5_750_000_100, "monotonic_ns": 1_750_000_000, "read_ns": 30,
            "tcp_rows": 10, "queue_rows": 5, "bytes": 900, "truncated": 0, "lost_tcp": 0, "lost_queue": 0,
            "cpu_user_s": 0.001, "cpu_system_s": 0.002, "cpu_total_s": 0.084, "bpf_run_time_ns": 4_000_000,
            "bpf_run_count": 30_000}
    (tmp_path / "clock.jsonl").write_text(json.dumps(start) + "\n" + json.dumps(stop) + "\n")
    summary = stop_summary(tmp_path, start, ["clprobe", "--control"])
    assert summary["recording"] == 2 and summary["sampler_pid"] == 77
    assert summary["cpu_s"] == 0.003 and summary["sampler_load_cpu_s"] == 0.072
    assert summary["sampler_cpu_total_s"] == 0.084 and summary["wall_s"] == 0.75
    assert summary["drift_ns"] == 100 and summary["drift_ok"] and summary["bpf_run_time_ns"] == 4_000_000


# bpf/clprobe --control's protocol, played by a script: answers, a clock.jsonl per recording
FAKE_CLPROBE = textwrap.dedent("""\
    import json, os, sys
    print("loaded", flush=True)
    out, n, recording = None, 0, False
    for line in sys.stdin:
        word, _, arg = line.rstrip("\\n").partition(" ")
        if word == "out":
            out = arg
        elif word == "begin":
            if recording or out is None or not os.path.isdir(out):
                print("error cannot write in " + str(out), flush=True)
                continue
            n, recording = n + 1, True
            with open(os.path.join(out, "clock.jsonl"), "w") as f:
                f.write(json.dumps({"event": "start", "realtime_ns": 2000, "monotonic_ns": 1000, "read_ns": 30,
                                    "pid": os.getpid(), "recording": n, "load_cpu_s": 0.07}) + "\\n")
            print("started", flush=True)
        elif word == "end":
            with open(os.path.join(out, "clock.jsonl"), "a") as f:
                f.write(json.dumps({"event": "stop", "realtime_ns": 3000, "monotonic_ns": 2000, "read_ns": 30,
                                    "tcp_rows": 1, "queue_rows": 0, "bytes": 10, "truncated": 0, "lost_tcp": 0,
                                    "lost_queue": 0, "cpu_user_s": 0.0, "cpu_system_s": 0.001,
                                    "cpu_total_s": 0.071}) + "\\n")
            recording, out = False, None
            print("stopped", flush=True)
    """)


class FakeTestbed:
    prefix = "cl000000"

    def __init__(self):
        self.started: list[list[str]] = []

    def start(self, node, argv, stdout=None, stderr=None, env=None, stdin=None):
        self.started.append(argv)
        return subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=stderr)

    def stop(self, proc, grace_s=3.0):
        if proc.poll() is None:
            proc.terminate()
        return proc.wait(timeout=grace_s)


def test_the_run_sampler_starts_once_and_records_each_repetition(tmp_path, monkeypatch):
    script = tmp_path / "clprobe.py"
    script.write_text(FAKE_CLPROBE)
    monkeypatch.setattr(probes, "clprobe_path", lambda: Path(sys.executable))
    monkeypatch.setattr(probes, "clprobe_control_argv",
                        lambda interval_us, bpf_stats=False: [sys.executable, str(script), str(interval_us)])
    monkeypatch.setattr(captures, "clprobe_control_argv", probes.clprobe_control_argv)
    owner: list[str] = []
    monkeypatch.setattr(captures, "set_owner_field", lambda prefix, field, value: owner.append(value))
    tb, sampler = FakeTestbed(), captures.ProbeSampler(tmp_path / "logs" / "clprobe.log")
    capture = SimpleNamespace(queue_interval_us=1000, probe_bpf_stats=True, probe_max_bytes=5_000_000)
    socks = [SockTarget("apache", 4026532177, 80)]
    pids = []
    try:
        for rep in (1, 2, 3):
            out = tmp_path / f"r{rep}"
            out.mkdir()
            start = sampler.begin(tb, "server", out, socks, [], capture)
            assert start["recording"] == rep
            pids.append(start["pid"])
            sampler.end(tb)
            summary = stop_summary(out, start, sampler.argv)
            assert summary["stopped"] and summary["recording"] == rep and summary["cpu_s"] == 0.001
        assert len(tb.started) == 1 and len(set(pids)) == 1  # loaded once for three repetitions
        assert owner and owner[0].startswith(f"{pids[0]}:")  # `clean` can find it while it lives
        with pytest.raises(ToolError, match="cannot write"):  # a bad recording: one clear error, sampler closed
            sampler.begin(tb, "server", tmp_path / "missing", socks, [], capture)
        assert sampler.proc is None and owner[-1] == ""
        (tmp_path / "r4").mkdir()
        start = sampler.begin(tb, "server", tmp_path / "r4", socks, [],
                              SimpleNamespace(queue_interval_us=500, probe_bpf_stats=True, probe_max_bytes=1))
        assert start["recording"] == 1 and tb.started[-1][-1] == "500"  # restarted with the new interval
        proc = sampler.proc
    finally:
        sampler.close(tb)
    assert proc.poll() is not None and owner[-1] == ""  # its stdin closed: it ended


def test_owner_record_keeps_the_samplers_in_their_own_field(tmp_path, monkeypatch):
    monkeypatch.setattr(namespaces, "OWNERS_DIR", tmp_path)
    namespaces.record_owner("cl123456", "/runs/x")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        tag = namespaces.process_tag(sleeper.pid)
        namespaces.set_owner_field("cl123456", "probes", tag)
        namespaces.set_owner_field("cl123456", "other", "kept")
        assert namespaces.owner_field("cl123456", "probes") == tag
        assert namespaces.owner_alive("cl123456")  # the first three lines are as before
        assert namespaces.kill_tagged(f"{sleeper.pid}:0") == []  # a reused PID is never killed
        assert namespaces.kill_tagged(tag) == [tag]
        assert sleeper.wait(timeout=5) is not None
        namespaces.set_owner_field("cl123456", "probes", "")
        assert namespaces.owner_field("cl123456", "probes") == ""
        assert namespaces.owner_field("cl123456", "other") == "kept"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_the_analysis_writes_the_series_of_a_repetition(tmp_path):
    """run_analysis's step for one repetition: the sampler's recording and the lean log (with
    kernel_probe on) become results/series files; a broken recording is a problem, not a crash."""
    from congestlab.analysis.server_views import write_probe_series
    from congestlab.rundir import FORMAT_VERSION
    from congestlab.stored import StoredRun
    from record_fixtures import tiny_stored_spec

    def repetition(kernel_probe: bool):
        spec = tiny_stored_spec(extra=f"[capture]\nkernel_probe = {str(kernel_probe).lower()}\n")
        (tmp_path / "manifest.json").write_text(json.dumps({
            "format_version": FORMAT_VERSION, "status": "complete", "spec": spec,
            "points": [{"id": "p", "experiment": "e"}]}))
        (rep,) = StoredRun(tmp_path).repetitions()
        return rep

    rep_dir = tmp_path / "points" / "p" / "r1"
    (rep_dir / "probes").mkdir(parents=True)
    for name in ("clock.jsonl", "kernel-probe.csv", "queue-probe.csv"):
        (rep_dir / "probes" / name).write_text((SAMPLE / name).read_text())
    log = tmp_path / "leanweb.jsonl"
    log.write_text("\n".join(json.dumps(x) for x in [
        {"event": "open", "conn": 1, "peer": "[fd00::2]:40001", "family": "ipv6", "unix_us": 100},
        {"event": "tx", "conn": 1, "seq": 7, "len": 0, "syn": True, "unix_us": 110},
        {"event": "ack", "conn": 1, "ack": 8, "cwnd_bytes": 14480, "unix_us": 2_000_000},
        {"event": "ack", "conn": 1, "ack": 8, "cwnd_bytes": 14480, "unix_us": 9_000_000}]) + "\n")
    (rep_dir / "rep.json").write_text(json.dumps({"servers": {"lean": "i1"}, "capture_epoch_s": [1.0, 5.0]}))
    series = tmp_path / "series"
    problems = write_probe_series(series, repetition(kernel_probe=True), {("lean", "i1"): log}, {})
    assert problems == []
    assert len(read_sender_series(series / "web-tcp_probe.csv")) == 42
    assert read_queue_series(series / "bottleneck-queue.csv")
    (lean,) = read_sender_series(series / "lean-lean_log.csv")  # only the line inside the capture's span
    assert lean["ts_ns"] == 2_000_000_000 and lean["family"] == "v6" and lean["client_port"] == 40001
    (rep_dir / "probes" / "queue-probe.csv").write_text("nonsense\n")
    problems = write_probe_series(series, repetition(kernel_probe=False), {}, {})
    assert len(problems) == 1 and "not a queue probe recording" in problems[0]
    log.unlink()  # a lean server that left no log: a problem naming it, not a silently missing series
    (rep_dir / "probes" / "queue-probe.csv").unlink()
    shutil.rmtree(series)
    problems = write_probe_series(series, repetition(kernel_probe=True), {("lean", "i1"): log}, {})
    assert problems == [f"lean series: {log}: missing, so no lean-lean_log.csv"]
    assert not (series / "lean-lean_log.csv").exists()


def test_probe_cost_counts_the_start_up_once_per_sampler(tmp_path):
    """Two recordings of one sampler: per recording its own CPU over its wall time; with
    start-up, everything the sampler spent (loading included) over both recordings' wall."""
    from congestlab.bench.probe_cost import probe_cost

    for rep, (cpu_s, total_s) in enumerate([(0.002, 0.080), (0.004, 0.085)], start=1):
        rep_dir = tmp_path / "points" / "on" / f"r{rep}"
        rep_dir.mkdir(parents=True)
        probe = {"stopped": True, "wall_s": 0.5, "cpu_s": cpu_s, "sampler_pid": 9, "recording": rep,
                 "sampler_load_cpu_s": 0.072, "sampler_cpu_total_s": total_s, "bpf_run_time_ns": 3_000_000,
                 "bpf_run_count": 100, "bytes": 1000, "lost": 0, "truncated": 0, "drift_ns": 5}
        (rep_dir / "rep.json").write_text(json.dumps({"probes": probe}))
    result = probe_cost(tmp_path)
    assert [round(r["cpu_pct_of_one_core"], 6) for r in result["reps"]] == [1.0, 1.4]  # (3 ms + own) / 0.5 s
    (life,) = result["samplers"]
    assert life["recordings"] == 2 and life["load_cpu_s"] == 0.072
    assert result["cpu_pct_with_startup_max"] == pytest.approx(100 * (0.085 + 0.006) / 1.0)
    assert not result["cpu_ok"]  # 9.1 % with its start-up over just 1 s of recording
