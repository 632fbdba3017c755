"""Build small pcaps with known answers for the analysis tests (dpkt as the writer)."""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

import dpkt

ADDRS = {"v4": ("10.0.0.10", "10.0.4.10"), "v6": ("fd00::a", "fd00:0:0:4::a")}
MSS = {"v4": 1448, "v6": 1428}


@dataclass
class Frame:
    ts: float
    data: bytes
    from_client: bool
    payload_len: int
    retransmission: bool = False


@dataclass
class Conversation:
    family: str
    client_port: int = 40000
    server_port: int = 80
    frames: list[Frame] = field(default_factory=list)
    client_isn: int = 1000
    server_isn: int = 4_294_960_000  # wraps inside the transfer

    def segment(self, ts: float, from_client: bool, seq_off: int, ack_off: int, flags: int, payload_len: int,
                retransmission: bool = False) -> None:
        c, s = ADDRS[self.family]
        src, dst = (c, s) if from_client else (s, c)
        sport, dport = (self.client_port, self.server_port) if from_client else (self.server_port, self.client_port)
        seq = ((self.client_isn if from_client else self.server_isn) + seq_off) % (1 << 32)
        ack = ((self.server_isn if from_client else self.client_isn) + ack_off) % (1 << 32)
        tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, win=65535,
                           data=b"x" * payload_len)
        tcp.opts = b"\x01\x01\x08\x0a" + struct.pack(">II", 1, 1)  # NOP NOP timestamps
        tcp.off = (20 + len(tcp.opts)) // 4
        if self.family == "v4":
            ip = dpkt.ip.IP(src=socket.inet_pton(socket.AF_INET, src), dst=socket.inet_pton(socket.AF_INET, dst),
                            p=dpkt.ip.IP_PROTO_TCP, ttl=64, data=tcp)
            ip.len = 20 + len(bytes(tcp))
            eth_type = dpkt.ethernet.ETH_TYPE_IP
        else:
            ip = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, src), dst=socket.inet_pton(socket.AF_INET6, dst),
                              nxt=dpkt.ip.IP_PROTO_TCP, hlim=64, data=tcp)
            ip.plen = len(bytes(tcp))
            eth_type = dpkt.ethernet.ETH_TYPE_IP6
        eth = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=eth_type, data=ip)
        self.frames.append(Frame(ts, bytes(eth), from_client, payload_len, retransmission))

    def write(self, path: Path, snaplen: int | None = None) -> Path:
        """Classic pcap; with `snaplen`, frames are cut like tcpdump -s (orig length kept)."""
        frames = sorted(self.frames, key=lambda f: f.ts)
        with open(path, "wb") as fh:
            fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen or 65535, 1))
            for f in frames:
                data = f.data[:snaplen] if snaplen else f.data
                sec = int(f.ts)
                usec = int(round((f.ts - sec) * 1e6))
                fh.write(struct.pack("<IIII", sec, usec, len(data), len(f.data)))
                fh.write(data)
        return path


SYN, ACK, FIN, PSH = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK, dpkt.tcp.TH_FIN, dpkt.tcp.TH_PUSH


def transfer_with_loss_and_reordering(family: str, t0: float = 1_700_000_000.0, segments: int = 10,
                                      lost: int = 6, swapped: int = 3) -> tuple[Conversation, dict]:
    """Handshake, a 100-byte GET, `segments` full data segments (segment `swapped` and the
    next one captured in swapped order, segment `lost` resent after 250 ms), delayed ACKs,
    then the client's FIN. Returns the conversation and the hand-computed answers."""
    conv = Conversation(family)
    mss = MSS[family]
    get_len = 100
    conv.segment(t0, True, 0, 0, SYN, 0)
    conv.segment(t0 + 0.001, False, 0, 1, SYN | ACK, 0)
    conv.segment(t0 + 0.002, True, 1, 1, ACK, 0)
    t_get = t0 + 0.003
    conv.segment(t_get, True, 1, 1, ACK | PSH, get_len)
    sent_at = {}
    for i in range(segments):
        ts = t0 + 0.005 + i * 0.0002
        if i == swapped:
            ts += 0.00025  # captured after segment i+1: reordering, not a retransmission
        elif i == swapped + 1:
            ts -= 0.00025
        sent_at[i] = ts
        conv.segment(ts, False, 1 + i * mss, 1 + get_len, ACK, mss)
    # the client ACKs every second segment until the hole at `lost`, then duplicates
    acked = 0
    for i in range(1, segments, 2):
        if i >= lost:
            conv.segment(sent_at[i] + 0.0005, True, 1 + get_len, 1 + lost * mss, ACK, 0)
        else:
            acked = i + 1
            conv.segment(max(sent_at[i], sent_at[i - 1]) + 0.0005, True, 1 + get_len, 1 + acked * mss, ACK, 0)
    t_resend = t0 + 0.25
    conv.segment(t_resend, False, 1 + lost * mss, 1 + get_len, ACK, mss, retransmission=True)
    t_last_ack = t_resend + 0.0005
    conv.segment(t_last_ack, True, 1 + get_len, 1 + segments * mss, ACK, 0)
    t_fin = t_last_ack + 0.01
    conv.segment(t_fin, True, 1 + get_len, 1 + segments * mss, FIN | ACK, 0)
    conv.segment(t_fin + 0.0005, False, 1 + segments * mss, 2 + get_len, FIN | ACK, 0)
    conv.segment(t_fin + 0.001, True, 2 + get_len, 2 + segments * mss, ACK, 0)

    inside = [f for f in conv.frames if t_get <= f.ts <= t_last_ack]
    delay = t_last_ack - t_get
    captured = sum(len(f.data) for f in inside)
    nrt = sum(len(f.data) for f in inside if not f.retransmission)
    answers = {
        "delay_ms": delay * 1e3,
        "bytes_captured": captured,
        "bytes_nrt": nrt,
        "payload_bytes": segments * mss,
        "retransmissions": 1,
        "goodput_mbps": segments * mss * 8 / delay / 1e6,
        "first_rtt_ms": (max(sent_at[0], sent_at[1]) + 0.0005 - sent_at[0]) * 1e3,
        "rtt_samples": segments - 1,  # Karn: none for the resent segment
    }
    return conv, answers
