"""The study's tasks as sweeps: what is varied, the fixed settings, durations, and what the
study reports for them (seed 003, Figures 2-13).

The report's text gives the commands and the fixed values (10 KB window, 64 KB length,
tbf `latency 50ms burst 5kb`, netem `delay D 10ms` on the client's egress, iptables
`statistic` loss at the server, 30 s / 60 s runs, 200 Mbit/s + 80 ms for the BDP task, UDP
sessions at iperf's default 1 Mbit/s) but not the x-values of its figures; ours are chosen
to span the same ranges and are listed in docs/tcp-lab.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STUDY_MAX_MBPS = 94.0  # the study's maximum on its 100 Mbit/s Fast Ethernet cable
STUDY_UDP_MBPS = 1.0  # each UDP session (iperf 2's default -b 1M)
CABLE_RATE_MBIT = 100  # the study's cable; all tasks run over it
FIXED_WINDOW_BYTES = 10_000  # "-w 10000"
FIXED_LENGTH_BYTES = 64 * 1024  # "-l 64", described as 64 KB
STUDY_JITTER_MS = 10.0  # "netem delay ##ms 10ms"
BDP_RATE_KBIT = 200_000
BDP_DELAY_MS = 80.0


@dataclass(frozen=True)
class Network:
    """Per point: a tbf below the cable rate, and delay/jitter/loss on the A->B direction
    (the study's netem sat on the client's egress, its loss on the server's input)."""

    tbf_rate_kbit: int | None = None
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0

    @property
    def emulated(self) -> bool:
        return self.delay_ms > 0 or self.jitter_ms > 0 or self.loss > 0


@dataclass(frozen=True)
class Point:
    x: float
    network: Network = field(default_factory=Network)
    server_window_bytes: int | None = None
    server_length_bytes: int | None = None
    client_window_bytes: int | None = None
    client_length_bytes: int | None = None
    tcp_sessions: int = 1
    udp_sessions: int = 0


@dataclass(frozen=True)
class Sweep:
    key: str
    figure: int
    title: str
    x_label: str
    duration_s: float
    points: tuple[Point, ...]
    study_says: str

    def with_points(self, xs: list[float]) -> "Sweep":
        chosen = tuple(p for p in self.points if p.x in xs)
        return Sweep(self.key, self.figure, self.title, self.x_label, self.duration_s, chosen, self.study_says)

    def with_duration(self, duration_s: float) -> "Sweep":
        return Sweep(self.key, self.figure, self.title, self.x_label, duration_s, self.points, self.study_says)


WINDOWS_BYTES = [1_000, 2_000, 4_000, 6_000, 8_000, 10_000, 20_000, 50_000, 100_000]
LENGTHS_BYTES = [16, 64, 256, 1024, 4096, 16384, 65536, 131072]
RATES_KBIT = [1_000, 5_000, 10_000, 20_000, 50_000, 80_000, 100_000, 150_000, 200_000]
DELAYS_MS = [0, 10, 20, 40, 60, 80, 100]
LOSSES = [0.0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1]
BDP_WINDOWS_BYTES = [10_000, 25_000, 50_000, 100_000, 150_000, 200_000]
PARALLEL = [1, 2, 3, 4, 5, 6, 8, 10]
TCP_BESIDE_UDP = [1, 2, 3, 4, 5]

QUICK_POINTS = {
    "window_receiver": [2_000, 10_000, 50_000], "window_sender": [2_000, 10_000, 50_000],
    "length_receiver": [64, 4096, 65536], "length_sender": [64, 4096, 65536],
    "rate": [10_000, 50_000, 150_000], "delay": [0, 20, 80],
    "loss_30s": [0.0, 0.01, 0.05], "loss_60s": [0.0, 0.01, 0.05],
    "bdp": [25_000, 100_000, 200_000], "parallel": [1, 2, 4],
    "udp1": [1, 2], "udp2": [1, 2],
}
QUICK_DURATION_S = {"loss_60s": 4.0, "bdp": 4.0}  # keep the study's 30:60 ratio; 160 ms RTT ramps slowly
QUICK_DEFAULT_DURATION_S = 2.0


def _delay_network(delay_ms: float) -> Network:
    # the study's jitter (10 ms) only where there is delay: "no delay" is its 94 Mbit/s point
    return Network(delay_ms=delay_ms, jitter_ms=STUDY_JITTER_MS if delay_ms > 0 else 0.0)


def study_sweeps() -> list[Sweep]:
    """The full study: one sweep per figure (2-13)."""
    return [
        Sweep("window_receiver", 2, "Receiver's window varied (sender -w 10000)", "receiver window (bytes)", 30,
              tuple(Point(w, server_window_bytes=w, client_window_bytes=FIXED_WINDOW_BYTES) for w in WINDOWS_BYTES),
              "rises with the receiver's window to 94 Mbit/s at 10 KB, then flat"),
        Sweep("window_sender", 3, "Sender's window varied (receiver -w 10000)", "sender window (bytes)", 30,
              tuple(Point(w, server_window_bytes=FIXED_WINDOW_BYTES, client_window_bytes=w) for w in WINDOWS_BYTES),
              "rises (more slowly) to 94 Mbit/s at 10 KB, then flat"),
        Sweep("length_receiver", 4, "Receiver's read length varied (sender -l 64 KB)", "receiver length (bytes)", 30,
              tuple(Point(n, server_length_bytes=n, client_length_bytes=FIXED_LENGTH_BYTES) for n in LENGTHS_BYTES),
              "rises with the length, 94 Mbit/s from 64 KB on"),
        Sweep("length_sender", 5, "Sender's write length varied (receiver -l 64 KB)", "sender length (bytes)", 30,
              tuple(Point(n, server_length_bytes=FIXED_LENGTH_BYTES, client_length_bytes=n) for n in LENGTHS_BYTES),
              "like Figure 4: 94 Mbit/s from 64 KB on"),
        Sweep("rate", 6, "Link rate varied (tbf latency 50ms burst 5kb)", "tbf rate (kbit/s)", 30,
              tuple(Point(r, network=Network(tbf_rate_kbit=r)) for r in RATES_KBIT),
              "a little below the rate up to 100 Mbit/s, 94 Mbit/s above"),
        Sweep("delay", 7, "Link delay varied (A->B, jitter 10 ms)", "one-way delay (ms)", 30,
              tuple(Point(d, network=_delay_network(d)) for d in DELAYS_MS),
              "94 Mbit/s without delay, falling linearly with delay"),
        Sweep("loss_30s", 8, "Random loss varied, 30 s runs", "loss probability", 30,
              tuple(Point(p, network=Network(loss=p)) for p in LOSSES),
              "94 Mbit/s without loss, falling exponentially with loss"),
        Sweep("loss_60s", 9, "Random loss varied, 60 s runs", "loss probability", 60,
              tuple(Point(p, network=Network(loss=p)) for p in LOSSES),
              "as Figure 8: duration does not change it"),
        Sweep("bdp", 10, "Window vs BDP: 200 Mbit/s tbf, 80 ms delay", "receiver window (bytes)", 30,
              tuple(Point(w, network=Network(tbf_rate_kbit=BDP_RATE_KBIT, delay_ms=BDP_DELAY_MS,
                                             jitter_ms=STUDY_JITTER_MS), server_window_bytes=w)
                    for w in BDP_WINDOWS_BYTES),
              "rises with the window up to 200 KB (window below the BDP)"),
        Sweep("parallel", 11, "Parallel TCP sessions", "TCP sessions", 60,
              tuple(Point(n, tcp_sessions=n) for n in PARALLEL),
              "total stays 94 Mbit/s, each session r/n"),
        Sweep("udp1", 12, "TCP sessions beside 1 UDP session", "TCP sessions", 60,
              tuple(Point(n, tcp_sessions=n, udp_sessions=1) for n in TCP_BESIDE_UDP),
              "UDP 1 Mbit/s, total 94 Mbit/s, TCP sessions share the rest equally"),
        Sweep("udp2", 13, "TCP sessions beside 2 UDP sessions", "TCP sessions", 60,
              tuple(Point(n, tcp_sessions=n, udp_sessions=2) for n in TCP_BESIDE_UDP),
              "each UDP 1 Mbit/s, TCP sessions share 94 - 2 = 92 Mbit/s"),
    ]


def quick_sweeps() -> list[Sweep]:
    return [s.with_points(QUICK_POINTS[s.key]).with_duration(QUICK_DURATION_S.get(s.key, QUICK_DEFAULT_DURATION_S))
            for s in study_sweeps()]


def select(sweeps: list[Sweep], keys: list[str] | None) -> list[Sweep]:
    if not keys:
        return sweeps
    known = {s.key for s in sweeps}
    unknown = [k for k in keys if k not in known]
    if unknown:
        from congestlab.errors import SpecError

        raise SpecError("tcp-lab tasks", f"unknown {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [s for s in sweeps if s.key in keys]


def study_expectation(sweep_key: str, point: Point) -> dict[str, float]:
    """What the study states for this point, in Mbit/s: keys total, tcp_per_session,
    udp_per_session (only those it states)."""
    m = STUDY_MAX_MBPS
    if sweep_key == "window_receiver" and point.x >= FIXED_WINDOW_BYTES:
        return {"total": m}
    if sweep_key == "window_sender" and point.x >= FIXED_WINDOW_BYTES:
        return {"total": m}
    if sweep_key.startswith("length_") and point.x >= FIXED_LENGTH_BYTES:
        return {"total": m}
    if sweep_key == "rate" and point.x >= CABLE_RATE_MBIT * 1000:
        return {"total": m}
    if sweep_key == "delay" and point.x == 0:
        return {"total": m}
    if sweep_key.startswith("loss_") and point.x == 0:
        return {"total": m}
    if sweep_key == "parallel":
        return {"total": m, "tcp_per_session": m / point.tcp_sessions}
    if sweep_key in ("udp1", "udp2"):
        udp = STUDY_UDP_MBPS * point.udp_sessions
        return {"total": m, "udp_per_session": STUDY_UDP_MBPS, "tcp_per_session": (m - udp) / point.tcp_sessions}
    return {}


def window_limit_mbps(window_bytes: float, rtt_ms: float) -> float:
    """Throughput a window allows per RTT (the BDP task's model line)."""
    return window_bytes * 8 / (rtt_ms / 1000) / 1e6
