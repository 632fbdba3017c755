"""MGEN background traffic: flows from a level's mix, scripts, runs and log parsing.

Traps of Debian's MGEN 5.02b: its default TTL of 3 kills routed flows, so the script sets
TTL 64 globally; its IPv6 sockets need the resolver shim (mgen_ipv6_shim.c, built by
`make build`: glibc 2.26 dropped the resolver flag MGEN reads); sinks start before sources.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from congestlab.errors import ToolError
from congestlab.paths import REPO_ROOT
from congestlab.spec.workloads import MgenWorkload

CLASSES = ("tcp4", "tcp6", "udp4", "udp6")
SHIM_PATH = Path(os.environ.get("CONGESTLAB_MGEN_SHIM", REPO_ROOT / "target" / "mgen" / "libmgen_ipv6_shim.so"))


@dataclass(frozen=True)
class Flow:
    flow_id: int
    cls: str  # tcp4 | tcp6 | udp4 | udp6
    rate_bps: float  # application payload rate
    payload_bytes: int
    port: int

    @property
    def proto(self) -> str:
        return "TCP" if self.cls.startswith("tcp") else "UDP"

    @property
    def family(self) -> str:
        return "v4" if self.cls.endswith("4") else "v6"

    @property
    def messages_per_s(self) -> float:
        return self.rate_bps / (8 * self.payload_bytes)


def allocate_flow_counts(class_rates: dict[str, float], flows: int) -> dict[str, int]:
    """Split `flows` over the classes with traffic: at least one each, the rest in
    proportion to rate (largest remainder)."""
    active = {c: r for c, r in class_rates.items() if r > 0}
    if not active:
        return {}
    if flows < len(active):
        raise ValueError(f"{flows} flows cannot carry {len(active)} traffic classes")
    counts = {c: 1 for c in active}
    spare = flows - len(active)
    total = sum(active.values())
    shares = {c: spare * r / total for c, r in active.items()}
    for c in active:
        counts[c] += int(shares[c])
    left = flows - sum(counts.values())
    for c in sorted(active, key=lambda c: shares[c] - int(shares[c]), reverse=True)[:left]:
        counts[c] += 1
    return counts


def build_flows(background: MgenWorkload) -> list[Flow]:
    """The workload's flows. Within a class, flow k gets weight k+1, so the flows run at
    different rates (as in the study) that add up to the class rate exactly."""
    payload = {
        "tcp4": background.tcp_payload_v4_bytes,
        "tcp6": background.tcp_payload_v6_bytes,
        "udp4": background.udp_payload_v4_bytes,
        "udp6": background.udp_payload_v6_bytes,
    }
    rates = background.class_rates_bps()
    counts = allocate_flow_counts(rates, background.flows)
    flows: list[Flow] = []
    for cls in CLASSES:
        n = counts.get(cls, 0)
        weights = [k + 1 for k in range(n)]
        for w in weights:
            flow_id = len(flows) + 1
            flows.append(Flow(flow_id, cls, rates[cls] * w / sum(weights), payload[cls],
                              background.base_port + flow_id))
    return flows


def sink_script(flows: list[Flow]) -> str:
    # TTL 64 here too: an IPv6 listener's accepted sockets inherit MGEN's hop limit of 3,
    # so without it the sink's SYN-ACKs die behind the third router
    lines = ["TTL 64"] + [f"0.0 LISTEN {f.proto} {f.port}" for f in flows]
    return "\n".join(lines) + "\n"


def source_script(flows: list[Flow], dst_addr: str, duration_s: float) -> str:
    """Every flow on at 0 s and off at `duration_s`: the traffic stops by itself."""
    # The global TTL command: MGEN's default TTL of 3 dies behind the study's 4 routers,
    # and a per-event TTL option is not applied to TCP connections (their SYNs die).
    lines = ["TTL 64"]
    for f in flows:
        lines.append(f"0.0 ON {f.flow_id} {f.proto} DST {dst_addr}/{f.port} "
                     f"PERIODIC [{f.messages_per_s:.3f} {f.payload_bytes}]")
    lines += [f"{duration_s:.3f} OFF {f.flow_id}" for f in flows]
    return "\n".join(lines) + "\n"


def mgen_argv(script: Path, log: Path, ipv6: bool) -> list[str]:
    exe = shutil.which("mgen") or "mgen"
    return [exe, *(["ipv6"] if ipv6 else []), "input", str(script), "output", str(log)]


def mgen_env(base: dict[str, str]) -> dict[str, str]:
    if not SHIM_PATH.exists():
        raise ToolError(["mgen"], None, f"{SHIM_PATH} is missing; run `make build`")
    env = dict(base)
    env["LD_PRELOAD"] = str(SHIM_PATH)
    return env


def mgen_version() -> str:
    """The Debian package version (MGEN prints its own only once it runs a script)."""
    if not shutil.which("mgen"):
        raise ToolError(["mgen"], None)
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "mgen"], capture_output=True, text=True, timeout=5)
    return proc.stdout.strip() or "unknown"


_RECV = re.compile(rb"^(\d\d):(\d\d):(\d\d\.\d+) RECV proto>(\w+) flow>(\d+) (?:seq>(\d+) )?.*?size>(\d+)")


@dataclass
class FlowRate:
    flow_id: int
    cls: str
    requested_bps: float
    achieved_bps: float  # payload received at the sink
    messages: int
    sent_messages: int = 0  # the span of the sequence numbers received: what the source sent meanwhile
    sent_bps: float = 0.0

    @property
    def lost_messages(self) -> int:
        return max(0, self.sent_messages - self.messages)


def path_loss(rates: list[FlowRate]) -> tuple[int, float]:
    """(messages the flows sent, % of them lost on the way) over these rates."""
    sent = sum(r.sent_messages for r in rates)
    return sent, (sum(r.lost_messages for r in rates) / sent * 100 if sent else 0.0)


def parse_sink_log(log: Path, flows: list[Flow], window_s: tuple[float, float], start_offset: int = 0
                   ) -> list[FlowRate]:
    """Achieved payload rate per flow from an MGEN sink log, counting messages received
    inside `window_s` (UTC seconds of the day, the log's own clock). A log that is still
    growing is read from `start_offset` (its size when the window opened) to its end.
    What the source sent meanwhile is the span of the sequence numbers received (MGEN numbers
    each flow's messages from 0): a UDP message the bottleneck dropped leaves a gap, so sent
    minus received is what the path lost, not what the source failed to send."""
    start, end = window_s
    span = max(end - start, 1e-9)
    got_bytes = {f.flow_id: 0 for f in flows}
    got_msgs = {f.flow_id: 0 for f in flows}
    seqs: dict[int, list[int]] = {}  # flow -> [lowest, highest] sequence number received
    sizes: dict[int, int] = {}
    opener = gzip.open if log.suffix == ".gz" else open
    with opener(log, "rb") as fh:
        if start_offset:
            fh.seek(start_offset)
            fh.readline()  # the first line may be cut
        for line in fh:
            m = _RECV.match(line)
            if not m:
                continue
            t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
            if t < start - 43200:  # the log crossed midnight
                t += 86400
            if start <= t <= end:
                fid = int(m.group(5))
                if fid in got_bytes:
                    size = int(m.group(7))
                    got_bytes[fid] += size
                    got_msgs[fid] += 1
                    sizes[fid] = size
                    if m.group(6) is not None:
                        seq = int(m.group(6))
                        low_high = seqs.setdefault(fid, [seq, seq])
                        low_high[0], low_high[1] = min(low_high[0], seq), max(low_high[1], seq)
    out = []
    for f in flows:  # a log without sequence numbers: sent = received
        sent = seqs[f.flow_id][1] - seqs[f.flow_id][0] + 1 if f.flow_id in seqs else got_msgs[f.flow_id]
        out.append(FlowRate(f.flow_id, f.cls, f.rate_bps, got_bytes[f.flow_id] * 8 / span, got_msgs[f.flow_id],
                            sent, sent * sizes.get(f.flow_id, 0) * 8 / span))
    return out


def compress(path: Path) -> Path:
    """MGEN logs one line per message (~1 MB/s at 75 Mbit/s): keep them gzipped."""
    target = path.with_suffix(path.suffix + ".gz")
    with open(path, "rb") as src, gzip.open(target, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    path.unlink()
    return target


def flow_table(flows: list[Flow]) -> list[dict]:
    return [asdict(f) | {"proto": f.proto, "family": f.family} for f in flows]
