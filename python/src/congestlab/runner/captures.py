"""A repetition's recordings: tcpdump at every capturing server's port and, with [capture]
kernel_probe / queue_probe, the BPF sampler (capture/probes.py), all started before the
workloads and stopped after them, with the kernel's drop counts and the sampler's own."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from congestlab import fidelity
from congestlab.capture.probes import (RAW_DIR, QueueTarget, SockTarget, clprobe_argv, netns_inode, stop_summary,
                                       wait_attached)
from congestlab.capture.tcpdump import parse_drop_counts, tcpdump_argv, wait_listening
from congestlab.errors import RunDirError
from congestlab.runner.host import pause_if_asked
from congestlab.runner.network import shaped
from congestlab.spec.models import CaptureSpec
from congestlab.testbed import Testbed
from congestlab.testbed.namespaces import process_tag, set_owner_field


@dataclass
class Probe:
    """The running sampler of a repetition."""
    proc: object
    argv: list[str]
    out_dir: Path
    start: dict


@dataclass
class Captures:
    """A repetition's tcpdumps (name, process, stderr path, argv) and when they all listened:
    the lean log/capture check counts the log inside [started_s, stop]."""
    running: list[tuple[str, object, Path, list[str]]] = field(default_factory=list)
    started_s: float = 0.0
    probe: Probe | None = None


def start_captures(tb: Testbed, servers: dict, rep_dir: Path, capture: CaptureSpec | None = None) -> Captures:
    """`servers`: name -> running server (its spec says whether and where it is captured)."""
    captures = Captures()
    try:
        for name, server in servers.items():
            spec = server.spec
            if not spec.capture:
                continue
            iface = tb.layout.nodes[spec.node].interfaces[0].dev
            argv = tcpdump_argv(iface, rep_dir / "pcap" / f"{name}.pcap", f"tcp port {spec.port}")
            err_path = rep_dir / "logs" / f"tcpdump-{name}.log"
            with open(err_path, "wb") as err:
                proc = tb.start(spec.node, argv, stderr=err)
            captures.running.append((name, proc, err_path, argv))
            wait_listening(err_path, proc, argv)
        if capture is not None and (capture.kernel_probe or capture.queue_probe):
            captures.probe = _start_probe(tb, servers, rep_dir, capture)
    except BaseException:
        stop_captures(tb, captures, {})  # what started is stopped, also on Ctrl-C
        raise
    captures.started_s = time.time()
    return captures


def probe_targets(tb: Testbed, servers: dict, capture: CaptureSpec) -> tuple[list[SockTarget], list[QueueTarget]]:
    """The kernel servers that are captured (a lean server's view is its own log), and every
    shaped egress (node side and switch side of each shaped link)."""
    socks = [SockTarget(name, netns_inode(tb.ns(s.spec.node)), s.spec.port) for name, s in servers.items()
             if capture.kernel_probe and s.spec.capture and s.spec.kind != "lean"]
    queues = []
    if capture.queue_probe:
        for label, ns, dev in shaped(tb):
            shown = json.loads(tb.show(["ip", "-n", ns, "-j", "link", "show", "dev", dev]))
            queues.append(QueueTarget(label, netns_inode(ns), int(shown[0]["ifindex"])))
    return socks, queues


def _start_probe(tb: Testbed, servers: dict, rep_dir: Path, capture: CaptureSpec) -> Probe | None:
    socks, queues = probe_targets(tb, servers, capture)
    if not socks and not queues:
        return None
    out_dir = rep_dir / RAW_DIR
    out_dir.mkdir(exist_ok=True)
    argv = clprobe_argv(out_dir, socks, queues, capture.queue_interval_us, capture.probe_max_bytes,
                        bpf_stats=capture.probe_bpf_stats)
    # inside a testbed namespace: the teardown (and `clean`) kill it with the rest there
    node = next((servers[s.server].spec.node for s in socks), None) or next(
        n.name for n in tb.layout.nodes.values() if any(i.rate_bps for i in n.interfaces))
    err_path = rep_dir / "logs" / "clprobe.log"
    with open(err_path, "wb") as err:
        proc = tb.start(node, argv, stderr=err)
    set_owner_field(tb.prefix, "probes", process_tag(proc.pid))
    try:
        start = wait_attached(out_dir, proc, argv, err_path)
    except BaseException:
        _stop_probe(tb, Probe(proc, argv, out_dir, {}))
        raise
    return Probe(proc, argv, out_dir, start)


def _stop_probe(tb: Testbed, probe: Probe) -> dict | None:
    tb.stop(probe.proc, grace_s=5.0)  # SIGTERM: it drains its ring buffer and writes its stop line
    set_owner_field(tb.prefix, "probes", "")
    if not probe.start:
        return None
    try:
        return stop_summary(probe.out_dir, probe.start, probe.argv)
    except RunDirError as err:  # the tcpdumps are stopped all the same
        return {"argv": probe.argv, "stopped": False, "error": str(err)}


def stop_captures(tb: Testbed, captures: Captures, info: dict) -> None:
    if captures.running:
        time.sleep(0.2)  # the last ACKs and FINs reach the capture
        # the lean log/capture check counts the log's transmissions inside this span
        info["capture_epoch_s"] = [captures.started_s, time.time()]
        pause_if_asked("capture-stop")
    info["captures"] = {}
    if captures.probe is not None:
        probe, captures.probe = captures.probe, None
        summary = _stop_probe(tb, probe)
        if summary is not None:
            info["probes"] = summary
    for name, proc, err_path, argv in captures.running:
        tb.stop(proc)
        info["captures"][name] = {"argv": argv, "tcpdump": parse_drop_counts(err_path.read_text(errors="replace"))}
    captures.running = []


def probe_checks(info: dict) -> list[fidelity.Check]:
    """The sampler recorded everything (no ring buffer overflow, under its size cap) and the
    real-time clock did not jump during the repetition."""
    probe = info.get("probes")
    if not probe:
        return []
    if not probe.get("stopped"):
        return [fidelity.Check("probe_stopped", False, "no stop line", "the sampler's stop line",
                               "the BPF sampler did not stop cleanly: its series may be cut")]
    complete = probe["lost"] == 0 and probe["truncated"] == 0
    return [
        fidelity.Check("probe_complete", complete, f"lost {probe['lost']}, over the cap {probe['truncated']}",
                       "0 and 0", "" if complete else "the sampler dropped rows (ring buffer full or "
                       "[capture] probe_max_bytes reached): its series have gaps"),
        fidelity.Check("probe_clock_drift", probe["drift_ok"], probe["drift_ns"], "|drift| <= 1 ms",
                       "" if probe["drift_ok"] else "the real-time clock moved against the monotonic one during "
                       "the repetition: the series' alignment is interpolated across it"),
    ]
