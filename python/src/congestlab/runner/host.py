"""What a run asks of the machine itself: root, SIGTERM as Ctrl-C, and the kernel's
congestion controls (the spec's per host, Compound TCP from BPF when asked for)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

from congestlab.cc import ownership, registry
from congestlab.errors import Interrupted, NotRootError
from congestlab.spec.models import StudySpec
from congestlab.workloads import runner_for

BUILTIN_CC = ("cubic", "reno", "bbr")
PAUSE_ENV = "CONGESTLAB_PAUSE_AT"


def pause_if_asked(phase: str) -> None:
    """A crash test's hook (python/tests/netns/test_crash_resume_netns.py): with
    CONGESTLAB_PAUSE_AT=<phase> the run says so on stderr and waits here to be killed, for a
    moment too short to catch from outside: `capture-stop` (the capture's stop follows the
    last GET by 0.2 s), `server-start` (a server started, before its ready check),
    `repetition-write` (records.jsonl written, rep.json not yet) and `between-rounds`
    (`--until-decisive`: the look is in the manifest, the next round not started;
    runner/orchestrator.py)."""
    if os.environ.get(PAUSE_ENV) == phase:
        print(f"congestlab: paused at {phase} ({PAUSE_ENV})", file=sys.stderr, flush=True)
        while True:
            time.sleep(60)


def require_root(why: str = "builds network namespaces") -> None:
    """NotRootError (exit 3) saying what the command does that needs root."""
    if os.geteuid() != 0:
        raise NotRootError(f"this command {why} and needs root (run it with sudo)")


@contextmanager
def sigterm_as_interrupt():
    """SIGTERM unwinds like Ctrl-C, so every `finally` (teardown) runs. Only the main
    thread can set a handler: elsewhere (e.g. a cluster task's thread) the host's own applies."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Interrupted("terminated by SIGTERM; testbed torn down")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def kernel_cc_name(cc: str) -> str:
    """Kernel name of a spec's congestion control; Compound TCP comes from BPF
    (installed as `congestlab cc install` would)."""
    return cc if cc in BUILTIN_CC else registry.ensure(cc)


def wanted_cc(study: StudySpec) -> dict[str, str]:
    """Spec congestion control per kernel host: the node's, or that of a server on it."""
    chosen = {n.name: n.cc for n in study.topology.nodes if n.kind == "host" and n.stack == "kernel"}
    for server in study.servers:
        if server.kind != "lean" and not server.udp_only:  # their transport is their own
            chosen[server.node] = server.cc
    return chosen


def flow_cc(study: StudySpec) -> set[str]:
    """Congestion controls the study's flows select per socket (e.g. iperf3 -C)."""
    return {cc for w in study.workloads for cc in runner_for(w).socket_ccs(w)}


class CongestionControls:
    """The kernel congestion control of every host of a point; what this run had to
    install (Compound TCP), it removes: registration is global to the machine."""

    def __init__(self, run):
        self.run = run  # the StudyRun: its manifest records what this run installed
        self.installed: list[str] = []
        self.noted = False  # the run's BPF note (cc/ownership.py) is written

    def per_host(self, study: StudySpec) -> dict[str, str]:
        chosen = wanted_cc(study)
        per_socket = flow_cc(study)
        if "compound" in set(chosen.values()) | per_socket and not self.noted:
            registering = registry.COMPOUND_KERNEL_NAME not in registry.available()
            if registering:
                self.installed.append("compound")
            # noted before the registration: `congestlab clean` removes it if this process is killed
            ownership.note_use(self.run.prefix, str(self.run.run_dir), registry.COMPOUND_KERNEL_NAME, registering)
            self.noted = True
        for cc in sorted(per_socket):
            kernel_cc_name(cc)  # installs Compound TCP when a flow asks for it
        names = {node: kernel_cc_name(cc) for node, cc in chosen.items()}
        record = self.run.manifest.setdefault("congestion_control", {"per_host": names})
        record["installed_for_this_run"] = self.installed
        if self.noted and "struct_ops_map_ids" not in record:
            record["struct_ops_map_ids"] = {registry.COMPOUND_KERNEL_NAME: ownership.note_map_id(
                self.run.prefix, registry.COMPOUND_KERNEL_NAME)}
        return names

    def remove_installed(self) -> None:
        if self.installed:
            for name in self.installed:
                registry.remove(name)
            self.installed = []
        if self.noted:
            ownership.forget(self.run.prefix)
            self.noted = False
