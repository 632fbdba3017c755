"""leanweb's GSO super-frames (`--gso on`, crates/leanweb/src/gso.rs) put exactly the segments
on the wire that it writes one by one with `--gso off`.

The studies' testbed (congestlab.testbed): leanweb `--profile modern` on a user-stack node,
the router's link to the client's switch is the 100 Mbit/s bottleneck with its
packet-counted FIFO. Per setting, one loss-free 320 KiB fetch over IPv4 and one over IPv6,
captured in full at the node's veth (the studies' capture point). Checked:
- with GSO and without, the captures hold the same segments, segment by segment: relative
  sequence and ack numbers, payload length, flags (PSH where leanweb puts it), window, the
  TCP options' layout, and the IPv4 identification relative to the connection's first.
  Where segments end depends on timing when the client's window or a byte-counted cwnd
  leaves less than a segment (two fetches of the same setting can differ), so these two
  fetches cap the sender at 32 segments in flight (`send_window_segments`), below the
  client's window and the initial cwnd's growth: every segment is then full-sized but the
  last, in both;
- in each capture (also of a third fetch with GSO and modern's defaults): IPv4 identifications +1 per segment of a connection, every IP and TCP
  checksum valid (the veth's tx-checksumming is off on a user-stack node), no frame above
  the MTU;
- leanweb's log: one `tx` line per captured segment that carries data or SYN/FIN, in order;
  with GSO most segments did go in super-frames (`gso_segments` in the `stop` line);
- the bottleneck FIFO counted at least as many packets as the captures hold toward the
  client: it saw single segments, not super-frames.
"""

from __future__ import annotations

import json
import os
import re
import struct
import time
from pathlib import Path

import dpkt
import pytest

from congestlab.servers.factory import make_server
from congestlab.servers.files import file_name, write_files
from congestlab.spec.models import TopologySpec
from congestlab.spec.servers import ServerSpec
from congestlab.testbed import Testbed

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]

FILE_KIB = 320
TOPOLOGY = {
    "switches": [{"name": "sc", "subnet4": "10.63.0.0/24", "subnet6": "fd00:63::/64"},
                 {"name": "ss", "subnet4": "10.64.0.0/24", "subnet6": "fd00:64::/64"}],
    "nodes": [
        {"name": "r", "kind": "router",
         "links": [{"switch": "sc", "host_id": 1, "rate_bps": 100_000_000, "queue_packets": 1000},
                   {"switch": "ss", "host_id": 1}]},
        {"name": "c", "links": [{"switch": "sc", "host_id": 10}]},
        {"name": "l", "links": [{"switch": "ss", "host_id": 11}], "stack": "user"},
    ],
}


def checksum_ok(data: bytes) -> bool:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total > 0xffff:
        total = (total & 0xffff) + (total >> 16)
    return total == 0xffff


def server_segments(pcap: Path) -> list[dict]:
    """The server's TCP segments in a full capture, with what the comparison needs."""
    rows = []
    with open(pcap, "rb") as fh:
        for _, buf in dpkt.pcap.Reader(fh):
            ip = dpkt.ethernet.Ethernet(buf).data
            v6 = isinstance(ip, dpkt.ip6.IP6)
            if not isinstance(ip, (dpkt.ip.IP, dpkt.ip6.IP6)) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            if tcp.sport != 80:
                continue
            raw = bytes(tcp)
            if v6:
                pseudo = ip.src + ip.dst + struct.pack("!IxxxB", len(raw), 6)
                ip_ok = True
            else:
                pseudo = ip.src + ip.dst + struct.pack("!xBH", 6, len(raw))
                ip_ok = checksum_ok(bytes(ip)[:ip.hl * 4])
            options = [(kind, len(value)) for kind, value in dpkt.tcp.parse_opts(tcp.opts)]
            rows.append({"seq": tcp.seq, "ack": tcp.ack, "len": len(tcp.data), "flags": tcp.flags, "win": tcp.win,
                         "options": options, "id": None if v6 else ip.id, "frame": len(buf),
                         "checksums_ok": ip_ok and checksum_ok(pseudo + raw), "v6": v6})
    return rows


def relative(rows: list[dict]) -> list[tuple]:
    """A connection's segments relative to its first (the SYN-ACK)."""
    seq0, ack0, id0 = rows[0]["seq"], rows[0]["ack"], rows[0]["id"]
    return [((r["seq"] - seq0) % 2**32, (r["ack"] - ack0) % 2**32, r["len"], r["flags"], r["win"], tuple(r["options"]),
             None if id0 is None else (r["id"] - id0) % 2**16) for r in rows]


def fifo_packets(tb: Testbed) -> int:
    dev = next(i.dev for i in tb.layout.nodes["r"].interfaces if i.switch == "sc")
    out = tb.run("r", ["tc", "-s", "qdisc", "show", "dev", dev]).stdout
    match = re.search(r"qdisc pfifo .*?Sent \d+ bytes (\d+) pkt", out, re.S)
    assert match, out
    return int(match.group(1))


def fetch_captured(tb: Testbed, tmp_path: Path, docroot: Path, tag: str, knobs: dict) -> dict:
    spec = ServerSpec(name="l", kind="lean", node="l", knobs={"mac": "02:00:00:00:00:0b", "profile": "modern", **knobs})
    server = make_server(spec, tb, tmp_path, docroot, tag)
    dev = tb.layout.nodes["l"].interfaces[0].dev
    result = {}
    server.start()
    try:
        server.wait_started()
        for family in ("v4", "v6"):
            tb.ping("c", "l", family)
            pcap = tmp_path / f"{tag}-{family}.pcap"
            err = tmp_path / f"{tag}-{family}.tcpdump.err"
            with open(err, "wb") as err_fh:
                dump = tb.start("l", ["tcpdump", "-i", dev, "-s", "0", "-n", "-U", "--immediate-mode", "-w", str(pcap),
                                      "tcp port 80"], stderr=err_fh)
            try:
                deadline = time.monotonic() + 5
                while "listening on" not in err.read_text(errors="replace") and time.monotonic() < deadline:
                    time.sleep(0.02)
                fifo_before = fifo_packets(tb)
                host = tb.address("l", family)
                url = f"http://{host}/{file_name(FILE_KIB)}" if family == "v4" else f"http://[{host}]/{file_name(FILE_KIB)}"
                out = tb.run("c", ["curl", "-sS", "--max-time", "20", "-H", "Connection: close", "-o", "/dev/null",
                                   "-w", "%{http_code} %{size_download}", url]).stdout
                assert out == f"200 {FILE_KIB * 1024}", out
                time.sleep(0.3)  # the last segments reach the capture
                fifo = fifo_packets(tb) - fifo_before
            finally:
                tb.stop(dump)
            result[family] = {"rows": server_segments(pcap), "fifo_packets": fifo}
    finally:
        server.stop()
    log = tmp_path / "logs" / "servers" / f"l-{tag}" / "leanweb.jsonl"
    events = [json.loads(line) for line in log.read_text().splitlines()]
    result["tx"] = [(e["seq"], e["len"]) for e in events if e["event"] == "tx"]
    result["stop"] = next(e for e in events if e["event"] == "stop")
    return result


def test_gso_puts_the_same_segments_on_the_wire_as_single_frames(tmp_path):
    docroot = tmp_path / "www"
    write_files(docroot, [FILE_KIB])
    with Testbed(TopologySpec.model_validate(TOPOLOGY)) as tb:
        runs = {tag: fetch_captured(tb, tmp_path, docroot, tag, knobs) for tag, knobs in (
            ("gso", {"gso": "on", "send_window_segments": 32}), ("plain", {"gso": "off", "send_window_segments": 32}),
            ("default", {}))}
    for gso, run in runs.items():
        rows_all = []
        for family in ("v4", "v6"):
            rows = run[family]["rows"]
            rows_all += rows
            assert rows and rows[0]["flags"] & dpkt.tcp.TH_SYN, (gso, family)
            assert all(r["checksums_ok"] for r in rows), (gso, family, [r for r in rows if not r["checksums_ok"]][:3])
            assert max(r["frame"] for r in rows) <= 1514, (gso, family)
            if family == "v4":
                ids = [r["id"] for r in rows]
                assert all((b - a) % 2**16 == 1 for a, b in zip(ids, ids[1:])), (gso, ids[:20])
            # the FIFO on the router's egress saw each segment as one packet
            assert run[family]["fifo_packets"] >= len(rows), (gso, family, run[family]["fifo_packets"], len(rows))
        # one tx line per segment carrying data, SYN or FIN, in the order the capture has them
        on_wire = [(r["seq"], r["len"]) for r in rows_all if r["len"] or r["flags"] & (dpkt.tcp.TH_SYN | dpkt.tcp.TH_FIN)]
        assert run["tx"] == on_wire, gso
    for tag in ("gso", "default"):
        stop = runs[tag]["stop"]
        # many segments went in super-frames (how many depends on the ACK clock: a lone
        # segment per ACK goes as a plain frame; 47-77 % seen with modern's HyStart++)
        assert stop["gso_segments"] > len(runs[tag]["tx"]) / 3 and stop["gso_super_frames"] > 10, (tag, stop)
    assert runs["plain"]["stop"]["gso_segments"] == 0
    for family in ("v4", "v6"):
        with_gso, without = relative(runs["gso"][family]["rows"]), relative(runs["plain"][family]["rows"])
        assert len(with_gso) > 200
        assert with_gso == without, family
