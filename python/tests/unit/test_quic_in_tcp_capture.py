"""A capture at a server port takes QUIC's UDP datagrams too (Caddy serves HTTP/3 on its TCP
port's number): the TCP analysis (both backends of analysis/trace.py) ignores them, and its
numbers match those of the same capture without them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dpkt
import pytest
from trace_checks import NEEDS_ANALYZER

from congestlab.analysis.trace import measure_pcap

DATA = Path(__file__).parent / "data"
TCP_PCAP, QUIC_PCAP = DATA / "probe-sample" / "web.pcap", DATA / "quic" / "gtls-48KiB.pcap"
PORT = 8080  # web.pcap's server port; the QUIC datagrams are moved onto it


def _frames(path: Path) -> list[tuple[float, bytes]]:
    with open(path, "rb") as fh:
        return [(ts, bytes(buf)) for ts, buf in dpkt.pcap.Reader(fh)]


def _on_port(buf: bytes) -> bytes:
    eth = dpkt.ethernet.Ethernet(buf)
    udp = eth.data.data
    udp.sport, udp.dport = (PORT if p == 4433 else p for p in (udp.sport, udp.dport))
    udp.sum = 0
    return bytes(eth)


def _write(path: Path, frames: list[tuple[float, bytes]]) -> Path:
    with open(path, "wb") as fh:
        writer = dpkt.pcap.Writer(fh, snaplen=65535, linktype=dpkt.pcap.DLT_EN10MB)
        for ts, buf in sorted(frames, key=lambda f: f[0]):
            writer.writepkt(buf, ts)
    return path


@pytest.mark.parametrize("backend", [pytest.param("rust", marks=NEEDS_ANALYZER), "dpkt"])
def test_udp_datagrams_at_the_server_port_leave_the_tcp_numbers_alone(tmp_path, backend):
    tcp = _frames(TCP_PCAP)
    quic = _frames(QUIC_PCAP)
    shift = tcp[0][0] - quic[0][0] + 0.0005  # the QUIC datagrams among the TCP segments
    mixed = tcp + [(ts + shift, _on_port(buf)) for ts, buf in quic]
    alone = measure_pcap(_write(tmp_path / "tcp.pcap", tcp), PORT, backend=backend)
    both = measure_pcap(_write(tmp_path / "mixed.pcap", mixed), PORT, backend=backend)
    assert [dataclasses.asdict(c) for c in both.connections] == [dataclasses.asdict(c) for c in alone.connections]
    assert dataclasses.asdict(both.port) == dataclasses.asdict(alone.port)
    assert both.read_stats.frames == len(mixed) and both.read_stats.tcp_segments == alone.read_stats.tcp_segments
    assert both.read_stats.skipped == {"not TCP": len(quic)}
    assert both.connections and all(c.metrics is not None for c in both.connections)
