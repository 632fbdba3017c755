"""A study spec's sweep points as leansim scenarios, or one line saying what the simulator
cannot model (SpecError, exit 2).

What leansim models (crates/leansim/src/scenario.rs): one lean server; one `get` workload
asking it; one bottleneck link (its rate and FIFO on both directions, delay and loss in the
directions its `impair_direction` names); background MGEN UDP classes (constant-rate
datagrams through the bottleneck) and `http_load` fetches from the lean server (competing
lean flows). Everything else is refused rather than silently left out. What leansim makes of
a background is its runner's (`leansim_background`, workloads/).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from congestlab.errors import SpecError
from congestlab.servers.files import url_path
from congestlab.spec.lean_knobs import KNOB_FLAGS, knob_args
from congestlab.spec.models import LinkSpec, StudySpec
from congestlab.spec.network import Direction, shortest_paths
from congestlab.spec.sweep import Point, expand
from congestlab.workloads import runner_for


@dataclass
class SimPoint:
    """One sweep point as a scenario (without `root` and `seed`: set per repetition)."""

    point_id: str
    experiment: str
    labels: dict[str, str]
    repetitions: int
    server: str
    file_kibs: list[int]
    # (family, file_kib) of each measured GET, in the order they run
    gets: list[tuple[str, int]]
    client: str
    scenario: dict = field(default_factory=dict)


def _node_links(study: StudySpec):
    for node in study.topology.nodes:
        for i, link in enumerate(node.links):
            yield node.name, i, link


def _impaired(link: LinkSpec) -> bool:
    return link.rate_bps is not None or link.delay_ms > 0 or link.loss > 0 or link.jitter_ms > 0 \
        or link.tbf_rate_bps is not None


def _data_direction(study: StudySpec, node: str, index: int, server_node: str, client: str, here: str) -> Direction:
    """How the server's packets to the client cross the link: egress when they leave the
    link's node onto its switch, ingress when they arrive at the node from it."""
    paths = shortest_paths(study.topology, server_node, client)
    on_link = [c for path in paths for c in path if (c.node, c.link_index) == (node, index)]
    if not paths or len(on_link) < len(paths):
        raise SpecError(here, f"the link is not on the path from the server's node {server_node!r} to the client "
                        f"{client!r}; the simulator's bottleneck carries the GETs")
    # a shortest path crosses a switch once, so every shortest path crosses the link the same way
    return on_link[0].direction


def _bottleneck(study: StudySpec, server_node: str, client: str, where: str) -> tuple[dict, dict]:
    """(data link, ack link) of the scenario: server -> client and client -> server."""
    shaped = [(n, i, link) for n, i, link in _node_links(study) if _impaired(link)]
    if len(shaped) > 1:
        names = ", ".join(f"nodes.{n}.links.{link.switch}" for n, _, link in shaped)
        raise SpecError(f"{where}topology", f"{len(shaped)} shaped or impaired links ({names}); the simulator "
                        "models one bottleneck")
    if not shaped:
        return ({"rate_bps": 0, "queue_packets": 100_000}, {"rate_bps": 0, "queue_packets": 100_000})
    node, index, link = shaped[0]
    here = f"{where}nodes.{node}.links.{link.switch}"
    if link.tbf_rate_bps is not None:
        raise SpecError(f"{here}.tbf_rate_bps", "a token bucket is not simulated (leansim has a rate and a FIFO)")
    if link.jitter_ms > 0:
        raise SpecError(f"{here}.jitter_ms", "jitter is not simulated (leansim has a fixed delay)")
    base = {"rate_bps": link.rate_bps or 0, "queue_packets": link.queue_packets}
    impair = {"delay_ms": link.delay_ms, "loss": link.loss}
    data_dir = _data_direction(study, node, index, server_node, client, here)
    data = dict(base, **(impair if link.impair_direction in ("both", data_dir) else {}))
    ack = dict(base, **(impair if link.impair_direction in ("both", "egress" if data_dir == "ingress" else "ingress")
                        else {}))
    return data, ack


def _background(study: StudySpec, point: Point, lean: str, where: str) -> list[dict]:
    flows: list[dict] = []
    by_name = {w.name: w for w in study.workloads}
    for name in point.workloads:
        w = by_name[name]
        here = f"{where}workloads.{name}"
        simulated = runner_for(w).leansim_background(w, study, lean, here)
        if simulated is None:
            raise SpecError(f"{here}.kind", f"{w.kind!r} is not simulated (leansim models get, MGEN UDP and "
                            "http_load against the lean server)")
        flows += simulated
    return flows


def sim_point(point: Point) -> SimPoint:
    study = point.study
    where = f"{point.id}: "
    gets = [w for w in study.workloads if w.name in point.workloads and w.measures_gets]
    if len(gets) != 1:
        raise SpecError(f"{where}workloads", f"{len(gets)} get workloads; the simulator measures exactly one")
    get = gets[0]
    servers = {s.name: s for s in study.servers}
    asked = {r.server for r in get.requests}
    clients = {r.client for r in get.requests}
    if len(asked) != 1 or len(clients) != 1:
        raise SpecError(f"{where}workloads.{get.name}.requests", "one server and one client in every request "
                        f"(got servers {sorted(asked)}, clients {sorted(clients)})")
    server = servers[next(iter(asked))]
    if server.kind != "lean":
        raise SpecError(f"{where}servers.{server.name}.kind", f"{server.kind!r} is not simulated (only the lean "
                        "server: leansim runs leanweb's own stack)")
    for name in server.knobs:
        if name not in KNOB_FLAGS:
            raise SpecError(f"{where}servers.{server.name}.knobs.{name}", "unknown knob")
    client = next(iter(clients))
    data, ack = _bottleneck(study, server.node, client, where)
    order = [(family, r.file_kib) for r in get.requests for family in r.families]
    scenario = {
        "server_args": knob_args(server.knobs),
        "port": server.port,
        "data_link": data,
        "ack_link": ack,
        "gets": [{"family": family, "path": url_path(kib)} for family, kib in order],
        "gap_ms": study.gap_s * 1000.0,
        "background": _background(study, point, server.name, where),
        "limit_s": max(60.0, get.timeout_s * len(order) + study.warmup_s),
    }
    scenario["warmup_ms"] = study.warmup_s * 1000.0 if scenario["background"] else 0.0
    files = sorted({kib for _, kib in order} | set(server.files_kib))
    return SimPoint(point.id, point.experiment, dict(point.labels), point.repetitions, server.name, files, order,
                    client, scenario)


def sim_points(study: StudySpec, quick: bool = False) -> list[SimPoint]:
    return [sim_point(p) for p in expand(study, quick)]
