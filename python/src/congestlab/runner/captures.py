"""A repetition's packet captures: tcpdump at every capturing server's port, started before
the workloads and stopped after them, with the kernel's drop counts."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.capture.tcpdump import parse_drop_counts, tcpdump_argv, wait_listening
from congestlab.runner.host import pause_if_asked
from congestlab.testbed import Testbed


@dataclass
class Captures:
    """A repetition's tcpdumps (name, process, stderr path, argv) and when they all listened:
    the lean log/capture check counts the log inside [started_s, stop]."""
    running: list[tuple[str, object, Path, list[str]]] = field(default_factory=list)
    started_s: float = 0.0


def start_captures(tb: Testbed, servers: dict, rep_dir: Path) -> Captures:
    """`servers`: name -> running server (its spec says whether and where it is captured)."""
    captures = Captures()
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
    captures.started_s = time.time()
    return captures


def stop_captures(tb: Testbed, captures: Captures, info: dict) -> None:
    if captures.running:
        time.sleep(0.2)  # the last ACKs and FINs reach the capture
        # the lean log/capture check counts the log's transmissions inside this span
        info["capture_epoch_s"] = [captures.started_s, time.time()]
        pause_if_asked("capture-stop")
    info["captures"] = {}
    for name, proc, err_path, argv in captures.running:
        tb.stop(proc)
        info["captures"][name] = {"argv": argv, "tcpdump": parse_drop_counts(err_path.read_text(errors="replace"))}
