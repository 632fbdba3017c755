"""What a run reads of the testbed's network: reachability before anything runs, and the
shaped egresses' qdisc configuration and counters (per repetition)."""

from __future__ import annotations

from congestlab import fidelity
from congestlab.spec.sweep import Point
from congestlab.testbed import Testbed
from congestlab.workloads import runner_for


def check_reachability(tb: Testbed, point: Point) -> None:
    """Every pair of kernel hosts a workload joins answers ping over both families."""
    study = point.study
    kernel = {n.name for n in study.topology.nodes if n.stack == "kernel"}
    pairs = set()
    for w in study.workloads:
        pairs |= runner_for(w).host_pairs(w, study)
    for src, dst in sorted(pairs):
        if src in kernel and dst in kernel:
            for fam in ("v4", "v6"):
                tb.ping(src, dst, fam, count=1, timeout_s=3)


def shaped(tb: Testbed) -> list[tuple[str, str, str]]:
    """(label, namespace, dev) of every shaped egress: node side and switch port."""
    out = []
    for node in tb.layout.nodes.values():
        for iface in node.interfaces:
            if iface.rate_bps:
                out.append((f"{node.name}/{iface.dev}", node.namespace, iface.dev))
                out.append((f"{iface.switch}/{iface.port}", tb.layout.switch_namespaces[iface.switch],
                            iface.port))
    return out


def qdisc_snapshot(tb: Testbed) -> dict[str, dict]:
    return {label: fidelity.qdisc_counters(tb.show(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev]))
            for label, ns, dev in shaped(tb)}


def qdisc_config(tb: Testbed) -> dict[str, str]:
    return {label: tb.show(["tc", "-n", ns, "qdisc", "show", "dev", dev]).strip()
            + "\n" + tb.show(["tc", "-n", ns, "class", "show", "dev", dev]).strip()
            for label, ns, dev in shaped(tb)}
