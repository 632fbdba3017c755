"""The experiment spec: topology, servers, background traffic, levels, measured request.

Units are in field names (rate_bps, queue_packets, warmup_s). Every model forbids unknown
keys so a typo is reported by name instead of silently ignored.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CongestionControl = Literal["cubic", "reno", "bbr", "compound"]
Family = Literal["v4", "v6"]
# Debian's httpd and nginx run on kernel TCP; "lean" is the user-space leanweb server.
ServerKind = Literal["apache", "nginx", "lean"]
FILE_SIZES_KIB = {"160KB": 160, "320KB": 320, "504KB": 504, "4KB": 4}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SwitchSpec(Strict):
    """An Ethernet segment (a Linux bridge) with its IPv4 and IPv6 subnets."""

    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,5}$")
    subnet4: str
    subnet6: str

    @field_validator("subnet4")
    @classmethod
    def _v4(cls, value: str) -> str:
        net = ipaddress.ip_network(value, strict=True)
        if net.version != 4 or net.prefixlen > 29:
            raise ValueError("must be an IPv4 network of /29 or larger, e.g. 10.0.1.0/24")
        return value

    @field_validator("subnet6")
    @classmethod
    def _v6(cls, value: str) -> str:
        net = ipaddress.ip_network(value, strict=True)
        if net.version != 6 or net.prefixlen != 64:
            raise ValueError("must be an IPv6 /64, e.g. fd00:0:0:1::/64")
        return value


class LinkSpec(Strict):
    """A node's attachment to a switch. A rate shapes both directions of this attachment:
    the node's egress and the switch port's egress toward the node's side."""

    switch: str
    host_id: int | None = Field(default=None, ge=1, le=250, description="address host part; default: order")
    rate_bps: int | None = Field(default=None, gt=0)
    queue_packets: int = Field(default=100, ge=1, le=100_000)
    delay_ms: float = Field(default=0.0, ge=0)
    jitter_ms: float = Field(default=0.0, ge=0)
    loss: float = Field(default=0.0, ge=0, lt=1)
    # which way delay/jitter/loss act: egress = packets leaving the node over this link,
    # ingress = packets arriving over it (docs/linkem.md "In the testbed")
    impair_direction: Literal["both", "egress", "ingress"] = "both"


class NodeSpec(Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,7}$")
    kind: Literal["host", "router"] = "host"
    links: list[LinkSpec] = Field(min_length=1)
    cc: CongestionControl = "cubic"
    tcp_timestamps: bool = True
    # "user": the namespace's kernel gets no addresses; its link ends on a bridge where a
    # user-space TCP/IP stack (the lean server's TAP device) owns the node's addresses
    stack: Literal["kernel", "user"] = "kernel"


class TopologySpec(Strict):
    switches: list[SwitchSpec] = Field(min_length=1)
    nodes: list[NodeSpec] = Field(min_length=2)
    # Links at or above this rate are left at veth speed: a 1 Gbit/s shaper does not fit on
    # 2 cores (~0.8 Gbit/s at 65-96 % CPU), and veth is faster than 1 Gbit/s anyway.
    unshaped_at_or_above_bps: int = 1_000_000_000
    # who realises delay_ms/jitter_ms/loss: netem when the kernel has it (auto), or always
    # congestlab's NFQUEUE emulator linkem
    link_emulator: Literal["auto", "linkem", "netem"] = "auto"

    @model_validator(mode="after")
    def _references(self) -> "TopologySpec":
        switches = {s.name for s in self.switches}
        if len(switches) != len(self.switches):
            raise ValueError("switch names must be unique")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique")
        for node in self.nodes:
            seen = set()
            for link in node.links:
                if link.switch not in switches:
                    raise ValueError(f"node {node.name!r} links to unknown switch {link.switch!r}")
                if link.switch in seen:
                    raise ValueError(f"node {node.name!r} has two links to switch {link.switch!r}")
                seen.add(link.switch)
            if node.kind == "host" and len(node.links) != 1:
                raise ValueError(f"host {node.name!r} must have exactly one link (routers may have more)")
        return self

    def node(self, name: str) -> NodeSpec:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)


class ServerSpec(Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,15}$")
    kind: ServerKind = "apache"
    node: str
    port: int = Field(default=80, ge=1, le=65535)
    cc: CongestionControl = "cubic"
    files_kib: list[int] = Field(default=[160, 320, 504], min_length=1)
    # knobs passed to the lean server (rto_alpha, sampling, weight, ...)
    knobs: dict[str, str | int | float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _cc_of_kind(self) -> "ServerSpec":
        # the lean server's TCP is its own: a kernel algorithm would be recorded but never used
        if self.kind == "lean" and "cc" in self.model_fields_set:
            raise ValueError("a lean server has no kernel congestion control; set knobs.cc (\"none\") instead of cc")
        if self.kind != "lean" and self.knobs:
            raise ValueError(f"knobs are for the lean server, not for kind {self.kind!r}")
        return self


class BackgroundPair(Strict):
    family: Family
    source: str
    sink: str


class BackgroundSpec(Strict):
    """MGEN background traffic; each level sets the total rate and the class mix."""

    pairs: list[BackgroundPair] = Field(min_length=1)
    flows: int = Field(default=10, ge=1, le=100)
    tcp_payload_v4_bytes: int = Field(default=1460, ge=16, le=1460)
    tcp_payload_v6_bytes: int = Field(default=1440, ge=16, le=1440)
    udp_payload_v4_bytes: int = Field(default=1460, ge=16, le=1472)
    udp_payload_v6_bytes: int = Field(default=1440, ge=16, le=1452)
    base_port: int = Field(default=5000, ge=1024, le=60000)


class LevelSpec(Strict):
    """One congestion level: total background rate and its TCP/UDP x v4/v6 mix (percent)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,16}$")
    rate_bps: int = Field(default=0, ge=0, le=10_000_000_000)
    tcp4_pct: float = Field(default=0, ge=0, le=100)
    tcp6_pct: float = Field(default=0, ge=0, le=100)
    udp4_pct: float = Field(default=0, ge=0, le=100)
    udp6_pct: float = Field(default=0, ge=0, le=100)

    @model_validator(mode="after")
    def _mix(self) -> "LevelSpec":
        total = self.tcp4_pct + self.tcp6_pct + self.udp4_pct + self.udp6_pct
        if self.rate_bps > 0 and abs(total - 100.0) > 1e-6:
            raise ValueError(f"level {self.name}: percentages add up to {total:g}, not 100")
        return self

    def class_rates_bps(self) -> dict[str, float]:
        return {
            "tcp4": self.rate_bps * self.tcp4_pct / 100,
            "tcp6": self.rate_bps * self.tcp6_pct / 100,
            "udp4": self.rate_bps * self.udp4_pct / 100,
            "udp6": self.rate_bps * self.udp6_pct / 100,
        }


class MeasureSpec(Strict):
    """The measured request: one GET per repetition per family, from `client`."""

    client: str
    file_kib: int = 320
    families: list[Family] = Field(default=["v4", "v6"], min_length=1)
    timeout_s: float = Field(default=30.0, gt=0, le=600)


class PublishedValue(Strict):
    server: str
    level: str
    family: Family
    delay_ms: float | None = None
    throughput_mbps: float | None = None


class ExperimentSpec(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")
    title: str = ""
    source: str = ""
    topology: TopologySpec
    servers: list[ServerSpec] = Field(min_length=1)
    background: BackgroundSpec | None = None
    levels: list[LevelSpec] = Field(min_length=1)
    measure: MeasureSpec
    repetitions: int = Field(default=10, ge=1, le=1000)
    quick_repetitions: int = Field(default=3, ge=1, le=1000)
    warmup_s: float = Field(default=3.0, ge=0, le=600)
    gap_s: float = Field(default=0.3, ge=0, le=60)
    published: list[PublishedValue] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> "ExperimentSpec":
        nodes = {n.name: n for n in self.topology.nodes}

        def host(name: str, what: str) -> None:
            if name not in nodes:
                raise ValueError(f"{what} names unknown node {name!r}")
            if nodes[name].kind != "host":
                raise ValueError(f"{what} {name!r} must be a host, not a router")

        host(self.measure.client, "measure.client")
        names = set()
        for server in self.servers:
            host(server.node, f"server {server.name!r}")
            if server.name in names:
                raise ValueError(f"server name {server.name!r} is used twice")
            names.add(server.name)
            wants_user = server.kind == "lean"
            if (nodes[server.node].stack == "user") != wants_user:
                raise ValueError(
                    f"server {server.name!r} ({server.kind}) needs node {server.node!r} with "
                    f"stack = \"{'user' if wants_user else 'kernel'}\""
                )
            if self.measure.file_kib not in server.files_kib:
                raise ValueError(
                    f"server {server.name!r} does not serve the measured file "
                    f"({self.measure.file_kib} KiB; files_kib = {server.files_kib})"
                )
        levels = [lv.name for lv in self.levels]
        if len(set(levels)) != len(levels):
            raise ValueError("level names must be unique")
        needs_background = any(lv.rate_bps > 0 for lv in self.levels)
        if needs_background and self.background is None:
            raise ValueError("levels ask for background traffic but [background] is missing")
        if self.background:
            for pair in self.background.pairs:
                host(pair.source, "background source")
                host(pair.sink, "background sink")
        return self
