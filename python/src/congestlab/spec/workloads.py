"""Workloads of a study: the traffic a point runs, one model per kind (`kind = "..."`).

Background kinds (mgen, http_load) live while their settings stay the same (`lifetime =
"block"`) or restart per point; measuring kinds (get, iperf, anma, ping) run once per point and
repetition. Each kind has one runner in congestlab/workloads/ and one results table.
What the spec asks of a kind (hosts and servers named, ...) is a method of its model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, ValidationInfo, model_validator

from congestlab.spec.get_workload import GetWorkload
from congestlab.spec.validation_context import stored
from congestlab.spec.workload_base import Family, StrictModel, WorkloadModel
from congestlab.spec.workload_ends import Crossing, Named

if TYPE_CHECKING:
    pass

MGEN_CLASSES = ("tcp4", "tcp6", "udp4", "udp6")
# the fastest rate a spec may ask for, of a link or a workload: above any veth here (tc's 64-bit
# rates go further)
MAX_RATE_BPS = 10**12
MAX_FETCHES_PER_S = 1_000_000


class MgenPair(StrictModel):
    family: Family
    source: str = Field(description="host sending the TCP classes (and UDP unless udp_from = sink or reversed)")
    sink: str = Field(description="host receiving them")


class MgenWorkload(WorkloadModel):
    """MGEN background: `flows` flows at different rates adding up to rate_bps in the mix."""

    kind: Literal["mgen"]
    lifetime: Literal["block", "point"] = Field(default="block", description="block: kept while unchanged")
    pairs: list[MgenPair] = Field(min_length=1)
    rate_bps: float = Field(default=0, ge=0, le=10_000_000_000, description="total offered rate, bit/s (0 = off)")
    mix: dict[str, float] = Field(default_factory=lambda: {"tcp4": 100.0},
                                  description="percent per class tcp4/tcp6/udp4/udp6, adding up to 100")
    # seed 001 section III: the MGEN hosts are "TCP source and UDP sink" on one side and
    # "TCP sink and UDP source" on the other, so UDP may cross the network opposite to TCP
    reverse: list[str] = Field(default_factory=list, description="classes sent from sink to source")
    # the same for both UDP classes as one scalar, so a sweep axis can move it
    udp_from: Literal["source", "sink"] = Field(
        default="source", description="sink: both UDP classes run from the pair's sink to its source")
    flows: int = Field(default=10, ge=1, le=100)
    tcp_payload_v4_bytes: int = Field(default=1460, ge=16, le=1460)
    tcp_payload_v6_bytes: int = Field(default=1440, ge=16, le=1440)
    udp_payload_v4_bytes: int = Field(default=1460, ge=16, le=1472)
    udp_payload_v6_bytes: int = Field(default=1440, ge=16, le=1452)
    base_port: int = Field(default=5000, ge=1024, le=60000)
    tolerance_pct: float = Field(default=3.0, gt=0, description="achieved vs requested: warn beyond this")

    @model_validator(mode="after")
    def _mix(self) -> "MgenWorkload":
        unknown = (set(self.mix) | set(self.reverse)) - set(MGEN_CLASSES)
        if unknown:
            raise ValueError(f"unknown MGEN class {sorted(unknown)[0]!r}; known: {', '.join(MGEN_CLASSES)}")
        total = sum(self.mix.values())
        if self.rate_bps > 0 and abs(total - 100.0) > 1e-6:
            raise ValueError(f"mix percentages add up to {total:g}, not 100")
        return self

    @property
    def long_lived(self) -> bool:
        return self.lifetime == "block"

    def named(self) -> list[Named]:
        return [n for pair in self.pairs for n in (Named("pairs source", pair.source), Named("pairs sink", pair.sink))]

    def crossings(self) -> list[Crossing]:
        return [Crossing(f"pairs[{i}].sink", pair.sink, pair.source) for i, pair in enumerate(self.pairs)]

    def reversed_classes(self) -> frozenset[str]:
        """Classes sent from the pair's sink to its source: `reverse`, plus UDP with udp_from = sink."""
        return frozenset(self.reverse) | (frozenset({"udp4", "udp6"}) if self.udp_from == "sink" else frozenset())

    def class_rates_bps(self) -> dict[str, float]:
        return {c: self.rate_bps * self.mix.get(c, 0.0) / 100 for c in MGEN_CLASSES}


class HttpLoadWorkload(WorkloadModel):
    """dualbench `load`: open-loop fetches of one file from a server at a set rate (the
    studies' http_load stress and "BT" background)."""

    kind: Literal["http_load"]
    lifetime: Literal["block", "point"] = "block"
    client: str = Field(description="host running dualbench")
    server: str = Field(description="server fetched from")
    family: Family = "v4"
    file_kib: int = Field(default=320, ge=1)
    rate_mbps: float | None = Field(default=None, ge=0, le=MAX_RATE_BPS / 1e6,
                                    description="offered body rate, Mbit/s (0 = off)")
    fetches_per_s: float | None = Field(default=None, gt=0, le=MAX_FETCHES_PER_S, description="or: fetches per second")
    keepalive: bool = Field(default=False, description="false: a new connection per fetch")
    timeout_s: float = Field(default=10.0, gt=0, le=600, description="per fetch")
    # dualbench load --max-connections (crates/dualbench/src/load.rs): without a cap an open
    # loop against a congested server holds up to rate x timeout sockets
    max_connections: int | None = Field(
        default=None, ge=1, le=1_000_000,
        description="at most this many fetches open at once; fetches due beyond it are skipped (counted)")
    duration_s: float = Field(default=0, ge=0, description="with no measuring workload: run this long")
    tolerance_pct: float = Field(default=3.0, gt=0, description="offered vs configured fetch rate: warn beyond")
    # true: a fetch skipped at max_connections counts as due for that check (the schedule was
    # kept; load.csv still shows it apart): for a study whose overload is by design (rto, 125 Mbit/s)
    skipped_as_due: bool = Field(
        default=False, description="the offered-rate check counts fetches skipped at the cap as due (overload by design)")

    @model_validator(mode="after")
    def _rate(self) -> "HttpLoadWorkload":
        if (self.rate_mbps is None) == (self.fetches_per_s is None):
            raise ValueError("give exactly one of rate_mbps or fetches_per_s")
        return self

    @property
    def long_lived(self) -> bool:
        return self.lifetime == "block"

    def named(self) -> list[Named]:
        return [Named("client", self.client), Named("server", self.server, server=True, file_kib=self.file_kib)]

    def crossings(self) -> list[Crossing]:
        return [Crossing("client", self.client, self.server, server=True)]

    def servers_asked(self) -> list[str]:
        """No server while the load is off (rate_mbps = 0)."""
        return [] if self.rate_mbps == 0 else [self.server]

    def fetch_rate_per_s(self) -> float:
        if self.fetches_per_s is not None:
            return self.fetches_per_s
        return (self.rate_mbps or 0.0) * 1e6 / (self.file_kib * 1024 * 8)


class IperfFlow(StrictModel):
    protocol: Literal["tcp", "udp"] = "tcp"
    cc: Literal["cubic", "reno", "bbr", "compound"] | None = Field(
        default=None, description="per-socket congestion control (iperf3 -C); none: the sender's routes'")
    client: str | None = Field(default=None, description="sending host of this flow; default: the workload's")


class IperfWorkload(WorkloadModel):
    """iperf 2 or iperf3 sessions from `client` (sender) to `server` (receiver)."""

    kind: Literal["iperf"]
    version: Literal[2, 3] = 2
    client: str = Field(description="sending host")
    server: str = Field(description="receiving host")
    family: Family = "v4"
    duration_s: float = Field(default=10.0, gt=0, le=3600)
    tcp_sessions: int = Field(default=1, ge=0, le=64)
    udp_sessions: int = Field(default=0, ge=0, le=64)
    udp_rate_bps: float = Field(default=1_000_000, gt=0, le=MAX_RATE_BPS)
    flows: list[IperfFlow] = Field(default_factory=list, description="iperf3: one entry per flow (overrides sessions)")
    server_window_bytes: int | None = Field(default=None, ge=256)
    client_window_bytes: int | None = Field(default=None, ge=256)
    server_length_bytes: int | None = Field(default=None, ge=1)
    client_length_bytes: int | None = Field(default=None, ge=1)
    base_port: int = Field(default=5201, ge=1024, le=60000)
    # a fidelity check: the steady rate (iperf 2: the server's 1 s reports after omit_s;
    # iperf3: -O omit_s) of all TCP sessions together must reach this
    omit_s: float = Field(default=0.0, ge=0, le=60, description="leave the first seconds out of the steady rate")
    expect_min_mbps: float | None = Field(default=None, gt=0, description="check: steady TCP rate at least this")

    @model_validator(mode="after")
    def _shape(self, info: ValidationInfo) -> "IperfWorkload":
        if self.version == 2 and self.flows:
            raise ValueError("flows (per-flow cc and sender) need version = 3; iperf 2 takes tcp/udp_sessions")
        if self.version == 3 and self.flows and not stored(info) and ("tcp_sessions" in self.model_fields_set
                                                                      or "udp_sessions" in self.model_fields_set):
            raise ValueError("give either flows or tcp_sessions/udp_sessions, not both")
        if not self.flows and self.tcp_sessions + self.udp_sessions == 0:
            raise ValueError("no sessions: tcp_sessions + udp_sessions is 0 and no flows")
        if self.expect_min_mbps is not None and self.duration_s - self.omit_s < 1:
            # the steady rate comes from 1 s reports after omit_s (iperf 2: the server's -i 1)
            raise ValueError(f"omit_s {self.omit_s:g} leaves less than one 1 s report of duration_s "
                             f"{self.duration_s:g}")
        if self.expect_min_mbps is not None and self.duration_s < 2:
            raise ValueError("expect_min_mbps needs duration_s >= 2 (1 s reports, then the whole-run line)")
        return self

    def named(self) -> list[Named]:
        return [Named("client", self.client), Named("server", self.server),
                *(Named(f"flows[{i}].client", f.client) for i, f in enumerate(self.flows) if f.client is not None)]

    def crossings(self) -> list[Crossing]:
        return [Crossing("client", self.client, self.server),
                *(Crossing(f"flows[{i}].client", f.client, self.server) for i, f in enumerate(self.flows)
                  if f.client is not None)]

    def flow_list(self) -> list[IperfFlow]:
        """iperf3: the flows as declared, or tcp_sessions TCP then udp_sessions UDP flows."""
        if self.flows:
            return list(self.flows)
        return [IperfFlow(protocol="tcp")] * self.tcp_sessions + [IperfFlow(protocol="udp")] * self.udp_sessions


class AnmaWorkload(WorkloadModel):
    """dualbench `anma`: requests over IPv6 and IPv4 in a ratio, with concurrency (seed 004)."""

    kind: Literal["anma"]
    client: str
    server: str
    file_kib: int = Field(default=4, ge=1)
    v6: int = Field(default=1, ge=0, description="IPv6 share of the address list")
    v4: int = Field(default=1, ge=0, description="IPv4 share of the address list")
    requests: int = Field(default=10_000, ge=1)
    concurrency: int = Field(default=1_000, ge=1)
    timeout_s: float = Field(default=5.0, gt=0, le=600)

    @model_validator(mode="after")
    def _ratio(self) -> "AnmaWorkload":
        if self.v6 + self.v4 == 0:
            raise ValueError("v6:v4 ratio 0:0")
        return self

    def named(self) -> list[Named]:
        return [Named("client", self.client), Named("server", self.server, server=True, file_kib=self.file_kib)]

    def crossings(self) -> list[Crossing]:
        return [Crossing("client", self.client, self.server, server=True)]

    def servers_asked(self) -> list[str]:
        return [self.server]


class PingWorkload(WorkloadModel):
    """ping from `client` to `server` (a host): RTT and loss of the emulated path."""

    kind: Literal["ping"]
    client: str
    server: str
    family: Family = "v4"
    count: int = Field(default=100, ge=1, le=1_000_000)
    interval_s: float = Field(default=0.01, ge=0.001, le=10, description="below 0.002 s needs root (we are)")
    flood: bool = Field(default=False, description="ping -f -q: as fast as replies come, at most every interval_s")
    # fidelity checks of the emulated path (a failing check is a warning in the manifest)
    expect_rtt_ms: float | None = Field(default=None, ge=0, description="check: mean and median RTT")
    rtt_tolerance_ms: float = Field(default=0.5, gt=0)
    expect_loss: float | None = Field(default=None, ge=0, lt=1, description="check: loss fraction")
    loss_tolerance: float = Field(default=0.003, gt=0, description="absolute, as a fraction")
    loss_min_packets: int = Field(default=10_000, ge=1, description="the loss check asks for this many sent")

    @model_validator(mode="after")
    def _rtt_needs_replies(self) -> "PingWorkload":
        if self.flood and self.expect_rtt_ms is not None:
            raise ValueError("a flood ping (-q) prints no per-reply times; check the RTT with flood = false")
        return self

    def named(self) -> list[Named]:
        return [Named("client", self.client), Named("server", self.server)]

    def crossings(self) -> list[Crossing]:
        return [Crossing("client", self.client, self.server)]


Workload = Annotated[MgenWorkload | HttpLoadWorkload | GetWorkload | IperfWorkload | AnmaWorkload | PingWorkload,
                     Field(discriminator="kind")]
