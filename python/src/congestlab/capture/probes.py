"""The BPF sampler (bpf/clprobe.c, docs/probes.md): a kernel server's congestion state per
ACK and the shaped egresses' queues, written beside the pcaps of a repetition.

The tracepoints are machine-wide; the sampler is told which sockets (network namespace inode,
local port) and which queues (namespace inode, ifindex) are ours. A run starts it once
(`clprobe --control`: loading and verifying the programs costs 30-110 ms of CPU) and, per
repetition, sends it the targets and the output directory of a recording on its stdin
(`recording_commands`). Nothing is pinned: its BPF
programs live as long as the process (which also ends with its parent, PR_SET_PDEATHSIG), and
it runs inside one of the testbed's namespaces, so the testbed's teardown and `congestlab
clean` kill it with every other process there.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from congestlab.errors import RunDirError, ToolError
from congestlab.paths import REPO_ROOT

CLPROBE = REPO_ROOT / "bpf" / "build" / "clprobe"
RAW_DIR = "probes"
CLOCK_FILE = "clock.jsonl"
KERNEL_FILE = "kernel-probe.csv"
QUEUE_FILE = "queue-probe.csv"
# beyond this the real-time clock was stepped or slewed hard during the repetition: flagged
DRIFT_LIMIT_NS = 1_000_000


@dataclass(frozen=True)
class SockTarget:
    server: str
    netns_ino: int
    port: int


@dataclass(frozen=True)
class QueueTarget:
    link: str  # node/dev or switch/port, as rep.json's qdiscs
    netns_ino: int
    ifindex: int


def clprobe_path() -> Path:
    if not (CLPROBE.is_file() and os.access(CLPROBE, os.X_OK)):
        raise ToolError(["clprobe"], None, f"{CLPROBE} is not built; run `make build` (make -C bpf)")
    return CLPROBE


def netns_inode(namespace: str) -> int:
    """The inode of a named network namespace: what the BPF programs compare with net->ns.inum."""
    return os.stat(f"/run/netns/{namespace}").st_ino


def clprobe_argv(out_dir: Path, socks: list[SockTarget], queues: list[QueueTarget], interval_us: int,
                 max_bytes: int, bpf_stats: bool = False) -> list[str]:
    argv = [str(clprobe_path()), "--out", str(out_dir), "--interval-us", str(interval_us),
            "--max-bytes", str(max_bytes)]
    for s in socks:
        argv += ["--sock", f"{s.netns_ino}:{s.port}:{s.server}"]
    for q in queues:
        argv += ["--queue", f"{q.netns_ino}:{q.ifindex}:{q.link}"]
    return argv + (["--bpf-stats"] if bpf_stats else [])


def clprobe_control_argv(interval_us: int, bpf_stats: bool = False) -> list[str]:
    """A sampler that loads its programs once and takes its recordings on stdin."""
    return [str(clprobe_path()), "--control", "--interval-us", str(interval_us)] + (
        ["--bpf-stats"] if bpf_stats else [])


def recording_commands(out_dir: Path, socks: list[SockTarget], queues: list[QueueTarget], max_bytes: int) -> str:
    """The lines that make a `--control` sampler record one repetition into `out_dir`."""
    if "\n" in str(out_dir):
        raise RunDirError(f"{out_dir!r}: a sampler's output directory has no newline")
    lines = [f"out {out_dir}", f"max-bytes {max_bytes}"]
    lines += [f"sock {s.netns_ino}:{s.port}:{s.server}" for s in socks]
    lines += [f"queue {q.netns_ino}:{q.ifindex}:{q.link}" for q in queues]
    return "\n".join(lines + ["begin"]) + "\n"


def read_reply(proc: subprocess.Popen, argv: list[str], stderr_path: Path, timeout_s: float = 20.0) -> str:
    """The `--control` sampler's next answer line ("loaded", "started", "stopped"); its
    stderr in a ToolError when it answers "error ...", ends, or stays silent."""
    deadline = time.monotonic() + timeout_s
    line = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], min(0.2, max(0.0, deadline - time.monotonic())))
        if ready:
            line = proc.stdout.readline()
            break
        if proc.poll() is not None:
            break
    else:
        raise ToolError(argv, -1, "clprobe did not answer")
    answer = (line.decode(errors="replace") if isinstance(line, bytes) else line).strip()
    if not answer or answer.startswith("error"):
        if answer:  # it refused the command and stays ready for the next
            raise ToolError(argv, None, answer.removeprefix("error").strip())
        proc.poll()
        why = stderr_path.read_text(errors="replace").strip() or "clprobe ended"
        raise ToolError(argv, proc.returncode if proc.returncode is not None else -1, why)
    return answer


def read_clock(path: Path) -> tuple[dict, dict | None]:
    """The sampler's `start` and `stop` lines (stop is None when it was killed before writing it)."""
    start = stop = None
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as err:
        raise RunDirError(f"{path}: unreadable ({err.strerror})") from None
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short
        if entry.get("event") == "start":
            start = entry
        elif entry.get("event") == "stop":
            stop = entry
    if start is None:
        raise RunDirError(f"{path}: no start line (the sampler never attached)")
    return start, stop


def stop_summary(out_dir: Path, start: dict, argv: list[str]) -> dict:
    """What rep.json's `probes` records: the recording's counts, CPU and clock offsets, and
    the sampler's (pid, which of its recordings this is, its CPU to load the programs and in
    total so far: a run's sampler serves all its repetitions)."""
    _, stop = read_clock(out_dir / CLOCK_FILE)
    summary = {"argv": argv, "prog_ids": start.get("prog_ids"), "sampler_pid": start.get("pid"),
               "recording": start.get("recording", 1),
               "offset_ns": [start["realtime_ns"] - start["monotonic_ns"]]}
    if stop is None:
        return summary | {"stopped": False}
    summary["offset_ns"].append(stop["realtime_ns"] - stop["monotonic_ns"])
    drift = summary["offset_ns"][1] - summary["offset_ns"][0]
    return summary | {
        "stopped": True, "drift_ns": drift, "drift_ok": abs(drift) <= DRIFT_LIMIT_NS,
        "clock_read_ns": max(start.get("read_ns", 0), stop.get("read_ns", 0)),
        "tcp_rows": stop["tcp_rows"], "queue_rows": stop["queue_rows"], "bytes": stop["bytes"],
        "truncated": stop["truncated"], "lost": stop["lost_tcp"] + stop["lost_queue"],
        "cpu_s": round(stop["cpu_user_s"] + stop["cpu_system_s"], 6),  # between start and stop
        "sampler_load_cpu_s": start.get("load_cpu_s"),  # loading and verifying, once per sampler
        "sampler_cpu_total_s": stop.get("cpu_total_s"),  # since the sampler started, loading included
        "wall_s": round((stop["monotonic_ns"] - start["monotonic_ns"]) / 1e9, 6),
        "bpf_run_time_ns": stop.get("bpf_run_time_ns"), "bpf_run_count": stop.get("bpf_run_count"),
    }
