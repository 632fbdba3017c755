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
    # the next IPv4 ID of (server, client): each side numbers its packets, as Linux does a
    # connected socket's, so a segment sent again is not the same bytes
    next_ip_id: list[int] = field(default_factory=lambda: [0x5000, 0x1000])

    def segment(self, ts: float, from_client: bool, seq_off: int, ack_off: int, flags: int, payload_len: int,
                retransmission: bool = False, win: int = 65535, opts: bytes | None = None,
                ip_id: int | None = None) -> None:
        """`opts`: raw TCP options (default: NOP NOP timestamps), padded to 4 bytes; `ip_id`:
        the IPv4 ID (default: the sender's next)."""
        c, s = ADDRS[self.family]
        src, dst = (c, s) if from_client else (s, c)
        sport, dport = (self.client_port, self.server_port) if from_client else (self.server_port, self.client_port)
        seq = ((self.client_isn if from_client else self.server_isn) + seq_off) % (1 << 32)
        ack = ((self.server_isn if from_client else self.client_isn) + ack_off) % (1 << 32)
        tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, win=win,
                           data=b"x" * payload_len)
        tcp.opts = b"\x01\x01\x08\x0a" + struct.pack(">II", 1, 1) if opts is None else opts  # NOP NOP timestamps
        tcp.opts += b"\x00" * (-len(tcp.opts) % 4)
        tcp.off = (20 + len(tcp.opts)) // 4
        if self.family == "v4":
            if ip_id is None:
                ip_id = self.next_ip_id[from_client]
                self.next_ip_id[from_client] = (ip_id + 1) % (1 << 16)
            ip = dpkt.ip.IP(src=socket.inet_pton(socket.AF_INET, src), dst=socket.inet_pton(socket.AF_INET, dst),
                            p=dpkt.ip.IP_PROTO_TCP, ttl=64, id=ip_id, data=tcp)
            ip.len = 20 + len(bytes(tcp))
            eth_type = dpkt.ethernet.ETH_TYPE_IP
        else:
            ip = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, src), dst=socket.inet_pton(socket.AF_INET6, dst),
                              nxt=dpkt.ip.IP_PROTO_TCP, hlim=64, data=tcp)
            ip.plen = len(bytes(tcp))
            eth_type = dpkt.ethernet.ETH_TYPE_IP6
        eth = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=eth_type, data=ip)
        self.frames.append(Frame(ts, bytes(eth), from_client, payload_len, retransmission))

    def write(self, path: Path, snaplen: int | None = None, fmt: str = "pcap") -> Path:
        """Classic pcap; with `snaplen`, frames are cut like tcpdump -s (orig length kept)."""
        return write_frames(path, self.frames, snaplen, fmt)


def write_frames(path: Path, frames: list[Frame], snaplen: int | None = None, fmt: str = "pcap") -> Path:
    """Frames in time order as classic pcap (µs), `pcap-ns` (ns magic) or `pcapng` (µs)."""
    frames = sorted(frames, key=lambda f: f.ts)
    if fmt == "pcapng":
        with open(path, "wb") as fh:
            writer = dpkt.pcapng.Writer(fh, snaplen=snaplen or 65535, linktype=dpkt.pcap.DLT_EN10MB)
            for f in frames:
                data = f.data[:snaplen] if snaplen else f.data
                epb = dpkt.pcapng.EnhancedPacketBlockLE(pkt_data=data, pkt_len=len(f.data))
                usec = round(f.ts * 1e6)
                epb.ts_high, epb.ts_low = usec >> 32, usec & 0xFFFFFFFF
                writer.writepkt(epb)
        return path
    magic, scale = (0xA1B23C4D, 1e9) if fmt == "pcap-ns" else (0xA1B2C3D4, 1e6)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", magic, 2, 4, 0, 0, snaplen or 65535, 1))
        for f in frames:
            data = f.data[:snaplen] if snaplen else f.data
            sec = int(f.ts)
            frac = int(round((f.ts - sec) * scale))
            fh.write(struct.pack("<IIII", sec, frac, len(data), len(f.data)))
            fh.write(data)
    return path


def other_frames(t0: float) -> list[Frame]:
    """Frames that are not TCP at the server port: an ARP request, a UDP datagram, TCP to
    another port, and a frame cut inside its IP header (malformed)."""
    arp = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\xff" * 6, type=dpkt.ethernet.ETH_TYPE_ARP,
                                 data=dpkt.arp.ARP(op=dpkt.arp.ARP_OP_REQUEST))
    udp = dpkt.udp.UDP(sport=5000, dport=5001, data=b"hello")
    udp.ulen = 8 + 5
    ip = dpkt.ip.IP(src=b"\x0a\x00\x00\x0a", dst=b"\x0a\x00\x04\x0a", p=dpkt.ip.IP_PROTO_UDP, data=udp)
    ip.len = 20 + len(bytes(udp))
    eth_udp = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
    other_port = Conversation("v4", client_port=41000, server_port=5201)
    other_port.segment(t0 + 0.0002, True, 0, 0, SYN, 0)
    cut = Conversation("v4")
    cut.segment(t0 + 0.0003, True, 0, 0, ACK, 0)
    return [Frame(t0, bytes(arp), False, 0), Frame(t0 + 0.0001, bytes(eth_udp), False, 0), other_port.frames[0],
            Frame(t0 + 0.0003, cut.frames[0].data[:20], True, 0)]


SYN, ACK, FIN, PSH = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK, dpkt.tcp.TH_FIN, dpkt.tcp.TH_PUSH


def transfer_with_loss_and_reordering(family: str, t0: float = 1_700_000_000.0, segments: int = 10,
                                      lost: int = 6, swapped: int = 3, **conv_kw) -> tuple[Conversation, dict]:
    """Handshake, a 100-byte GET, `segments` full data segments (segment `swapped` and the
    next one captured in swapped order, segment `lost` resent after 250 ms), delayed ACKs,
    then the client's FIN. Returns the conversation and the hand-computed answers.
    `conv_kw` go to Conversation (ports, initial sequence numbers)."""
    conv = Conversation(family, **conv_kw)
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


def transfer_with_fast_and_spurious_retransmissions(family: str, t0: float = 1_700_000_100.0, segments: int = 12,
                                                   lost: int = 4, client_port: int = 40010) -> tuple[Conversation, dict]:
    """Handshake, GET, `segments` data segments every 0.1 ms; segment `lost` is lost behind
    the capture, so the client sends three duplicate ACKs and the server resends it 1 ms
    after the third (tshark: fast retransmission). 60 ms later the server resends segment 0,
    long acknowledged (tshark: spurious retransmission). Every segment is ACKed singly."""
    conv = Conversation(family, client_port=client_port)
    mss = MSS[family]
    get_len = 120
    conv.segment(t0, True, 0, 0, SYN, 0)
    conv.segment(t0 + 0.0004, False, 0, 1, SYN | ACK, 0)
    conv.segment(t0 + 0.0008, True, 1, 1, ACK, 0)
    t_get = t0 + 0.001
    conv.segment(t_get, True, 1, 1, ACK | PSH, get_len)
    rtt = 0.0004
    sent_at = {}
    for i in range(segments):
        sent_at[i] = t_get + 0.0005 + i * 0.0001
        conv.segment(sent_at[i], False, 1 + i * mss, 1 + get_len, ACK, mss)
    dupacks = 0
    t_dup3 = None
    for i in range(segments):
        ts = sent_at[i] + rtt
        if i < lost:
            conv.segment(ts, True, 1 + get_len, 1 + (i + 1) * mss, ACK, 0)
        elif i > lost:
            conv.segment(ts, True, 1 + get_len, 1 + lost * mss, ACK, 0)
            dupacks += 1
            if dupacks == 3:
                t_dup3 = ts
    t_fast = t_dup3 + 0.001
    conv.segment(t_fast, False, 1 + lost * mss, 1 + get_len, ACK, mss, retransmission=True)
    conv.segment(t_fast + rtt, True, 1 + get_len, 1 + segments * mss, ACK, 0)
    t_spurious = t_fast + 0.06
    conv.segment(t_spurious, False, 1, 1 + get_len, ACK, mss, retransmission=True)
    t_last_ack = t_spurious + rtt
    conv.segment(t_last_ack, True, 1 + get_len, 1 + segments * mss, ACK, 0)
    t_fin = t_last_ack + 0.005
    conv.segment(t_fin, True, 1 + get_len, 1 + segments * mss, FIN | ACK, 0)
    conv.segment(t_fin + rtt, False, 1 + segments * mss, 2 + get_len, FIN | ACK, 0)
    conv.segment(t_fin + 2 * rtt, True, 2 + get_len, 2 + segments * mss, ACK, 0)
    answers = {"delay_ms": (t_last_ack - t_get) * 1e3, "retransmissions": 2, "payload_bytes": segments * mss,
               # Karn: no sample for the resent lost segment; segment 0 was sampled when ACKed,
               # before its spurious resend
               "rtt_samples": segments - 1}
    return conv, answers


def handshake_only(family: str, t0: float, client_port: int) -> Conversation:
    """A connection that never sends a request (a port scan, a failed client): SYN,
    SYN-ACK, ACK, RST."""
    conv = Conversation(family, client_port=client_port)
    conv.segment(t0, True, 0, 0, SYN, 0)
    conv.segment(t0 + 0.0004, False, 0, 1, SYN | ACK, 0)
    conv.segment(t0 + 0.0008, True, 1, 1, ACK, 0)
    conv.segment(t0 + 0.001, True, 1, 1, dpkt.tcp.TH_RST | ACK, 0)
    return conv


def busy_capture(family: str = "v4") -> list[Frame]:
    """Several connections in one capture: the lossy transfer twice on the same 4-tuple
    (the second after the first closed), the fast/spurious one, a connection without a
    request, and frames that are not TCP at the port."""
    first, _ = transfer_with_loss_and_reordering(family, t0=1_700_000_000.0)
    # new initial sequence numbers, as a real client's reused port has (tshark needs them
    # to see a new connection rather than retransmissions)
    reused, _ = transfer_with_loss_and_reordering(family, t0=1_700_000_000.5, client_isn=7_000_000,
                                                  server_isn=2_000_000_000)
    fast, _ = transfer_with_fast_and_spurious_retransmissions(family, t0=1_700_000_000.2)
    idle = handshake_only(family, 1_700_000_000.3, client_port=40020)
    return first.frames + reused.frames + fast.frames + idle.frames + other_frames(1_700_000_000.9)
