"""A repetition's recordings: tcpdump at every capturing server's port (a QUIC server's UDP
port too, whole packets, into quic/), and, with [capture]
kernel_probe / queue_probe, a recording by the run's BPF sampler (capture/probes.py), all
started before the workloads and stopped after them, with the kernel's drop counts and the
sampler's own. The sampler itself lives across repetitions (ProbeSampler): loading its
programs costs more CPU than a short repetition's recording."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from congestlab import fidelity
from congestlab.capture.probes import (CLOCK_FILE, DRIFT_LIMIT_NS, RAW_DIR, QueueTarget, SockTarget,
                                       clprobe_control_argv, netns_inode, read_clock, read_reply, recording_commands,
                                       stop_summary)
from congestlab.capture.tcpdump import SNAPLEN_BYTES, parse_drop_counts, tcpdump_argv, wait_listening
from congestlab.errors import RunDirError, ToolError
from congestlab.rundir import PCAP_DIR, QUIC_DIR
from congestlab.runner.host import pause_if_asked
from congestlab.runner.network import shaped
from congestlab.spec.models import CaptureSpec
from congestlab.testbed import Testbed
from congestlab.testbed.namespaces import process_tag, set_owner_field


class ProbeSampler:
    """The run's BPF sampler (bpf/clprobe --control), started at the first repetition that
    records and kept for the next ones: a recording swaps only its filter maps and output
    files. A repetition asking for another queue interval or BPF accounting restarts it;
    close() ends it (the testbed's teardown, `congestlab clean` through the owner record's
    `probes` line, and PR_SET_PDEATHSIG end it otherwise)."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.argv: list[str] = []
        self.key: tuple | None = None

    def begin(self, tb: Testbed, node: str, out_dir: Path, socks: list[SockTarget], queues: list[QueueTarget],
              capture: CaptureSpec) -> dict:
        """Start a recording into out_dir; its start line (written once attached)."""
        key = (capture.queue_interval_us, capture.probe_bpf_stats)
        if self.proc is not None and (self.key != key or self.proc.poll() is not None):
            self.close(tb)
        try:
            if self.proc is None:
                self._start(tb, node, key)
            self._send(recording_commands(out_dir, socks, queues, capture.probe_max_bytes))
            read_reply(self.proc, self.argv, self.log_path)  # "started"
            start, _ = read_clock(out_dir / CLOCK_FILE)
        except BaseException:
            self.close(tb)
            raise
        return start

    def end(self, tb: Testbed) -> None:
        """End the recording: the sampler drains, detaches and writes the stop line."""
        try:
            self._send("end\n")
            read_reply(self.proc, self.argv, self.log_path)  # "stopped"
        except BaseException:
            self.close(tb)
            raise

    def close(self, tb: Testbed) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()  # its stdin's end: it ends a running recording and exits
            proc.wait(timeout=5.0)
        except (OSError, subprocess.TimeoutExpired):
            pass
        tb.stop(proc, grace_s=5.0)  # SIGTERM if still there; forgets it either way
        set_owner_field(tb.prefix, "probes", "")

    def _start(self, tb: Testbed, node: str, key: tuple) -> None:
        self.argv = clprobe_control_argv(key[0], bpf_stats=key[1])
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as err:
            # inside a testbed namespace: the teardown (and `clean`) kill it with the rest there
            self.proc = tb.start(node, self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        self.key = key
        set_owner_field(tb.prefix, "probes", process_tag(self.proc.pid))
        read_reply(self.proc, self.argv, self.log_path)  # "loaded"

    def _send(self, text: str) -> None:
        try:
            self.proc.stdin.write(text.encode())
            self.proc.stdin.flush()
        except OSError as err:
            raise ToolError(self.argv, self.proc.poll(), f"clprobe's stdin: {err.strerror or err}") from None


@dataclass
class Probe:
    """A repetition's recording by the run's sampler."""
    sampler: ProbeSampler
    out_dir: Path
    start: dict
    own: bool = False  # a sampler started for this repetition alone: closed with it


@dataclass
class Captures:
    """A repetition's tcpdumps (name, process, stderr path, argv, rep.json key: "captures" or
    "quic_captures") and when they all listened: the lean log/capture check counts the log
    inside [started_s, stop]."""
    running: list[tuple[str, object, Path, list[str], str]] = field(default_factory=list)
    started_s: float = 0.0
    probe: Probe | None = None


def start_captures(tb: Testbed, servers: dict, rep_dir: Path, capture: CaptureSpec | None = None,
                   sampler: ProbeSampler | None = None) -> Captures:
    """`servers`: name -> running server (its spec says whether and where it is captured);
    `sampler`: the run's BPF sampler (without one, a sampler is started for this repetition)."""
    captures = Captures()
    try:
        for name, server in servers.items():
            spec = server.spec
            if not spec.capture:
                continue
            iface = tb.layout.nodes[spec.node].interfaces[0].dev
            wanted = [] if spec.udp_only else [(rep_dir / PCAP_DIR / f"{name}.pcap", f"tcp port {spec.port}",
                                                SNAPLEN_BYTES, f"tcpdump-{name}.log", "captures")]
            if spec.serves_quic:  # whole datagrams: the analysis decrypts them (analysis/quic_capture.py)
                (rep_dir / QUIC_DIR).mkdir(exist_ok=True)
                wanted.append((rep_dir / QUIC_DIR / f"{name}.pcap", f"udp port {spec.port}", 0,
                               f"tcpdump-{name}-quic.log", "quic_captures"))
            for pcap, bpf_filter, snaplen, log_name, key in wanted:
                argv = tcpdump_argv(iface, pcap, bpf_filter, snaplen)
                err_path = rep_dir / "logs" / log_name
                with open(err_path, "wb") as err:
                    proc = tb.start(spec.node, argv, stderr=err)
                captures.running.append((name, proc, err_path, argv, key))
                wait_listening(err_path, proc, argv)
        if capture is not None and (capture.kernel_probe or capture.queue_probe):
            captures.probe = _start_probe(tb, servers, rep_dir, capture, sampler)
    except BaseException:
        stop_captures(tb, captures, {})  # what started is stopped, also on Ctrl-C
        raise
    captures.started_s = time.time()
    return captures


def probe_targets(tb: Testbed, servers: dict, capture: CaptureSpec) -> tuple[list[SockTarget], list[QueueTarget]]:
    """The kernel servers that are captured (a lean server's view is its own log), and every
    shaped egress (node side and switch side of each shaped link)."""
    socks = [SockTarget(name, netns_inode(tb.ns(s.spec.node)), s.spec.port) for name, s in servers.items()
             if capture.kernel_probe and s.spec.capture and s.spec.kind != "lean" and not s.spec.udp_only]
    queues = []
    if capture.queue_probe:
        for label, ns, dev in shaped(tb):
            shown = json.loads(tb.show(["ip", "-n", ns, "-j", "link", "show", "dev", dev]))
            queues.append(QueueTarget(label, netns_inode(ns), int(shown[0]["ifindex"])))
    return socks, queues


def _start_probe(tb: Testbed, servers: dict, rep_dir: Path, capture: CaptureSpec,
                 sampler: ProbeSampler | None) -> Probe | None:
    socks, queues = probe_targets(tb, servers, capture)
    if not socks and not queues:
        return None
    out_dir = rep_dir / RAW_DIR
    out_dir.mkdir(exist_ok=True)
    own = sampler is None
    if own:
        sampler = ProbeSampler(rep_dir / "logs" / "clprobe.log")
    node = next((servers[s.server].spec.node for s in socks), None) or next(
        n.name for n in tb.layout.nodes.values() if any(i.rate_bps for i in n.interfaces))
    start = sampler.begin(tb, node, out_dir, socks, queues, capture)
    return Probe(sampler, out_dir, start, own)


def _stop_probe(tb: Testbed, probe: Probe) -> dict | None:
    argv = probe.sampler.argv
    try:
        probe.sampler.end(tb)  # it drains its ring buffer and writes its stop line
    except ToolError as err:  # the tcpdumps are stopped all the same; the summary says what is missing
        return {"argv": argv, "stopped": False, "error": str(err)}
    finally:
        if probe.own:
            probe.sampler.close(tb)
    try:
        return stop_summary(probe.out_dir, probe.start, argv)
    except RunDirError as err:
        return {"argv": argv, "stopped": False, "error": str(err)}


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
    for name, proc, err_path, argv, key in captures.running:
        tb.stop(proc)
        info.setdefault(key, {})[name] = {"argv": argv,
                                          "tcpdump": parse_drop_counts(err_path.read_text(errors="replace"))}
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
        fidelity.Check("probe_clock_drift", probe["drift_ok"], round(probe["drift_ns"] / 1000, 3),
                       f"|drift| <= {DRIFT_LIMIT_NS / 1000:g} µs",
                       "" if probe["drift_ok"] else "the real-time clock moved against the monotonic one during "
                       "the repetition: the series' alignment is interpolated across it"),
    ]
