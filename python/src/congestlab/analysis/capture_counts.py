"""A capture against tcpdump's own account of it (rep.json's `captures.<server>.tcpdump`,
capture/tcpdump.py parse_drop_counts): the frames read must be the packets tcpdump wrote, and
the kernel must have dropped none. A capture cut at a packet boundary reads as a whole file;
only this count shows it (docs/data-format.md, "Request outcomes")."""

from __future__ import annotations


def capture_count_problem(frames: int, info: dict, server: str, key: str = "captures") -> str | None:
    """Why the `frames` read from `server`'s capture (`key`: "quic_captures" for its UDP
    capture) are not what tcpdump captured; None when
    they are, or when rep.json holds no counts (a run from before it did, a tcpdump that
    printed none). Packets received by the filter beyond those captured are not compared:
    they are the packets still buffered when tcpdump was stopped, after the window (a GET
    among them fails the completeness checks instead)."""
    counts = ((info.get(key) or {}).get(server) or {}).get("tcpdump") or {}
    dropped = counts.get("packets_dropped_by_kernel")
    if dropped:
        return f"tcpdump's kernel dropped {dropped} packets: the capture misses them"
    captured = counts.get("packets_captured")
    if captured is None or captured == frames:
        return None
    if frames < captured:
        return f"{frames} frames read, tcpdump wrote {captured}: the file was cut or lost frames"
    return f"{frames} frames read, tcpdump wrote {captured}: frames were added or written twice"
