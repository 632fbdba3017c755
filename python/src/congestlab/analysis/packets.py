"""Read TCP segments out of a pcap with dpkt; malformed frames are counted, not fatal, and
frames recorded twice are counted, not read (crates/traceanalyze/src/dedup.rs's rule)."""

from __future__ import annotations

import socket
import struct
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path

import dpkt

from congestlab.errors import TraceError

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10


@dataclass(frozen=True)
class Segment:
    ts: float
    family: str  # v4 | v6
    src: str
    dst: str
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    payload_len: int
    frame_len: int  # bytes on the wire: link header + IP total length (what Wireshark counts)
    capture_duplicate: bool = False  # the same bytes as a frame captured just before (CaptureDuplicates)

    @property
    def syn(self) -> bool:
        return bool(self.flags & SYN)

    @property
    def fin(self) -> bool:
        return bool(self.flags & FIN)

    @property
    def rst(self) -> bool:
        return bool(self.flags & RST)

    @property
    def has_ack(self) -> bool:
        return bool(self.flags & ACK)


@dataclass
class ReadStats:
    frames: int = 0
    tcp_segments: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    truncated: bool = False  # the capture ends inside a record: read up to the cut
    capture_duplicates: int = 0  # frames recorded twice: in `frames`, in nothing else

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


class _CutDetector:
    """File wrapper that remembers whether the last read came back short: dpkt's pcap reader
    yields a record cut by the end of the file as if it were whole."""

    def __init__(self, fh) -> None:
        self._fh = fh
        self.name = getattr(fh, "name", "<capture>")
        self.short = False
        self.last_len = 0

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self.short = n is not None and n >= 0 and len(data) < n
        self.last_len = len(data)
        return data

    def seek(self, *args):
        return self._fh.seek(*args)

    def tell(self) -> int:
        return self._fh.tell()

    def fileno(self) -> int:
        return self._fh.fileno()


# a frame with the bytes of one captured at most this long before it is a capture duplicate
# (docs/trace-analysis.md, "Capture duplicates")
DUPLICATE_WINDOW_NS = 10_000
# frames, and bytes of them, kept for the comparison: as crates/traceanalyze/src/dedup.rs
_MAX_RECENT, _MAX_RECENT_BYTES = 1024, 4 << 20


class CaptureDuplicates:
    """The frames of the last DUPLICATE_WINDOW_NS; `check` says whether a frame repeats one
    of them (editcap -w's rule: captured bytes and a time window). Every frame is kept, copies
    too, so a third copy within the window of the second is one as well."""

    def __init__(self) -> None:
        self.recent: deque[tuple[int, bytes]] = deque()
        self.bytes = 0

    def check(self, ts_ns: int, data: bytes) -> bool:
        recent = self.recent
        while recent and (ts_ns - recent[0][0] > DUPLICATE_WINDOW_NS or len(recent) >= _MAX_RECENT
                          or self.bytes + len(data) > _MAX_RECENT_BYTES):
            self.bytes -= len(recent.popleft()[1])
        # a frame stamped later than this one (a capture out of time order) is not compared
        duplicate = any(0 <= ts_ns - seen_ns <= DUPLICATE_WINDOW_NS and seen == data for seen_ns, seen in recent)
        recent.append((ts_ns, data))
        self.bytes += len(data)
        return duplicate


def _ts_ns(ts) -> int:
    """dpkt's timestamp as integer ns: a Decimal (nanosecond pcap) exactly, a float (pcap,
    pcapng) to the µs (exact for µs captures; the reference keeps no finer time of a pcapng)."""
    return int(ts * 1_000_000_000) if isinstance(ts, Decimal) else round(ts * 1e6) * 1000


def read_segments(path: Path, stats: ReadStats | None = None, *, duplicates: bool = False) -> Iterator[Segment]:
    """The capture's TCP segments in file order. A capture duplicate is counted in
    `stats.capture_duplicates` and left out, or, with `duplicates`, given with
    `capture_duplicate` set."""
    stats = stats if stats is not None else ReadStats()
    try:
        fh = open(path, "rb")
    except OSError as err:
        raise TraceError(f"{path}: {err.strerror}") from None
    with fh:
        guard = _CutDetector(fh)
        try:
            reader = dpkt.pcap.UniversalReader(guard)
        except (ValueError, dpkt.dpkt.Error) as err:
            raise TraceError(f"{path}: not a pcap/pcapng file ({err})") from None
        linktype = reader.datalink()
        seen = CaptureDuplicates()
        try:
            for ts, buf in reader:
                if guard.short:  # the record was cut by the end of the file: not a frame
                    break
                stats.frames += 1
                if seen.check(_ts_ns(ts), bytes(buf)):
                    stats.capture_duplicates += 1
                    seg = _decode(float(ts), buf, linktype, ReadStats()) if duplicates else None
                    if seg is not None:
                        yield replace(seg, capture_duplicate=True)
                    continue
                seg = _decode(float(ts), buf, linktype, stats)
                if seg is not None:
                    stats.tcp_segments += 1
                    yield seg
            if guard.short and guard.last_len > 0:
                stats.skip("truncated file")
                stats.truncated = True
        except (dpkt.dpkt.UnpackError, ValueError, struct.error) as err:
            stats.skip(f"truncated file: {err}")
            stats.truncated = True


def _decode(ts: float, buf: bytes, linktype: int, stats: ReadStats) -> Segment | None:
    try:
        if linktype == dpkt.pcap.DLT_EN10MB:
            eth = dpkt.ethernet.Ethernet(buf)
            ip, link_header = eth.data, 14
        elif linktype in (dpkt.pcap.DLT_LINUX_SLL,):
            ip, link_header = dpkt.sll.SLL(buf).data, 16
        elif linktype in (dpkt.pcap.DLT_RAW, 101):
            ip = dpkt.ip.IP(buf) if buf and buf[0] >> 4 == 4 else dpkt.ip6.IP6(buf)
            link_header = 0
        else:
            stats.skip(f"linktype {linktype}")
            return None
    except (dpkt.dpkt.Error, IndexError, ValueError, struct.error) as err:
        stats.skip(f"undecodable frame: {type(err).__name__}")
        return None
    if isinstance(ip, dpkt.ip.IP):
        family, af = "v4", socket.AF_INET
        ip_payload_len = ip.len - ip.hl * 4
        ip_total_len = ip.len
    elif isinstance(ip, dpkt.ip6.IP6):
        family, af = "v6", socket.AF_INET6
        ip_payload_len = ip.plen - _ip6_ext_len(ip)
        ip_total_len = 40 + ip.plen
    else:
        stats.skip("not IP")
        return None
    tcp = ip.data
    if not isinstance(tcp, dpkt.tcp.TCP):
        stats.skip("not TCP")
        return None
    # payload from the IP length fields: captures are headers-only (snaplen 128)
    payload_len = ip_payload_len - tcp.off * 4
    if payload_len < 0:
        stats.skip("bad TCP header length")
        return None
    return Segment(ts, family, socket.inet_ntop(af, ip.src), socket.inet_ntop(af, ip.dst), tcp.sport, tcp.dport,
                   tcp.seq, tcp.ack, tcp.flags, payload_len, link_header + ip_total_len)


def _ip6_ext_len(ip6: dpkt.ip6.IP6) -> int:
    total = 0
    for hdr in getattr(ip6, "extension_hdrs", {}).values():
        if hdr is not None:
            total += len(bytes(hdr))
    return total
