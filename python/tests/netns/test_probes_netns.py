"""The BPF sampler in a real run (docs/probes.md): a tiny study with [capture] kernel_probe and
queue_probe gives a kernel server's series and the lean server's, aligned with the capture,
and the bottleneck's queue; a run ended by SIGTERM or SIGKILL leaves no BPF program behind."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spine_helpers import mini_spec_text, namespaces_with, processes_mentioning

from congestlab.analysis.queue_series import read_queue_series
from congestlab.analysis.sender_series import read_sender_series
from congestlab.analysis.trace_files import read_trace
from congestlab.results import read_results
from congestlab.spec import load_spec
from congestlab.study import run_study

pytestmark = pytest.mark.netns

# The stated alignment (docs/probes.md): a kernel server's ACK row and the capture's packet of
# that ACK, median within 0.2 ms and every one within 2 ms (the tracepoint runs after the
# capture's tap, later when the socket is busy and the segment waits in its backlog). The lean
# server's log line is written when leanweb reads the frame from its TAP device: its clock is
# the capture's when the earliest tenth of the gaps lies within 2 ms (ACKs that came while it
# waited); the median adds the time frames wait in the TAP queue while leanweb's loop writes a
# turn's frames or is descheduled: printed, not asserted (docs/probes.md: medians of 24 µs to
# 5.4 ms, at most 19 ms, in 8 runs at load 0.6).
KERNEL_MEDIAN_US, KERNEL_MAX_US = 200.0, 2000.0
LEAN_EARLIEST_TENTH_US = 2000.0


def tiny_spec(directory: Path, repetitions: int = 1) -> Path:
    """The mini web study at 20 Mbit/s of MGEN only, Apache and the lean server, probes on."""
    text = mini_spec_text(repetitions).replace('{ name = "level", levels = ["C0", "L20"] }',
                                                '{ name = "level", levels = ["L20"] }')
    text = text.replace("[[levels]]", "[capture]\nkernel_probe = true\nqueue_probe = true\n\n[[levels]]", 1)
    path = directory / "tiny-probes.toml"
    path.write_text(text)
    return path


def _prog_alive(prog_id: int) -> bool:
    return subprocess.run(["bpftool", "prog", "show", "id", str(prog_id)], capture_output=True).returncode == 0


def _ack_deltas_us(sender_rows: list[dict], trace: list[dict], client_port: int) -> list[float]:
    """Each ack row of the connection against the nearest client segment of the capture with
    that ACK number (the handshake's ACK and the request carry the same one)."""
    by_ack: dict[int, list[int]] = {}
    for seg in trace:
        if seg["dir"] == "c" and seg["ack_off"] is not None:
            by_ack.setdefault(seg["ack_off"], []).append(seg["ts_ns"])
    deltas = []
    for row in sender_rows:
        if row["client_port"] == client_port and row["event"] == "ack" and by_ack.get(row["ack_off"]):
            deltas.append(min((row["ts_ns"] - ts for ts in by_ack[row["ack_off"]]), key=abs) / 1e3)
    return deltas


def test_tiny_run_gives_aligned_series_and_leaves_no_bpf(tmp_path, within):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_study(load_spec(tiny_spec(tmp_path)), out=run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete", manifest.get("error")
    requests = read_results(run_dir, "request")
    assert len(requests) == 4 and all(r["outcome"] == "complete" for r in requests), requests
    prog_ids, recordings = [], {}
    for row in requests:
        point, server, port = row["point_id"], row["server"], int(row["client_port"])
        series = run_dir / "results" / "series" / point / "r1"
        trace = read_trace(series / f"{server}-{row['family']}-{port}.csv")
        if server == "apache":
            rows = read_sender_series(series / "apache-tcp_probe.csv")
            deltas = sorted(_ack_deltas_us(rows, trace, port))
            assert len(deltas) >= 20, f"{row['family']}: {len(deltas)} ACKs matched"
            within("kernel probe − capture, median µs", statistics.median(deltas), 0.0, KERNEL_MEDIAN_US)
            within("kernel probe − capture, max µs", max(abs(d) for d in deltas), 0.0, KERNEL_MAX_US)
            mine = [r for r in rows if r["client_port"] == port]
            assert all(r["family"] == row["family"] for r in mine)
            assert max(r["snd_cwnd_pkts"] for r in mine) >= 10 and all(r["srtt_us"] > 0 for r in mine)
        else:
            rows = read_sender_series(series / "lean-lean_log.csv")
            deltas = sorted(_ack_deltas_us(rows, trace, port))
            assert len(deltas) >= 20, f"{row['family']}: {len(deltas)} ACKs matched"
            within("lean log − capture, earliest tenth µs", deltas[len(deltas) // 10], 0.0, LEAN_EARLIEST_TENTH_US)
            print(f"lean log − capture, {row['family']}: median {statistics.median(deltas):.0f} µs, "
                  f"at most {max(deltas):.0f} µs over {len(deltas)} ACKs")
        info = json.loads((run_dir / "points" / point / "r1" / "rep.json").read_text())
        probe = info["probes"]
        assert probe["stopped"] and probe["lost"] == 0 and probe["truncated"] == 0 and probe["drift_ok"], probe
        prog_ids += [i for i in probe["prog_ids"] if i]
        recordings[point] = (probe["sampler_pid"], probe["recording"])
        queue = read_queue_series(series / "bottleneck-queue.csv")
        assert queue and {q["link"].split("/")[0] for q in queue} >= {"r1"}
        assert max(q["max_backlog_pkts"] for q in queue) > 0  # 20 Mbit/s of MGEN and a GET queued at r1
    # one sampler for the run: its programs loaded once, a recording per repetition
    assert len({pid for pid, _ in recordings.values()}) == 1, recordings
    assert sorted(n for _, n in recordings.values()) == list(range(1, len(recordings) + 1)), recordings
    checks = {c["name"].split("@")[0]: c for c in manifest["fidelity"]["checks"]}
    assert checks["probe_complete"]["ok"] and checks["probe_clock_drift"]["ok"]
    # the clock drift: one row for the run, each repetition's row kept beside it
    assert [c["name"] for c in manifest["fidelity"]["checks"]].count("probe_clock_drift") == 1
    per_rep = [c for c in manifest["fidelity"]["per_repetition"] if c["name"].startswith("probe_clock_drift@")]
    assert len(per_rep) == len(recordings) and all(abs(c["value"]) < 1000 for c in per_rep)
    assert prog_ids and not any(_prog_alive(i) for i in prog_ids)
    assert namespaces_with(manifest["testbed"]["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == []


def _start_cli(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    spec = tiny_spec(tmp_path, repetitions=3)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "congestlab.cli", "run", str(spec), "--out", str(run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, run_dir


def _sampler_started(run_dir: Path, timeout_s: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for clock in run_dir.glob("points/*/r*/probes/clock.jsonl"):
            text = clock.read_text()
            if '"start"' in text:
                return json.loads(text.splitlines()[0])
        time.sleep(0.05)
    raise AssertionError("the sampler never started")


def _gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_run_ended_while_sampling_leaves_no_bpf(tmp_path, sig):
    """SIGTERM unwinds through the capture's stop; SIGKILL leaves the sampler to end with its
    parent (PR_SET_PDEATHSIG) and `congestlab clean` the namespaces and owner record."""
    proc, run_dir = _start_cli(tmp_path)
    try:
        start = _sampler_started(run_dir)
        ids = [i for i in start["prog_ids"] if i]
        assert ids and all(_prog_alive(i) for i in ids)
        proc.send_signal(sig)
        proc.wait(timeout=60)
        assert _gone(start["pid"]), "the sampler outlived its run"
        assert not any(_prog_alive(i) for i in ids)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        if sig == signal.SIGTERM:
            assert manifest["status"] == "interrupted"
            assert namespaces_with(manifest["testbed"]["prefix"]) == []
        else:
            subprocess.run([sys.executable, "-m", "congestlab.cli", "clean"], check=True, capture_output=True)
            assert namespaces_with(manifest["testbed"]["prefix"]) == []
        assert processes_mentioning(str(run_dir)) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if os.geteuid() == 0:
            subprocess.run([sys.executable, "-m", "congestlab.cli", "clean"], capture_output=True)
