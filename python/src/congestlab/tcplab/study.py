"""`congestlab reproduce tcp-lab`: the lab report's tasks (seed 003) on namespaces A - R - B.

Lifecycle: run directory + manifest (status running) -> network up -> fidelity checks ->
every sweep's points (results.csv grows point by point) -> network down -> report.
Teardown runs on exceptions, Ctrl-C and SIGTERM; the manifest then says failed/interrupted.
"""

from __future__ import annotations

import csv
import dataclasses
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from congestlab import fidelity
from congestlab.errors import CongestlabError, Interrupted
from congestlab.rundir import FORMAT_VERSION, environment, prepare_out_dir, write_manifest
from congestlab.tcplab import checks as fidelity_checks
from congestlab.tcplab import iperf2
from congestlab.tcplab.measure import Processes, run_point
from congestlab.tcplab.network import LabNetwork
from congestlab.tcplab.report import build_report
from congestlab.tcplab.sweeps import Sweep, quick_sweeps, study_sweeps
from congestlab.testbed import new_prefix
from congestlab.testbed.executor import run_argv
from congestlab.testbed.namespaces import forget_owner, record_owner

RESULT_FIELDS = [
    "sweep", "figure", "point", "x", "duration_s", "protocol", "session", "bytes", "seconds", "throughput_mbps",
    "udp_jitter_ms", "udp_lost", "udp_datagrams", "tbf_rate_kbit", "delay_ms", "jitter_ms", "loss",
    "server_window_bytes", "client_window_bytes", "server_length_bytes", "client_length_bytes",
    "tcp_sessions", "udp_sessions", "emulator",
]


def reproduce(out: Path | None, quick: bool) -> Path:
    """Entry point of `congestlab reproduce tcp-lab [--quick] [--out DIR]`; returns the run directory."""
    sweeps = quick_sweeps() if quick else study_sweeps()
    plan = fidelity_checks.QUICK_CHECKS if quick else fidelity_checks.CheckPlan()
    run_dir = run_study(out, sweeps, plan, quick=quick)
    report = build_report(run_dir)
    Console().print(f"report: {report}")
    return run_dir


def run_study(out: Path | None, sweeps: list[Sweep], check_plan: fidelity_checks.CheckPlan, *, quick: bool,
              emulator: str = "auto", console: Console | None = None) -> Path:
    from congestlab.runner import require_root, sigterm_as_interrupt

    require_root()
    console = console or Console(stderr=True)
    prefix = new_prefix()
    if out is None:
        out = Path("runs") / f"tcp-lab-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{prefix}"
    run_dir = prepare_out_dir(out)
    (run_dir / "pcap").rmdir()  # the shared run-dir layout makes one; this study captures nothing
    logs = run_dir / "logs"
    manifest: dict = {
        "format_version": FORMAT_VERSION,
        "kind": "tcp-lab",
        "source": "seed 003: TCP Performance (iperf, tc, iptables), Figures 2-13",
        "status": "running",
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": sys.argv,
        "quick": quick,
        "environment": environment(),
        "tools": _tool_versions(),
        "sweeps": [dataclasses.asdict(s) for s in sweeps],
        "fidelity": {"plan": dataclasses.asdict(check_plan)},
        "points_done": 0,
    }
    write_manifest(run_dir, manifest)
    results_path = run_dir / "results.csv"
    with open(results_path, "w", newline="") as fh:
        csv.DictWriter(fh, RESULT_FIELDS).writeheader()
    procs = Processes()
    checks: list[fidelity.Check] = []
    start = time.monotonic()
    total_points = sum(len(s.points) for s in sweeps)
    try:
        with sigterm_as_interrupt():
            record_owner(prefix, str(run_dir))
            try:
                with LabNetwork(prefix, emulator=emulator, log_dir=str(logs)) as net, \
                        _progress(console) as progress:
                    manifest["network"] = net.describe()
                    manifest["emulator"] = net.emulator_used
                    manifest["sysctls"] = _sysctls(net)
                    write_manifest(run_dir, manifest)
                    task = progress.add_task("fidelity checks", total=total_points + 3)
                    checks = fidelity_checks.run_checks(net, check_plan, logs, procs,
                                                        advance=lambda: progress.advance(task))
                    manifest["fidelity"] |= {"checks": fidelity.checks_to_json(checks),
                                             "warnings": [c.message for c in checks if not c.ok]}
                    write_manifest(run_dir, manifest)
                    for sweep in sweeps:
                        for index, point in enumerate(sweep.points):
                            progress.update(task, description=f"Fig. {sweep.figure} {sweep.key} x={point.x:g}")
                            with net.configured(point.network, label=f"{sweep.key}-{index:02d}") as applied:
                                result = run_point(net, point, sweep.duration_s,
                                                   logs / f"{sweep.key}-{index:02d}", procs)
                                linkem_stats = [el.stats() for el in applied.get("linkem", [])]
                            _append_rows(results_path, sweep, index, point, result, net.emulator_used)
                            manifest.setdefault("points", []).append({
                                "sweep": sweep.key, "point": index, "x": point.x, "argv": result.argv,
                                "qdiscs": net.qdisc_stats(), "linkem": linkem_stats})
                            manifest["points_done"] += 1
                            write_manifest(run_dir, manifest)
                            progress.advance(task)
            finally:
                procs.kill_all()
                forget_owner(prefix)
    except KeyboardInterrupt:
        _finish(run_dir, manifest, "interrupted", "interrupted by Ctrl-C; namespaces torn down", start)
        raise Interrupted("interrupted by Ctrl-C; namespaces torn down; run directory marked interrupted") from None
    except Interrupted as err:
        _finish(run_dir, manifest, "interrupted", str(err), start)
        raise
    except CongestlabError as err:
        _finish(run_dir, manifest, "failed", str(err), start)
        raise
    except Exception as err:
        _finish(run_dir, manifest, "failed", f"{type(err).__name__}: {err}", start)
        raise
    _finish(run_dir, manifest, "complete", None, start)
    return run_dir


def _finish(run_dir: Path, manifest: dict, status: str, error: str | None, start: float) -> None:
    manifest["status"] = status
    if error:
        manifest["error"] = error
    manifest["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    manifest["wall_s"] = round(time.monotonic() - start, 1)
    write_manifest(run_dir, manifest)


def _progress(console: Console) -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False)


def _append_rows(path: Path, sweep: Sweep, index: int, point, result, emulator: str) -> None:
    net = point.network
    common = {
        "sweep": sweep.key, "figure": sweep.figure, "point": index, "x": point.x, "duration_s": sweep.duration_s,
        "tbf_rate_kbit": net.tbf_rate_kbit or "", "delay_ms": net.delay_ms, "jitter_ms": net.jitter_ms,
        "loss": net.loss, "server_window_bytes": point.server_window_bytes or "",
        "client_window_bytes": point.client_window_bytes or "",
        "server_length_bytes": point.server_length_bytes or "", "client_length_bytes": point.client_length_bytes or "",
        "tcp_sessions": point.tcp_sessions, "udp_sessions": point.udp_sessions,
        "emulator": emulator if net.emulated else "",
    }
    with open(path, "a", newline="") as fh:
        writer = csv.DictWriter(fh, RESULT_FIELDS)
        for session, rep in enumerate(result.tcp + result.udp, 1):
            udp = rep.protocol == "udp"
            writer.writerow(common | {
                "protocol": rep.protocol, "session": session, "bytes": rep.bytes, "seconds": round(rep.seconds, 3),
                "throughput_mbps": round(rep.mbit_per_s, 4),
                "udp_jitter_ms": rep.jitter_ms if udp else "", "udp_lost": rep.lost if udp else "",
                "udp_datagrams": rep.total_datagrams if udp else ""})


def _tool_versions() -> dict:
    def first_line(argv: list[str]) -> str:
        proc = run_argv(argv, check=False)
        return ((proc.stdout or "") + (proc.stderr or "")).strip().splitlines()[0] if proc.returncode == 0 else "?"

    return {"iperf": iperf2.iperf_version(), "tc": first_line(["tc", "-V"]),
            "iptables": first_line(["iptables", "--version"]), "ping": first_line(["ping", "-V"])}


def _sysctls(net: LabNetwork) -> dict:
    names = ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_sack",
             "net.ipv4.tcp_timestamps", "net.ipv4.tcp_window_scaling"]
    out = {}
    for ns in (net.line.ns_a, net.line.ns_b):
        proc = run_argv(["ip", "netns", "exec", ns, "sysctl", *names], check=False)
        out[ns] = dict(line.split(" = ", 1) for line in proc.stdout.splitlines() if " = " in line)
        route = run_argv(["ip", "-n", ns, "route", "show", "default"], check=False).stdout.strip()
        out[ns]["default_route"] = route
    return out
