"""The flows' shares over time (bench_lean_fairness.py): pure functions of sampled byte counts.

While a pairing runs, the client's namespace prints `ss -tinH` once a second (the sampler of
fairness_trace.py); each flow's connection is found by an endpoint it has in the client (a
lean flow: the lean node's address and port 80 as the peer; a kernel flow: the iperf3
server's port in the client as the local end) and its `bytes_received` counter read
(congestlab.traffic.socket_stats.parse_ss_connections). From those cumulative counts:
  - the share of flow A per sampling interval (convergence over time);
  - the steady-state share: A's share of the bytes received after a start-up of `settle_s`;
  - Jain's fairness index (sum x)^2 / (n * sum x^2) of the flows' bytes in that window.
"""

from __future__ import annotations

from congestlab.traffic.socket_stats import parse_ss_connections


def unmapped(endpoint: str) -> str:
    """"[::ffff:10.61.0.10]:5201" -> "10.61.0.10:5201": iperf3's server listens on IPv6's
    wildcard, so ss shows its IPv4 connections with v4-mapped addresses."""
    if endpoint.startswith("[::ffff:") and "." in endpoint:
        addr, port = endpoint[len("[::ffff:"):].split("]:", 1)
        return f"{addr}:{port}"
    return endpoint


def bytes_received_by_endpoint(ss_text: str, endpoints: list[str]) -> list[int]:
    """One `ss -tinH` sample -> each endpoint's bytes received: the largest `bytes_received`
    of the connections having that endpoint ("addr:port", IPv4 also when ss shows it
    v4-mapped) on either side (iperf3's control connection shares the data connection's
    port and carries a few hundred bytes)."""
    conns = [(unmapped(c.local), unmapped(c.peer), c.counters.get("bytes_received", 0))
             for c in parse_ss_connections(ss_text)]
    return [max((n for local, peer, n in conns if endpoint in (local, peer)), default=0) for endpoint in endpoints]


def sample_chunks(text: str) -> list[tuple[float, str]]:
    """A sampler's output (fairness_trace.sampler_argv: "T <unix s>" then the command's lines,
    repeated) -> (unix s, that sample's text) per sample."""
    chunks: list[tuple[float, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("T "):
            chunks.append((float(line.split()[1]), []))
        elif chunks:
            chunks[-1][1].append(line)
    return [(t, "\n".join(lines)) for t, lines in chunks]


def parse_samples(text: str, endpoints: list[str]) -> list[tuple[float, list[int]]]:
    """The sampler's output ("T <unix s>" then ss's lines, repeated) -> (unix s, bytes per
    endpoint) per sample, each count made monotonic (a connection that closed keeps its last
    count rather than dropping to 0)."""
    samples: list[tuple[float, list[int]]] = []
    last = [0] * len(endpoints)
    for t, sample in sample_chunks(text):
        got = bytes_received_by_endpoint(sample, endpoints)
        last = [max(a, b) for a, b in zip(last, got)]
        samples.append((t, last))
    return samples


def jain_index(amounts: list[float]) -> float | None:
    """Jain's fairness index of the flows' amounts: 1 when equal, 1/n when one takes all;
    None when nothing moved."""
    total = sum(amounts)
    squares = sum(a * a for a in amounts)
    return total * total / (len(amounts) * squares) if squares else None


def share_pct(a_bytes: float, total_bytes: float) -> float | None:
    return 100.0 * a_bytes / total_bytes if total_bytes else None


def per_interval(samples: list[tuple[float, list[int]]], t0_unix_s: float) -> list[dict]:
    """Per sampling interval: its end (s since t0), each flow's Mbit/s and A's share in %."""
    out = []
    for (t_prev, prev), (t, cur) in zip(samples, samples[1:]):
        deltas = [c - p for c, p in zip(cur, prev)]
        dt_s = t - t_prev
        out.append({"t_s": round(t - t0_unix_s, 3),
                    "mbps": [round(8 * d / dt_s / 1e6, 2) if dt_s > 0 else None for d in deltas],
                    "share_a_pct": share_pct(deltas[0], sum(deltas))})
    return out


def window(samples: list[tuple[float, list[int]]], t0_unix_s: float, start_s: float,
           end_s: float) -> dict | None:
    """The bytes each flow received between the first sample at or after `start_s` and the
    last at or before `end_s` (s since t0); A's share and Jain's index of them. None when the
    window holds fewer than two samples."""
    inside = [(t, b) for t, b in samples if start_s <= t - t0_unix_s <= end_s]
    if len(inside) < 2:
        return None
    (t_first, first), (t_last, last) = inside[0], inside[-1]
    deltas = [b - a for a, b in zip(first, last)]
    return {"from_s": round(t_first - t0_unix_s, 3), "to_s": round(t_last - t0_unix_s, 3), "bytes": deltas,
            "share_a_pct": share_pct(deltas[0], sum(deltas)), "jain": jain_index([float(d) for d in deltas])}
