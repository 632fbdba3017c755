"""The panels' time-sequence data of a lean server's GET against leanweb's own log
(docs/reports.md, "The bare server's go-back-N after an RTO"): every data segment the log
says it sent is looked up in the GET's segment trace (results/series/<point>/r<rep>/
lean-<family>-<port>.csv) by its sequence number, relative to the SYN-ACK's as the trace's,
nearest in time; and for every `timeout` line, the trace's first retransmission after it is
compared with the log's first retransmission after it (the go-back-N start) and the client's
ACK level then, and the retransmissions up to the next timeout are counted on both sides.

    python3 -m congestlab.bench.lean_log_vs_trace RUN_DIR POINT REP
"""

from __future__ import annotations

import bisect
import csv
import json
import statistics
import sys
from pathlib import Path

SEQ_SPACE = 2**32


def read_log(paths: list[Path]) -> list[dict]:
    events = []
    for path in paths:
        for line in path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by the server's exit
    return events


def compare(trace: list[dict], events: list[dict], client_port: int) -> dict:
    """`trace`: the GET's segment-trace rows (docs/data-format.md); `events`: leanweb's log
    lines (docs/leanweb.md, "Event log"), of any connections."""
    conn = next(e["conn"] for e in events if e.get("event") == "open" and str(e["peer"]).endswith(f":{client_port}"))
    mine = [e for e in events if e.get("conn") == conn]
    isn = next(e["seq"] for e in mine if e["event"] == "tx" and e.get("syn"))

    def rel(seq: int) -> int:
        return (seq - isn) % SEQ_SPACE

    timeouts = [e for e in mine if e["event"] == "timeout"]
    retransmitted = [e for e in mine if e["event"] == "tx" and e.get("retransmission")]
    log_data = [e for e in mine if e["event"] == "tx" and e.get("len", 0) > 0]
    server = [r for r in trace if r["dir"] == "s"]
    data = [r for r in server if int(r["payload_bytes"]) > 0]
    trace_retx = [r for r in data if r["retransmitted"] == "1"]
    acks = [(int(r["ts_ns"]), int(r["ack_off"])) for r in trace if r["dir"] == "c" and r["ack_off"]]

    by_start: dict[int, list[int]] = {}
    for r in data:
        by_start.setdefault(int(r["seq_off"]), []).append(int(r["ts_ns"]))
    offsets_us, unmatched, taken = [], 0, set()
    for e in log_data:  # each logged segment to the trace's copy with its start, nearest in time
        start = rel(e["seq"])
        free = [t for t in by_start.get(start, []) if (start, t) not in taken]
        if not free:
            unmatched += 1
            continue
        t = min(free, key=lambda t: abs(t - e["unix_us"] * 1000))
        taken.add((start, t))
        offsets_us.append((t - e["unix_us"] * 1000) / 1000)

    retx_ts = [int(r["ts_ns"]) for r in trace_retx]
    syn_acks = [int(r["ts_ns"]) for r in server if "S" in r["flags"]]
    rtos = []
    for i, t in enumerate(timeouts):
        t_ns = t["unix_us"] * 1000
        end_ns = timeouts[i + 1]["unix_us"] * 1000 if i + 1 < len(timeouts) else float("inf")
        first = next((e for e in retransmitted if e["unix_us"] >= t["unix_us"]), None)
        rto = {"t_ns": t_ns, "rto_us": t["rto_us"], "outstanding_bytes": t["outstanding_bytes"],
               "log_first_kind": first.get("kind") if first else None}
        if first is not None and first.get("syn"):  # the SYN-ACK's timer: the trace's next SYN-ACK
            later = [s for s in syn_acks if s >= t_ns]
            rto |= {"matched": bool(later), "after_us": (later[0] - t_ns) / 1000 if later else None}
        else:
            j = bisect.bisect_left(retx_ts, t_ns)
            got = trace_retx[j] if j < len(trace_retx) else None
            ack_then = max((a for ts, a in acks if ts < t_ns), default=None)
            log_start = rel(first["seq"]) if first else None
            rto |= {"log_first_seq_off": log_start, "trace_first_seq_off": int(got["seq_off"]) if got else None,
                    "ack_off_then": ack_then,
                    "after_us": (int(got["ts_ns"]) - t_ns) / 1000 if got else None,
                    "log_retransmissions": sum(t_ns <= e["unix_us"] * 1000 < end_ns
                                               for e in retransmitted if e.get("len", 0) > 0),
                    "trace_retransmissions": sum(t_ns <= ts < end_ns for ts in retx_ts)}
            rto["matched"] = got is not None and log_start == rto["trace_first_seq_off"] == ack_then
        rtos.append(rto)
    return {"conn": conn, "log_data_segments": len(log_data),
            "log_retransmissions": sum(1 for e in retransmitted if e.get("len", 0) > 0),
            "trace_data_segments": len(data), "trace_retransmissions": len(trace_retx),
            "matched_segments": len(offsets_us), "unmatched_segments": unmatched,
            "offset_us": {"median": statistics.median(offsets_us), "min": min(offsets_us), "max": max(offsets_us)}
            if offsets_us else None,
            "rtos": rtos}


def main() -> None:
    if len(sys.argv) != 4 or not Path(sys.argv[1], "manifest.json").exists() or not sys.argv[3].isdigit():
        print("usage: python3 -m congestlab.bench.lean_log_vs_trace RUN_DIR POINT REP", file=sys.stderr)
        raise SystemExit(2)
    run_dir, point, rep = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    traces = sorted((run_dir / "results" / "series" / point / f"r{rep}").glob("lean-v[46]-*.csv"))
    logs = sorted(run_dir.glob("logs/servers/lean*/leanweb.jsonl"))
    if not traces or not logs:
        print(f"{run_dir}: no lean GET trace for {point} r{rep}, or no leanweb log", file=sys.stderr)
        raise SystemExit(11)
    events = read_log(logs)
    for path in traces:
        with path.open() as fh:
            trace = list(csv.DictReader(fh))
        port = int(path.stem.split("-")[2])
        r = compare(trace, events, port)
        print(f"{path.relative_to(run_dir)}: leanweb conn {r['conn']}")
        print(f"  data segments (retransmissions): log {r['log_data_segments']} ({r['log_retransmissions']}), "
              f"trace {r['trace_data_segments']} ({r['trace_retransmissions']}); "
              f"matched {r['matched_segments']}, unmatched {r['unmatched_segments']}")
        if r["offset_us"]:
            o = r["offset_us"]
            print(f"  trace - log time: median {o['median']:.1f} us, {o['min']:.1f} .. {o['max']:.1f} us")
        for i, t in enumerate(r["rtos"], 1):
            if "ack_off_then" not in t:
                print(f"  RTO {i}: the SYN-ACK's (log {t['log_first_kind']}); trace's next SYN-ACK "
                      f"{t['after_us']} us after; matched {t['matched']}")
                continue
            print(f"  RTO {i}: timer now {t['rto_us'] / 1e6:g} s, {t['outstanding_bytes']} B outstanding; first "
                  f"retransmission seq_off log {t['log_first_seq_off']} trace {t['trace_first_seq_off']} "
                  f"(ACK level {t['ack_off_then']}), {t['after_us']} us after the timeout line; retransmissions "
                  f"to the next RTO log {t['log_retransmissions']} trace {t['trace_retransmissions']}; "
                  f"matched {t['matched']}")
        print(f"  RTOs matched: {sum(t['matched'] for t in r['rtos'])} of {len(r['rtos'])}")


if __name__ == "__main__":
    main()
