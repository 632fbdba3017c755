"""A constant-delay line through a TUN device, for a base RTT on a kernel without netem.

Run inside a router namespace: `python -m congestlab.cc.delayline DEV DELAY_MS SECONDS`.
It creates TUN device DEV; every packet the router routes into DEV is written back into
DEV after DELAY_MS and is routed on from there (policy routing by incoming interface,
set up by the caller). Used on the ACK path only (a few thousand packets/s at
100 Mbit/s of data), so Python keeps up. Order is preserved (constant delay, FIFO).
Bounded: exits after SECONDS; the device disappears with the process.
"""

from __future__ import annotations

import collections
import fcntl
import os
import select
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
MAX_QUEUED = 100_000


def open_tun(dev: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", dev.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def run(dev: str, delay_s: float, seconds: float) -> int:
    fd = open_tun(dev)
    queue: collections.deque[tuple[float, bytes]] = collections.deque()
    end = time.monotonic() + seconds
    forwarded = dropped = 0
    print("ready", flush=True)
    while True:
        now = time.monotonic()
        if now >= end:
            break
        while queue and queue[0][0] <= now:
            try:
                os.write(fd, queue.popleft()[1])
                forwarded += 1
            except OSError:
                dropped += 1
        timeout = min(end - now, queue[0][0] - now if queue else 0.05)
        readable, _, _ = select.select([fd], [], [], max(timeout, 0))
        if readable:
            stamp = time.monotonic() + delay_s
            for _ in range(256):
                try:
                    packet = os.read(fd, 65536)
                except BlockingIOError:
                    break
                if len(queue) < MAX_QUEUED:
                    queue.append((stamp, packet))
                else:
                    dropped += 1
    print(f"forwarded {forwarded} dropped {dropped}", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print("usage: python -m congestlab.cc.delayline DEV DELAY_MS SECONDS", file=sys.stderr)
        sys.exit(2)
    sys.exit(run(sys.argv[1], float(sys.argv[2]) / 1000.0, float(sys.argv[3])))
