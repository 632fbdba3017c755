"""The study spec: topology, servers, workloads, experiments with sweep axes, report.

One TOML file declares a whole study (docs/spec.md is generated from these models). Units
are in field names (rate_bps, queue_packets, warmup_s). Every model forbids unknown keys so
a typo is reported by name instead of silently ignored.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from congestlab.spec.servers import CongestionControl, Scalar, ServerSpec
from congestlab.spec.validate import check_references, non_finite_problem
from congestlab.spec.validation_context import VALUES_CHECKED, stored
from congestlab.spec.workloads import MAX_RATE_BPS, Workload


Family = Literal["v4", "v6"]


class Strict(BaseModel):
    # nan and inf are refused: a nan passes no bound (`warmup_s = nan` would read as "above 600")
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SwitchSpec(Strict):
    """An Ethernet segment (a Linux bridge) with its IPv4 and IPv6 subnets."""

    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,5}$", description="bridge name, 1-6 lower-case characters")
    subnet4: str = Field(description="IPv4 subnet, /29 or larger, e.g. 10.0.1.0/24; not loopback, link-local, "
                         "multicast or reserved")
    subnet6: str = Field(description="IPv6 /64, e.g. fd00:0:0:1::/64; not loopback, link-local or multicast")

    @field_validator("subnet4")
    @classmethod
    def _v4(cls, value: str, info: ValidationInfo) -> str:
        net = ipaddress.ip_network(value, strict=True)
        if net.version != 4 or net.prefixlen > 29:
            raise ValueError("must be an IPv4 network of /29 or larger, e.g. 10.0.1.0/24")
        return _routable(net, value, info)

    @field_validator("subnet6")
    @classmethod
    def _v6(cls, value: str, info: ValidationInfo) -> str:
        net = ipaddress.ip_network(value, strict=True)
        if net.version != 6 or net.prefixlen != 64:
            raise ValueError("must be an IPv6 /64, e.g. fd00:0:0:1::/64")
        return _routable(net, value, info)


def _routable(net: ipaddress.IPv4Network | ipaddress.IPv6Network, value: str, info: ValidationInfo) -> str:
    """A switch's subnet is routed between namespaces: not one the kernel keeps to a host or a
    link (loopback, link-local: a run would fail its reachability check, exit 5) nor one for
    groups or nothing (multicast, reserved, unspecified). (A stored run's spec ran as it is.)"""
    if stored(info):
        return value
    for special in SPECIAL_SUBNETS[net.version]:
        if net.overlaps(special):
            raise ValueError(f"{value} overlaps {special} ({SPECIAL_SUBNETS[net.version][special]}): not a range "
                             "the testbed can route between namespaces; take a private one (10.0.0.0/8, fd00::/8)")
    return value


SPECIAL_SUBNETS = {
    4: {ipaddress.ip_network("0.0.0.0/8"): "this network", ipaddress.ip_network("127.0.0.0/8"): "loopback",
        ipaddress.ip_network("169.254.0.0/16"): "link-local", ipaddress.ip_network("224.0.0.0/4"): "multicast",
        ipaddress.ip_network("240.0.0.0/4"): "reserved"},
    6: {ipaddress.ip_network("::/127"): "loopback and unspecified", ipaddress.ip_network("fe80::/10"): "link-local",
        ipaddress.ip_network("ff00::/8"): "multicast"},
}
# the most a link's delay or jitter may be: what linkem takes (crates/linkem/src/main.rs ms_to_ns)
MAX_DELAY_MS = 3_600_000


class LinkSpec(Strict):
    """A node's attachment to a switch. A rate shapes both directions of this attachment:
    the node's egress and the switch port's egress toward the node's side."""

    switch: str = Field(description="the switch this link attaches to")
    host_id: int | None = Field(default=None, ge=1, le=250, description="address host part; default: order")
    rate_bps: int | None = Field(default=None, gt=0, description="HTB rate in bit/s; none = veth speed")
    queue_packets: int = Field(default=100, ge=1, le=100_000, description="FIFO limit under the shaper, packets")
    tbf_rate_bps: int | None = Field(
        default=None, gt=0, le=MAX_RATE_BPS,
        description="a token bucket below rate_bps in place of the FIFO (the lab report's tbf); at most 1e12")
    tbf_burst_bytes: int = Field(default=5120, ge=1500, description="tbf burst, bytes (the lab report: 5kb)")
    tbf_latency_ms: float = Field(default=50.0, gt=0, le=MAX_DELAY_MS, description="tbf latency, ms (the lab "
                                  "report: 50ms)")
    delay_ms: float = Field(default=0.0, ge=0, le=MAX_DELAY_MS, description="one-way delay added by netem or linkem, "
                            "ms (at most 3,600,000: an hour)")
    jitter_ms: float = Field(default=0.0, ge=0, le=MAX_DELAY_MS, description="delay jitter, ms: each delay drawn "
                             "from delay_ms ± jitter_ms, so at most delay_ms")
    loss: float = Field(default=0.0, ge=0, lt=1, description="random loss probability, 0..1")
    # which way delay/jitter/loss act: egress = packets leaving the node over this link,
    # ingress = packets arriving over it (docs/linkem.md "In the testbed")
    impair_direction: Literal["both", "egress", "ingress"] = Field(
        default="both", description="which way delay/jitter/loss act, seen from the node")

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> "LinkSpec":
        if self.tbf_rate_bps is not None and self.rate_bps is None:
            raise ValueError("tbf_rate_bps needs rate_bps (the token bucket sits under the link's shaper)")
        if self.jitter_ms > self.delay_ms and not stored(info):
            # netem and linkem cut the delays drawn below 0 to 0: the link's delay would no longer average delay_ms
            raise ValueError(f"jitter_ms {self.jitter_ms:g} exceeds delay_ms {self.delay_ms:g}: each delay is drawn "
                             "from delay_ms ± jitter_ms and cannot go below 0")
        return self


class NodeSpec(Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,7}$", description="node name, 1-8 lower-case characters")
    kind: Literal["host", "router"] = "host"
    links: list[LinkSpec] = Field(min_length=1)
    cc: CongestionControl = Field(default="cubic", description="congestion control of the node's routes")
    tcp_timestamps: bool = True
    # "user": the namespace's kernel gets no addresses; its link ends on a bridge where a
    # user-space TCP/IP stack (the lean server's TAP device) owns the node's addresses
    stack: Literal["kernel", "user"] = Field(default="kernel", description="user = a lean server owns the addresses")
    sysctls: dict[str, Scalar] = Field(
        default_factory=dict,
        description="per-namespace sysctls, e.g. {\"net.ipv4.tcp_rmem\" = \"4096 65535 65535\"}")

    @field_validator("sysctls")
    @classmethod
    def _namespaced(cls, value: dict[str, Scalar]) -> dict[str, Scalar]:
        for key in value:
            if not key.startswith(("net.ipv4.", "net.ipv6.", "net.core.")):
                raise ValueError(f"sysctl {key!r}: only per-namespace net.ipv4/net.ipv6/net.core keys")
        return value


class TopologySpec(Strict):
    switches: list[SwitchSpec] = Field(min_length=1)
    nodes: list[NodeSpec] = Field(min_length=2)
    # Links at or above this rate are left at veth speed: a 1 Gbit/s shaper does not fit on
    # 2 cores (~0.8 Gbit/s at 65-96 % CPU), and veth is faster than 1 Gbit/s anyway.
    # (so a link's rate_bps, however high, reaches tc only below MAX_RATE_BPS)
    unshaped_at_or_above_bps: int = Field(default=1_000_000_000, gt=0, le=MAX_RATE_BPS)
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


class CaptureSpec(Strict):
    """What is recorded beside the pcaps in every repetition (docs/probes.md: how, and what it costs)."""

    kernel_probe: bool = Field(default=False, description="each kernel server's cwnd, ssthresh, RTT, in-flight and "
                               "pacing rate per ACK and its retransmissions (BPF on tcp:tcp_probe)")
    queue_probe: bool = Field(default=False, description="every shaped egress's backlog and drops at its dequeues "
                              "(BPF on qdisc:qdisc_dequeue)")
    queue_interval_us: int = Field(default=1000, ge=50, le=1000,
                                   description="at most one queue row per this many microseconds per queue")
    probe_max_bytes: int = Field(default=5_000_000, ge=10_000, le=1_000_000_000,
                                 description="the samplers stop writing rows of a repetition at this size")
    probe_bpf_stats: bool = Field(default=False, description="hold the kernel's BPF run-time accounting on while the "
                                  "sampler runs (machine-wide, released with it) and record its programs' CPU time")


class AxisSpec(Strict):
    """One sweep axis. `fields` are dotted paths into the study (servers.lean.knobs.weight,
    nodes.r1.links.s0.rate_bps, workloads.bg.rate_bps, ...); each value sets them all (one
    field: a scalar per value; several fields: a list per value, moving together = paired).
    Or `levels`: names of the study's [levels], each a named set of field values."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,23}$", description="column name of this axis in the results")
    fields: list[str] = Field(default_factory=list, description="dotted field paths this axis sets")
    values: list[Any] = Field(default_factory=list, description="one entry per point of this axis")
    labels: list[str] = Field(default_factory=list, description="names of the values; default: the values")
    levels: list[str] = Field(default_factory=list, description="names of [levels] entries, in order")

    @model_validator(mode="after")
    def _shape(self) -> "AxisSpec":
        if bool(self.levels) == bool(self.fields):
            raise ValueError(f"axis {self.name!r}: give either fields + values or levels")
        if self.fields:
            if not self.values:
                raise ValueError(f"axis {self.name!r}: no values")
            if len(self.fields) > 1:
                for value in self.values:
                    if not isinstance(value, list) or len(value) != len(self.fields):
                        raise ValueError(f"axis {self.name!r}: each value must be a list of {len(self.fields)} "
                                         f"(one per field), got {value!r}")
        count = len(self.levels) or len(self.values)
        if self.labels and len(self.labels) != count:
            raise ValueError(f"axis {self.name!r}: {len(self.labels)} labels for {count} values")
        labels = self.point_labels()
        if len(set(labels)) != len(labels):
            raise ValueError(f"axis {self.name!r}: labels must be unique, got {labels}")
        return self

    def point_labels(self) -> list[str]:
        if self.labels:
            return list(self.labels)
        if self.levels:
            return list(self.levels)
        return ["+".join(map(_label, v)) if isinstance(v, list) else _label(v) for v in self.values]


def _label(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class LevelSpec(Strict):
    """A named set of field values, e.g. a congestion level: {"workloads.bg.rate_bps" = 75e6, ...}."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,16}$")
    title: str = ""
    set: dict[str, Any] = Field(default_factory=dict, description="dotted field path -> value")


class ExperimentSpec(Strict):
    """A block of the study: the servers it runs, its workloads and its sweep axes."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,23}$")
    title: str = ""
    servers: list[str] | None = Field(default=None, description="servers started for this block; default: all")
    workloads: list[str] | None = Field(default=None, description="workloads of this block; default: all")
    axes: list[AxisSpec] = Field(default_factory=list, description="Cartesian product of these axes")
    set: dict[str, Any] = Field(default_factory=dict, description="field values fixed for this block")
    repetitions: int | None = Field(default=None, ge=1, le=1000, description="default: the study's")


class QuickExperimentSpec(Strict):
    """--quick for one experiment: its own axis labels and settings (when axes of several
    experiments share a name, e.g. tcp-lab's `x`)."""

    axes: dict[str, list[str]] = Field(default_factory=dict, description="axis name -> labels to keep")
    set: dict[str, Any] = Field(default_factory=dict, description="field values for --quick, after quick.set")


class QuickSpec(Strict):
    """What `--quick` runs: which blocks, which axis values, how many repetitions."""

    repetitions: int = Field(default=1, ge=1, le=1000)
    experiments: list[str] | None = Field(default=None, description="blocks to run; default: all")
    axes: dict[str, list[str]] = Field(default_factory=dict, description="axis name -> labels to keep")
    set: dict[str, Any] = Field(default_factory=dict, description="field values changed for --quick (durations)")
    per_experiment: dict[str, QuickExperimentSpec] = Field(
        default_factory=dict, description="experiment name -> its quick axes/settings (these win over axes/set)")


class StudySpec(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")
    extends: str | None = Field(default=None, description="a preset this file starts from (top-level keys replace)")
    set: dict[str, Any] = Field(
        default_factory=dict, description="dotted field path -> value, applied to the study as loaded (a preset's "
        "variant: extends + set); also under --quick, over the [quick] settings the file inherits")
    title: str = ""
    source: str = ""
    topology: TopologySpec
    servers: list[ServerSpec] = Field(default_factory=list)
    workloads: list[Workload] = Field(min_length=1)
    levels: list[LevelSpec] = Field(default_factory=list)
    experiments: list[ExperimentSpec] = Field(default_factory=lambda: [ExperimentSpec(name="main")])
    repetitions: int = Field(default=10, ge=1, le=1000)
    quick: QuickSpec = Field(default_factory=QuickSpec)
    order: Literal["interleaved", "sequential"] = Field(
        default="interleaved", description="interleaved: compared servers side by side, repetitions shuffled per "
        "round, mirrored blocks, seeded family order; sequential: the seeds' own order (see Order above)")
    seed: int = Field(default=1, description="seed of the interleaved order and of the families' order")
    passes: Literal[1, 2] = Field(
        default=2, description="interleaved: 2 = each unit's rounds in two visits, the second pass mirrored (ABBA; "
        "the drift check compares the reference unit's ends); 1 = one visit per unit, one warm-up (no drift check, "
        "no mirror); also per experiment (`set`) and in [quick] (see Order above)")
    placement: Literal["unit", "repetition"] = Field(
        default="unit", description="with --cluster: unit = a unit's repetitions on one node (a cell is compared "
        "on one machine); repetition = each repetition round is its own task, spread over the nodes")
    warmup_s: float = Field(default=3.0, ge=0, le=600, description="background runs this long before measuring")
    gap_s: float = Field(default=0.3, ge=0, le=60, description="pause between measured requests")
    capture: CaptureSpec = Field(default_factory=CaptureSpec, description="[capture]: the BPF samplers recorded beside "
                                 "the pcaps (CaptureSpec)")
    calibrate: tuple[str, str] | None = Field(
        default=None, description="(server-side node, client node) of --calibrate's iperf3 flow")
    published: list[dict[str, Scalar | None]] = Field(
        default_factory=list, description="the seed's numbers: keys (axis or column values) and metric values")
    report: dict[str, Any] = Field(default_factory=dict, description="declared tables, plots and claims")

    @model_validator(mode="before")
    @classmethod
    def _finite(cls, data: Any, info: ValidationInfo) -> Any:
        if (info.context or {}).get(VALUES_CHECKED):
            return data
        problem = non_finite_problem(data)
        if problem:
            raise ValueError(problem)
        return data

    @model_validator(mode="after")
    def _references(self, info: ValidationInfo) -> "StudySpec":
        # a stored spec ran before its axes' names were checked: the analysis flags what they overwrote
        check_references(self, check_axis_columns=not stored(info))
        return self

    # --- lookups ----------------------------------------------------------------------
    def server(self, name: str) -> ServerSpec:
        for server in self.servers:
            if server.name == name:
                return server
        raise KeyError(name)

    def workload(self, name: str) -> Workload:
        for workload in self.workloads:
            if workload.name == name:
                return workload
        raise KeyError(name)

    def experiment(self, name: str) -> ExperimentSpec:
        for exp in self.experiments:
            if exp.name == name:
                return exp
        raise KeyError(name)

    def level(self, name: str) -> LevelSpec:
        for level in self.levels:
            if level.name == name:
                return level
        raise KeyError(name)
