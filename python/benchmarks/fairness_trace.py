"""Time series of one fairness pairing (bench_lean_fairness.py --trace DIR): why a share is what it is.

While both flows run it samples, every `interval_s`:
  - each kernel flow's TCP state in its namespace (`ss -tinH`: cwnd, ssthresh, RTT, unacked,
    retransmissions, bytes acknowledged);
  - the bottleneck FIFO on the router (`tc -s qdisc`: backlog in packets, drops so far).
Before and after it reads each kernel namespace's counters (`nstat -az`: HyStart's exits, the
retransmitted segments) and the FIFO's totals. The lean flow's side comes from leanweb's own
log: bytes in flight (highest sequence sent minus the cumulative ACK, from its `tx` and `ack`
lines), cwnd (the `ack` lines' cwnd_bytes), RTT samples, recovery entries with cwnd/ssthresh, slow-start exits, retransmissions by
kind. Everything is aligned on wall-clock time (the log's `unix_us`, the samplers' `date`).

Writes DIR/<tag>.json (summary + series) and DIR/<tag>.png (window, RTT, FIFO over time).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from congestlab.traffic.socket_stats import parse_ss_connections
from fairness_share import sample_chunks

# the integer counters of a kernel flow's `ss -tinH` line kept per sample
SS_FIELDS = ("cwnd", "ssthresh", "unacked", "bytes_acked", "lost", "mss")
HYSTART_COUNTERS = ("TcpExtTCPHystartTrainDetect", "TcpExtTCPHystartTrainCwnd", "TcpExtTCPHystartDelayDetect",
                    "TcpExtTCPHystartDelayCwnd", "TcpRetransSegs", "TcpExtTCPLossProbes", "TcpExtTCPTimeouts")


def sampler_argv(command: str, interval_s: float) -> list[str]:
    """A shell loop printing `T <unix time>` and then `command`'s output, every interval."""
    return ["sh", "-c", f'while :; do echo "T $(date +%s.%N)"; {command}; sleep {interval_s}; done']


def parse_ss(text: str, port: int) -> list[dict]:
    """`ss -tinH` samples -> the data connection's state per sample (the one with most bytes acked:
    iperf3 also keeps a control connection on the same port)."""
    out: list[dict] = []
    for t, sample in sample_chunks(text):
        best: dict | None = None
        for conn in parse_ss_connections(sample):
            if not any(end.endswith(f":{port}") for end in (conn.local, conn.peer)):
                continue
            row: dict = {"t": t, **{key: conn.counters[key] for key in SS_FIELDS if key in conn.counters}}
            m = re.search(r"\brtt:([\d.]+)/", conn.info)
            if m:
                row["rtt_ms"] = float(m.group(1))
            m = re.search(r"\bminrtt:([\d.]+)", conn.info)
            if m:
                row["minrtt_ms"] = float(m.group(1))
            m = re.search(r"\bretrans:\d+/(\d+)", conn.info)
            row["retrans_total"] = int(m.group(1)) if m else 0
            if best is None or row.get("bytes_acked", 0) > best.get("bytes_acked", 0):
                best = row
        if best is not None:
            out.append(best)
    return out


def parse_fifo(text: str) -> list[dict]:
    """`tc -s qdisc show dev X` samples -> the pfifo's backlog (packets) and drops so far."""
    out: list[dict] = []
    t = None
    in_fifo = False
    row: dict = {}
    for line in text.splitlines():
        if line.startswith("T "):
            t = float(line.split()[1])
            continue
        if line.startswith("qdisc "):
            in_fifo = line.split()[1] in ("pfifo", "bfifo", "tbf")
            row = {"t": t}
            continue
        if not in_fifo:
            continue
        m = re.search(r"\(dropped (\d+)", line)
        if m:
            row["dropped"] = int(m.group(1))
        m = re.search(r"backlog \S+ (\d+)p", line)
        if m:
            row["backlog_packets"] = int(m.group(1))
            out.append(row)
            in_fifo = False
    return out


def nstat(tb, node: str) -> dict[str, int]:
    text = tb.run(node, ["nstat", "-az", "--json"], check=False).stdout
    try:
        counters = json.loads(text)["kernel"]
    except (ValueError, KeyError):
        return {}
    return {k: int(v) for k, v in counters.items() if k in HYSTART_COUNTERS}


def fifo_totals(tb, router: str, dev: str) -> dict:
    rows = parse_fifo("T 0\n" + tb.run(router, ["tc", "-s", "qdisc", "show", "dev", dev], check=False).stdout)
    return rows[-1] if rows else {}


def unwrap(seq: int, base: int) -> int:
    return (seq - base) % (1 << 32)


def lean_series(log_path: Path) -> dict:
    """The bulk connection of a leanweb log: in-flight bytes over time and its loss responses."""
    conns: dict[int, dict] = {}
    for raw in log_path.open():
        if '"conn"' not in raw:
            continue
        e = json.loads(raw)
        c = conns.setdefault(e["conn"], {"base": None, "max": 0, "una": 0, "inflight": [], "rtt": [], "recovery": [],
                                         "phases": [], "retrans": {}, "bytes": 0, "first_tx_unix": None,
                                         "send_buffer_bytes": None, "retx_times": [], "cwnd": [], "acked_segments": {}})
        kind = e["event"]
        if kind == "tx" and not e["syn"]:
            if c["base"] is None:
                c["base"] = e["seq"]
                c["first_tx_unix"] = e["unix_us"] / 1e6
            end = unwrap(e["seq"], c["base"]) + e["len"] + (1 if e["fin"] else 0)
            if e["retransmission"]:
                c["retrans"][e["kind"]] = c["retrans"].get(e["kind"], 0) + 1
                c["retx_times"].append(e["unix_us"] / 1e6)
            c["max"] = max(c["max"], end)
            c["bytes"] += e["len"]
        elif kind == "ack" and c["base"] is not None:
            una = unwrap(e["ack"], c["base"])
            if una < 1 << 31:
                # segments this ACK covers, while the window is young (first 2 s): stretch ACKs
                # slow a slow start that credits at most L segments per ACK
                if e["unix_us"] / 1e6 - c["first_tx_unix"] < 2.0 and una > c["una"]:
                    n = str(min(-(-(una - c["una"]) // 1448), 16))
                    c["acked_segments"][n] = c["acked_segments"].get(n, 0) + 1
                c["una"] = max(c["una"], una)
            c["inflight"].append((e["unix_us"] / 1e6, c["max"] - c["una"]))
            if "cwnd_bytes" in e:
                c["cwnd"].append((e["unix_us"] / 1e6, min(e["cwnd_bytes"], 1 << 40)))
        elif kind == "rtt_sample":
            c["rtt"].append((e["unix_us"] / 1e6, e["rtt_us"] / 1000))
        elif kind == "recovery":
            c["recovery"].append({"t": e["unix_us"] / 1e6, "entered": e["entered"], "cwnd_bytes": e["cwnd_bytes"],
                                  "ssthresh_bytes": e["ssthresh_bytes"]})
        elif kind == "cc_phase":
            c["phases"].append({"t": e["unix_us"] / 1e6, "phase": e["phase"], "cwnd_bytes": e["cwnd_bytes"]})
        elif kind == "close":
            c["send_buffer_bytes"] = e.get("send_buffer_bytes")
        elif kind == "timeout":
            c["retrans"]["timeouts"] = c["retrans"].get("timeouts", 0) + 1
    if not conns:
        return {}
    bulk = max(conns.values(), key=lambda c: c["bytes"])
    return bulk


def thin(points: list, step_s: float) -> list:
    """One point per `step_s` (the last of each step), so a 30 s series stays small."""
    out: list = []
    bucket = None
    for p in points:
        b = int(p[0] // step_s)
        if out and b == bucket:
            out[-1] = p
        else:
            out.append(p)
            bucket = b
    return out


class Tracer:
    """Samplers for one pairing; `stop` then `report` once the flows have ended. `kernel_flows`:
    node -> the port its flow sends to (one `ss` sampler in each of those namespaces)."""

    def __init__(self, tb, out_dir: Path, tag: str, kernel_flows: dict[str, int], router: str, router_dev: str,
                 interval_s: float = 0.1):
        self.tb, self.out_dir, self.tag = tb, out_dir, tag
        self.kernel_flows, self.router, self.router_dev = kernel_flows, router, router_dev
        self.interval_s = interval_s
        self.procs: list = []
        self.files: dict[str, Path] = {}
        self.before: dict = {}
        self.flow_starts: dict[str, float] = {}

    def _counters(self) -> dict:
        return {"fifo": fifo_totals(self.tb, self.router, self.router_dev),
                **{f"nstat:{node}": nstat(self.tb, node) for node in self.kernel_flows}}

    def start(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.before = self._counters()
        samplers = {"fifo": (self.router, f"tc -s qdisc show dev {self.router_dev}")}
        for node, port in self.kernel_flows.items():
            samplers[f"ss-{node}"] = (node, f"ss -tinH '( dport = :{port} )'")
        for name, (node, command) in samplers.items():
            path = self.out_dir / f"{self.tag}.{name}.txt"
            self.files[name] = path
            with path.open("w") as out:
                self.procs.append(self.tb.start(node, sampler_argv(command, self.interval_s), stdout=out))

    def flow_started(self, label: str, at_unix_s: float) -> None:
        self.flow_starts[label] = at_unix_s

    def stop(self) -> None:
        for proc in self.procs:
            self.tb.stop(proc, grace_s=1.0)
        self.procs = []

    def report(self, lean_logs: dict[str, Path]) -> dict:
        after = self._counters()
        fifo = parse_fifo(self.files["fifo"].read_text())
        t0 = min(self.flow_starts.values()) if self.flow_starts else (fifo[0]["t"] if fifo else 0.0)
        summary: dict = {
            "flow_start_offsets_s": {k: round(v - t0, 3) for k, v in self.flow_starts.items()},
            "fifo_drops": after["fifo"].get("dropped", 0) - self.before["fifo"].get("dropped", 0),
        }
        series: dict = {"fifo": [(round(r["t"] - t0, 3), r.get("backlog_packets"), r.get("dropped")) for r in fifo]}
        kernels: dict[str, list[dict]] = {}
        for node, port in self.kernel_flows.items():
            rows = parse_ss(self.files[f"ss-{node}"].read_text(), port)
            kernels[node] = rows
            counters = {k: after[f"nstat:{node}"].get(k, 0) - self.before[f"nstat:{node}"].get(k, 0)
                        for k in HYSTART_COUNTERS}
            summary[node] = {
                "kernel_counters": counters,
                "retransmitted_segments": rows[-1]["retrans_total"] if rows else None,
                "cwnd_max": max((r.get("cwnd", 0) for r in rows), default=None),
                "first_ssthresh_seen": next((r["ssthresh"] for r in rows if "ssthresh" in r), None),
                "first_ssthresh_at_s": next((round(r["t"] - t0, 3) for r in rows if "ssthresh" in r), None),
                "minrtt_ms": min((r["minrtt_ms"] for r in rows if "minrtt_ms" in r), default=None),
            }
            series[node] = {"kernel": [(round(r["t"] - t0, 3), r.get("cwnd"), r.get("ssthresh"), r.get("unacked"),
                                        r.get("rtt_ms"), r.get("retrans_total")) for r in rows]}
        lean_series_cache: dict = {}
        mss = 1448
        for label, path in lean_logs.items():
            bulk = lean_series(path) if path.exists() else {}
            if not bulk:
                continue
            lean_series_cache[label] = bulk
            summary[label] = {
                "first_tx_s": round(bulk["first_tx_unix"] - t0, 3) if bulk["first_tx_unix"] else None,
                "retransmissions": bulk["retrans"],
                "recoveries": sum(1 for r in bulk["recovery"] if r["entered"]),
                "first_recovery": next((dict(r, t=round(r["t"] - t0, 3)) for r in bulk["recovery"] if r["entered"]), None),
                "phases": [dict(x, t=round(x["t"] - t0, 3), cwnd_segments=x["cwnd_bytes"] // mss) for x in bulk["phases"]],
                "send_buffer_bytes_at_close": bulk["send_buffer_bytes"],
                "acks_by_segments_covered_first_2s": dict(sorted(bulk["acked_segments"].items(), key=lambda kv: int(kv[0]))),
                "inflight_max_segments": max((b for _, b in bulk["inflight"]), default=0) // mss,
                "rtt_min_ms": min((r for _, r in bulk["rtt"]), default=None),
                "rtt_first_samples_ms": [(round(t - t0, 4), r) for t, r in bulk["rtt"][:10]],
            }
            series[label] = {
                "inflight_segments": [(round(t - t0, 3), b // mss) for t, b in thin(bulk["inflight"], self.interval_s)],
                "cwnd_segments": [(round(t - t0, 3), b // mss) for t, b in thin(bulk["cwnd"], self.interval_s)],
                "rtt_ms": [(round(t - t0, 3), r) for t, r in thin(bulk["rtt"], self.interval_s)],
                "recovery": [(round(r["t"] - t0, 3), r["entered"], r["cwnd_bytes"] // mss, r["ssthresh_bytes"] // mss)
                             for r in bulk["recovery"]],
            }
        summary["loss_events"] = loss_events(fifo, kernels, {label: c["retx_times"] for label, c in lean_series_cache.items()}, t0)
        out = {"summary": summary, "series": series}
        (self.out_dir / f"{self.tag}.json").write_text(json.dumps(out, indent=1))
        try:
            plot(series, self.out_dir / f"{self.tag}.png", self.tag)
        except Exception as err:  # noqa: BLE001 - a plot is a convenience, the JSON is the record
            print(f"trace plot {self.tag}: {err}")
        for path in self.files.values():
            subprocess.run(["gzip", "-f", str(path)], check=False)
        return summary


def loss_events(fifo: list[dict], kernels: dict[str, list[dict]], lean_retx: dict[str, list[float]], t0: float,
                gap_s: float = 1.0) -> list[dict]:
    """Drop episodes at the FIFO (drop increments closer than `gap_s` form one) and who lost
    what in each: the FIFO's drops, each kernel flow's retransmitted segments (ss) and each lean
    flow's retransmissions (its log) from the episode's start to `gap_s` after its end."""
    episodes: list[list[float]] = []
    for prev, cur in zip(fifo, fifo[1:]):
        dropped = (cur.get("dropped") or 0) - (prev.get("dropped") or 0)
        if dropped <= 0:
            continue
        if episodes and cur["t"] - episodes[-1][1] < gap_s:
            episodes[-1][1] = cur["t"]
            episodes[-1][2] += dropped
        else:
            episodes.append([prev["t"], cur["t"], dropped])

    def retrans_at(rows: list[dict], t: float) -> int:
        return max((r["retrans_total"] for r in rows if r["t"] <= t), default=0)

    out = []
    for start, end, dropped in episodes:
        until = end + gap_s
        row = {"t": round(start - t0, 2), "fifo_drops": dropped}
        for node, rows in kernels.items():
            row[f"{node}_retransmitted"] = retrans_at(rows, until) - retrans_at(rows, start)
        for label, times in lean_retx.items():
            row[f"{label}_retransmitted"] = sum(1 for t in times if start <= t <= until)
        out.append(row)
    return out


def plot(series: dict, path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    win, rtt, fifo = axes
    for label, s in series.items():
        if label == "fifo":
            continue
        if "kernel" in s:
            k = s["kernel"]
            win.plot([r[0] for r in k], [r[1] for r in k], label=f"{label} (kernel) cwnd", lw=1)
            win.plot([r[0] for r in k], [r[3] for r in k], label=f"{label} (kernel) unacked", lw=0.8, ls=":")
            rtt.plot([r[0] for r in k if r[4]], [r[4] for r in k if r[4]], label=f"{label} (kernel) srtt", lw=1)
            continue
        if s["cwnd_segments"]:
            win.plot([p[0] for p in s["cwnd_segments"]], [p[1] for p in s["cwnd_segments"]], label=f"{label} cwnd", lw=1)
        win.plot([p[0] for p in s["inflight_segments"]], [p[1] for p in s["inflight_segments"]],
                 label=f"{label} in flight", lw=0.8, ls=":")
        rtt.plot([p[0] for p in s["rtt_ms"]], [p[1] for p in s["rtt_ms"]], label=f"{label} rtt", lw=0.8)
        ent = [r for r in s["recovery"] if r[1]]
        win.scatter([r[0] for r in ent], [r[2] for r in ent], marker="v", s=12, label=f"{label} cwnd at recovery")
    win.set_ylabel("segments")
    win.legend(fontsize=7)
    rtt.set_ylabel("RTT, ms")
    rtt.legend(fontsize=7)
    f = series.get("fifo", [])
    fifo.plot([r[0] for r in f], [r[1] for r in f], label="FIFO backlog, packets", lw=1)
    ax2 = fifo.twinx()
    if f and f[0][2] is not None:
        ax2.plot([r[0] for r in f], [(r[2] or 0) - (f[0][2] or 0) for r in f], color="red", lw=0.8, label="drops")
    ax2.set_ylabel("drops so far")
    fifo.set_ylabel("packets")
    fifo.set_xlabel("s since the first flow started")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
