"""Small run directories with known answers (pcap_builder's frames, record_fixtures' records and
spec): a GET per family per repetition, paced at a shaped link's rate, with rep.json holding
tcpdump's counts of what it wrote, as the runner records them (runner/captures.py)."""

from __future__ import annotations

import json
from pathlib import Path

from pcap_builder import ACK, FIN, MSS, PSH, SYN, Conversation, Frame, write_frames

from congestlab.rundir import FORMAT_VERSION, RAW_KIND
from record_fixtures import get_row, tiny_stored_spec

RATE_BPS = 20_000_000  # the tiny network's bottleneck (spec_fixtures.py)
T0 = 1_700_000_000.0


def paced_get(family: str, t0: float, client_port: int, segments: int = 100, rtt_s: float = 0.02,
              rate_bps: float = RATE_BPS) -> tuple[Conversation, dict]:
    """A GET as the server's capture sees it on a shaped link: handshake, the request, four
    segments at line speed (the shaper's burst), then one segment per frame time at
    `rate_bps` with the client's ACK one RTT later for every second one, then the FIN.
    Returns the conversation and the raw record curl would have written."""
    conv = Conversation(family, client_port=client_port)
    mss, get_len = MSS[family], 120
    conv.segment(t0, True, 0, 0, SYN, 0)
    conv.segment(t0 + 0.00005, False, 0, 1, SYN | ACK, 0)
    t_get = t0 + rtt_s
    conv.segment(t_get - 0.00001, True, 1, 1, ACK, 0)
    conv.segment(t_get, True, 1, 1, ACK | PSH, get_len)
    frame_s = (mss + 100) * 8 / rate_bps
    sent = []
    for i in range(segments):
        ts = t_get + 0.0001 + (i * 0.00002 if i < 4 else i * frame_s)
        sent.append(ts)
        conv.segment(ts, False, 1 + i * mss, 1 + get_len, ACK, mss)
    for i in range(1, segments, 2):  # the burst passes the shaper at line speed
        conv.segment(sent[i] + (frame_s if i >= 4 else 0) + rtt_s, True, 1 + get_len, 1 + (i + 1) * mss, ACK, 0)
    t_last = sent[-1] + frame_s + rtt_s
    conv.segment(t_last + 0.001, True, 1 + get_len, 1 + segments * mss, FIN | ACK, 0)
    conv.segment(t_last + 0.0012, False, 1 + segments * mss, 2 + get_len, FIN | ACK, 0)
    conv.segment(t_last + 0.0013, True, 2 + get_len, 2 + segments * mss, ACK, 0)
    body = segments * mss - 300  # the rest is the response's header
    raw = get_row(family=family, file_kib=body // 1024, start_ts=t0 - 0.0005, end_ts=t_last + 0.002,
                  client_port=client_port, local_port=client_port, size_download=body, time_total_s=t_last - t0)
    return conv, raw


def manifest(reps: int, points: tuple[str, ...] = ("p1",), rate_bps: int | None = None, **extra) -> dict:
    """A complete run's manifest: each point planned for `reps` repetitions in a run_order;
    `rate_bps`: the bottleneck's rate in place of the tiny network's."""
    spec = tiny_stored_spec()
    if rate_bps is not None:
        spec["topology"]["nodes"][0]["links"][0]["rate_bps"] = rate_bps
    order = [{"run": i + 1, "point": p, "repetition": r, "unit": 0, "round": f"u0.r{r}", "block": 1}
             for i, (r, p) in enumerate((r, p) for r in range(1, reps + 1) for p in points)]
    return {"format_version": FORMAT_VERSION, "status": "complete", "spec": spec, "axes": [], "servers": {},
            "points": [{"id": p, "experiment": "e", "axes": {}, "settings": {}, "repetitions": reps,
                        "workloads": ["get"]} for p in points],
            "run_order": order} | extra


def write_rep(run: Path, rep: int, frames: list[Frame], raws: list[dict], point: str = "p1",
              captured: int | None = None) -> Path:
    """A repetition's capture (snaplen 128), records and rep.json, which says tcpdump wrote
    `captured` packets (default: the frames written)."""
    rep_dir = run / "points" / point / f"r{rep}"
    (rep_dir / "pcap").mkdir(parents=True)
    write_frames(rep_dir / "pcap" / "www.pcap", frames, snaplen=128)
    (rep_dir / "records.jsonl").write_text("".join(json.dumps({"kind": RAW_KIND, "row": r}) + "\n" for r in raws))
    counts = {"packets_captured": len(frames) if captured is None else captured,
              "packets_received_by_filter": len(frames), "packets_dropped_by_kernel": 0}
    (rep_dir / "rep.json").write_text(json.dumps({"servers": {}, "captures": {"www": {"argv": [], "tcpdump": counts}}}))
    return rep_dir


def sound_run(tmp_path: Path, reps: int = 2, rtt_s: float = 0.02, rate_bps: int = RATE_BPS,
              segments: int = 100) -> Path:
    """A run of one point: a v4 and a v6 GET per repetition, each paced at `rate_bps`."""
    run = tmp_path / "run"
    for rep in range(1, reps + 1):
        t0 = T0 + 10 * rep
        v4, raw4 = paced_get("v4", t0, 40000 + rep, rtt_s=rtt_s, rate_bps=rate_bps, segments=segments)
        v6, raw6 = paced_get("v6", t0 + 2, 41000 + rep, rtt_s=rtt_s, rate_bps=rate_bps, segments=segments)
        write_rep(run, rep, v4.frames + v6.frames, [raw4, raw6])
    (run / "manifest.json").write_text(json.dumps(manifest(reps, rate_bps=None if rate_bps == RATE_BPS
                                                           else rate_bps)))
    return run


SMALL_REPORT = {"metrics": {"delay": {"kind": "request", "column": "delay_ms", "where": {"outcome": "complete"}}},
                "tables": [{"id": "delay", "title": "Delay", "metrics": ["delay"], "rows": "family"}]}


def small_lean_run(tmp_path: Path) -> Path:
    """sound_run's two repetitions served by a lean server with its log (every connection
    opened, none retransmitting) and a report of one table and no plot: every reader of a run
    directory has its files, and each reads them in a fraction of a second."""
    run = sound_run(tmp_path)
    data = json.loads((run / "manifest.json").read_text())
    data["servers"] = {"www": [{"instance": "i1", "kind": "lean", "port": 80, "log_dir": "logs/servers/www-i1"}]}
    data["spec"]["report"] = SMALL_REPORT
    data["spec"]["published"] = [{"family": family, "delay": 80.0} for family in ("v4", "v6")]  # for `distance`
    (run / "manifest.json").write_text(json.dumps(data))
    start = {"event": "start", "t_us": 0, "unix_us": int(T0 * 1e6), "rto_alpha": 0.125, "rto_beta": 0.25,
             "rto_k": 4.0, "rto_g_us": 250, "rto_initial_ms": 1000, "rto_min_ms": 200, "rto_max_ms": 60000,
             "sampling": "all", "recovery": "sack"}
    events = [start]
    for rep in (1, 2):
        info_path = run / "points" / "p1" / f"r{rep}" / "rep.json"
        info = json.loads(info_path.read_text())
        info_path.write_text(json.dumps(info | {"servers": {"www": "i1"}}))
        for conn, (family, addr, port, t0) in enumerate(
                (("ipv4", "10.0.0.10", 40000 + rep, T0 + 10 * rep), ("ipv6", "[fd00::a]", 41000 + rep, T0 + 10 * rep + 2))):
            events.append({"event": "open", "conn": 10 * rep + conn, "t_us": int((t0 - T0) * 1e6),
                           "unix_us": int(t0 * 1e6), "peer": f"{addr}:{port}", "family": family})
    log = run / "logs" / "servers" / "www-i1" / "leanweb.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    return run
