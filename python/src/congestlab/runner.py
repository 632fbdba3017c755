"""The experiment lifecycle: testbed up, per server: start, capture, levels x repetitions
x families, stop; then analysis, manifest and report. Teardown always runs."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from congestlab import fidelity
from congestlab.analysis.lean_log import compare_with_pcap, retransmissions_by_peer_port
from congestlab.analysis.run_analysis import METRIC_FIELDS, analyze_run, summarize, summary_fields, write_csv
from congestlab.capture.tcpdump import parse_drop_counts, tcpdump_argv, tcpdump_version, wait_listening
from congestlab.errors import CongestlabError, Interrupted, NotRootError, SpecError, TestbedError
from congestlab.rundir import FORMAT_VERSION, environment, write_manifest
from congestlab.servers.files import url_path, write_files
from congestlab.servers.factory import make_server
from congestlab.spec.models import ExperimentSpec, LevelSpec, ServerSpec
from congestlab.testbed import Testbed, new_prefix
from congestlab.testbed.executor import run_argv
from congestlab.traffic.background import MgenBackground
from congestlab.traffic.http_request import curl_argv, curl_version, parse_curl_json, url_for
from congestlab.traffic.mgen import mgen_version

BUILTIN_CC = ("cubic", "reno", "bbr")
PROBE_FILE_KIB = 504


def require_root() -> None:
    if os.geteuid() != 0:
        raise NotRootError("this command builds network namespaces and needs root (run it with sudo)")


def kernel_cc_name(cc: str) -> str:
    """Kernel name of a spec's congestion control; Compound TCP comes from BPF."""
    if cc in BUILTIN_CC:
        return cc
    try:
        from congestlab.cc.registry import ensure  # installed by `congestlab cc install`
    except ImportError:
        raise SpecError("cc", f"{cc!r} needs the BPF congestion controls (congestlab cc), not built here") from None
    return ensure(cc)


@contextmanager
def sigterm_as_interrupt():
    """SIGTERM unwinds like Ctrl-C, so every `finally` (teardown) runs."""
    def handler(signum, frame):
        raise Interrupted("terminated by SIGTERM; testbed torn down")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


class Runner:
    def __init__(self, spec: ExperimentSpec, run_dir: Path, repetitions: int, calibrate: bool = False,
                 console: Console | None = None, argv: list[str] | None = None):
        self.spec = spec
        self.run_dir = run_dir
        self.repetitions = repetitions
        self.calibrate = calibrate
        self.console = console or Console(stderr=True)
        self.prefix = new_prefix()
        self.checks: list[fidelity.Check] = []
        self.manifest: dict = {
            "format_version": FORMAT_VERSION,
            "status": "running",
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": argv or sys.argv,
            "spec": spec.model_dump(mode="json"),
            "repetitions": repetitions,
            "environment": environment(),
            "testbed": {"prefix": self.prefix},
            "servers": {},
            "levels": {},
        }
        self.requests_log = run_dir / "requests.jsonl"
        self.installed_cc: list[str] = []
        self._temp_dirs: list[Path] = []

    # ------------------------------------------------------------------------------
    def run(self) -> Path:
        require_root()
        start = time.monotonic()
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        cpu0 = fidelity.read_cpu_jiffies()
        write_manifest(self.run_dir, self.manifest)
        try:
            with sigterm_as_interrupt():
                self.manifest["tools"] = self._tool_versions()
                kernel_cc = self._kernel_cc()
                with Testbed(self.spec.topology, prefix=self.prefix, kernel_cc=kernel_cc,
                             run_dir=str(self.run_dir)) as tb:
                    self.manifest["testbed"] = tb.describe() | {
                        "setup_s": round(tb.setup_s, 3), "setup_commands": tb.executor.commands_run}
                    self._check_reachability(tb)
                    self.manifest["qdiscs"] = self._qdisc_config(tb)
                    if self.calibrate:
                        self.manifest["calibration"] = self._calibrate(tb)
                    for server in self.spec.servers:
                        self._run_server(tb, server, kernel_cc)
                self.manifest["testbed"]["teardown_s"] = round(tb.teardown_s, 3)
                self.manifest["testbed"]["link_emulation"] = tb.emulation  # now with linkem's final counters
                self._remove_installed_cc()
                self._remove_temp_dirs()
            self._analyze()
        except KeyboardInterrupt:
            self._remove_temp_dirs()
            self._fail("interrupted", "interrupted by Ctrl-C; testbed torn down")
            raise Interrupted("interrupted by Ctrl-C; testbed torn down; run directory marked interrupted") from None
        except Interrupted as err:
            self._fail("interrupted", str(err))
            raise
        except CongestlabError as err:
            self._fail("failed", str(err))
            raise
        except Exception as err:
            self._fail("failed", f"{type(err).__name__}: {err}")
            raise
        usage1 = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - start
        harness_cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
        self.manifest["timing"] = {
            "wall_s": round(wall, 2),
            "harness_cpu_s": round(harness_cpu, 2),
            "harness_cpu_pct_of_one_core": round(100 * harness_cpu / wall, 2),
            "machine_cpu_busy_pct": round(fidelity.cpu_busy_pct(cpu0, fidelity.read_cpu_jiffies()), 1),
        }
        self.manifest["fidelity"] = {"checks": fidelity.checks_to_json(self.checks),
                                     "warnings": [c.message for c in self.checks if not c.ok]}
        self.manifest["status"] = "complete"
        self.manifest["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_manifest(self.run_dir, self.manifest)
        return self.run_dir

    def _remove_temp_dirs(self) -> None:
        for path in self._temp_dirs:
            shutil.rmtree(path, ignore_errors=True)
        self._temp_dirs = []

    def _fail(self, status: str, message: str) -> None:
        self._remove_temp_dirs()
        try:
            self._remove_installed_cc()
        except CongestlabError as err:
            message += f"; and removing the congestion controls it installed failed: {err}"
        self.manifest["status"] = status
        self.manifest["error"] = message
        self.manifest["fidelity"] = {"checks": fidelity.checks_to_json(self.checks)}
        write_manifest(self.run_dir, self.manifest)

    # ------------------------------------------------------------------------------
    def _tool_versions(self) -> dict:
        versions = {"tcpdump": tcpdump_version(), "curl": curl_version()}
        if self.spec.background is not None:
            versions["mgen"] = mgen_version()
        versions["iproute2"] = run_argv(["ip", "-V"]).stdout.strip()
        return versions

    def _kernel_cc(self) -> dict[str, str]:
        kernel_hosts = {n.name for n in self.spec.topology.nodes if n.kind == "host" and n.stack == "kernel"}
        chosen = {n.name: n.cc for n in self.spec.topology.nodes if n.name in kernel_hosts}
        for server in self.spec.servers:
            if server.node in kernel_hosts:
                chosen[server.node] = server.cc
        if "compound" in chosen.values():
            from congestlab.cc.registry import COMPOUND_KERNEL_NAME, available

            if COMPOUND_KERNEL_NAME not in available():
                self.installed_cc.append("compound")
        names = {node: kernel_cc_name(cc) for node, cc in chosen.items()}
        self.manifest["congestion_control"] = {"per_host": names, "installed_for_this_run": self.installed_cc}
        return names

    def _remove_installed_cc(self) -> None:
        """Registration is global to the machine: what this run installed, it removes."""
        if self.installed_cc:
            from congestlab.cc.registry import remove

            for name in self.installed_cc:
                remove(name)
            self.installed_cc = []

    def _check_reachability(self, tb: Testbed) -> None:
        client = self.spec.measure.client
        # a user-space stack answers only once its server runs: its ready check covers it
        pairs = [(client, s.node) for s in self.spec.servers if self.spec.topology.node(s.node).stack == "kernel"]
        if self.spec.background:
            pairs += [(p.source, p.sink) for p in self.spec.background.pairs]
        for src, dst in pairs:
            for fam in ("v4", "v6"):
                tb.ping(src, dst, fam, count=1, timeout_s=3)

    def _shaped(self, tb: Testbed) -> list[tuple[str, str, str]]:
        """(label, namespace, dev) of every shaped egress: node side and switch port."""
        out = []
        for node in tb.layout.nodes.values():
            for iface in node.interfaces:
                if iface.rate_bps:
                    out.append((f"{node.name}/{iface.dev}", node.namespace, iface.dev))
                    out.append((f"{iface.switch}/{iface.port}", tb.layout.switch_namespaces[iface.switch],
                                iface.port))
        return out

    def _qdisc_snapshot(self, tb: Testbed) -> dict[str, dict]:
        return {label: fidelity.qdisc_counters(run_argv(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev",
                                                         dev]).stdout)
                for label, ns, dev in self._shaped(tb)}

    def _qdisc_config(self, tb: Testbed) -> dict[str, str]:
        return {label: run_argv(["tc", "-n", ns, "qdisc", "show", "dev", dev]).stdout.strip()
                + "\n" + run_argv(["tc", "-n", ns, "class", "show", "dev", dev]).stdout.strip()
                for label, ns, dev in self._shaped(tb)}

    def _calibrate(self, tb: Testbed) -> dict:
        """One iperf3 flow per family from the server side to the client, 5 s each."""
        from congestlab.calibrate import calibrate_bottleneck

        server_node = self.spec.servers[0].node
        return calibrate_bottleneck(tb, server_node, self.spec.measure.client, self.run_dir / "logs")

    # ------------------------------------------------------------------------------
    def _run_server(self, tb: Testbed, server: ServerSpec, kernel_cc: dict[str, str]) -> None:
        # Apache's workers run as www-data, which may not traverse the run directory
        # (e.g. under a private --out): serve from a world-readable temporary docroot.
        docroot = Path(tempfile.mkdtemp(prefix=f"congestlab-{self.prefix}-docroot-"))
        docroot.chmod(0o755)
        self._temp_dirs.append(docroot)
        digests = write_files(docroot, sorted(set(server.files_kib) | {PROBE_FILE_KIB}))
        srv = make_server(server, tb, self.run_dir, docroot)
        user_stack = server.kind == "lean"
        record = {"kind": server.kind, "node": server.node, "port": server.port, "argv": srv.argv,
                  "version": srv.version(),
                  "cc_requested": f"leanweb --cc {server.knobs.get('cc', 'none')}" if user_stack else server.cc,
                  "cc_kernel": None if user_stack else kernel_cc.get(server.node),
                  "knobs": dict(server.knobs),
                  "files_sha256": {str(k): v for k, v in digests.items()}}
        self.manifest["servers"][server.name] = record
        pcap = self.run_dir / "pcap" / f"{server.name}.pcap"
        dump_err = self.run_dir / "logs" / f"tcpdump-{server.name}.log"
        dump = None
        try:
            srv.start()  # a process in the node's namespace: namespace deletion also ends it
            srv.wait_started()
            self._ready_check(tb, server)
            if user_stack:  # leanweb's own account of the settings it runs with (first log line)
                record["settings_effective"] = srv.effective_settings()
                record["cc_effective"] = f"leanweb --cc {record['settings_effective']['cc']}"
                wanted = record["cc_requested"]
            else:
                record["cc_effective"] = self._effective_cc(tb, server)
                wanted = record["cc_kernel"]
            if record["cc_effective"] != wanted:
                raise TestbedError(f"server {server.name}: connections use {record['cc_effective']!r}, "
                                   f"not the requested {wanted!r}")
            iface = tb.layout.nodes[server.node].interfaces[0].dev
            argv = tcpdump_argv(iface, pcap, f"tcp port {server.port}")
            with open(dump_err, "wb") as err:
                dump = tb.start(server.node, argv, stderr=err)
            wait_listening(dump_err, dump, argv)
            record["capture"] = {"argv": argv, "interface": f"{server.node}/{iface}"}
            self._run_levels(tb, server)
        finally:
            if dump is not None:
                time.sleep(0.2)  # the last ACKs and FINs reach the capture
                tb.stop(dump)
                record.setdefault("capture", {})["tcpdump"] = parse_drop_counts(
                    dump_err.read_text(errors="replace"))
            srv.stop()

    def _ready_check(self, tb: Testbed, server: ServerSpec, timeout_s: float = 10.0) -> None:
        """Both families answer 200 with the whole file before anything is measured."""
        client = self.spec.measure.client
        expected = self.spec.measure.file_kib * 1024
        for fam in self.spec.measure.families:
            url = url_for(tb.address(server.node, fam), server.port, url_path(self.spec.measure.file_kib))
            deadline = time.monotonic() + timeout_s
            while True:
                proc = tb.run(client, curl_argv(url, fam, 5), check=False, timeout_s=10)
                result = parse_curl_json(fam, url, expected, proc)
                if result.ok:
                    break
                if time.monotonic() > deadline:
                    raise TestbedError(f"server {server.name} not ready over {fam}: {result.error}")
                time.sleep(0.2)

    def _effective_cc(self, tb: Testbed, server: ServerSpec) -> str:
        """The algorithm of a live server-side connection, from `ss -ti` in the server's
        namespace while a rate-limited download keeps the connection open."""
        client = self.spec.measure.client
        url = url_for(tb.address(server.node, "v4"), server.port, url_path(PROBE_FILE_KIB))
        probe = tb.start(client, ["curl", "-s", "-4", "--limit-rate", "20k", "--max-time", "10", "-o", "/dev/null",
                                  url])
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                out = tb.run(server.node, ["ss", "-tinH", "state", "established", f"( sport = :{server.port} )"]).stdout
                match = re.search(r"^\s+(?:ts\s+)?(?:sack\s+)?(?:ecn\s+)?(?:ecnseen\s+)?(?:fastopen\s+)?(\w+)\s+wscale",
                                  out, re.M)
                if match:
                    return match.group(1)
                time.sleep(0.1)
        finally:
            tb.stop(probe)
        raise TestbedError(f"server {server.name}: could not read the congestion control with ss -ti")

    def _run_levels(self, tb: Testbed, server: ServerSpec) -> None:
        spec = self.spec
        n_requests = len(spec.levels) * self.repetitions * len(spec.measure.families)
        columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=self.console, transient=False) as progress:
            task = progress.add_task(f"{server.name}", total=n_requests)
            for level in spec.levels:
                progress.update(task, description=f"{server.name} {level.name}")
                self._run_level(tb, server, level, lambda: progress.advance(task))

    def _run_level(self, tb: Testbed, server: ServerSpec, level: LevelSpec, advance) -> None:
        spec = self.spec
        per_request_bound_s = spec.measure.timeout_s + spec.gap_s + 1
        duration_s = spec.warmup_s + self.repetitions * len(spec.measure.families) * per_request_bound_s + 2
        background = None
        info: dict = {"rate_bps": level.rate_bps}
        q0 = self._qdisc_snapshot(tb)
        cpu0 = fidelity.read_cpu_jiffies()
        try:
            if level.rate_bps > 0:
                background = MgenBackground(tb, spec.background, level, self.run_dir / "logs" / "mgen",
                                            duration_s)
                background.start()
                time.sleep(spec.warmup_s)
            window0 = time.time()
            cpu_measure0 = fidelity.read_cpu_jiffies()
            self._measure(tb, server, level, advance)
            window1 = time.time()
            info["cpu_busy_pct_measuring"] = round(fidelity.cpu_busy_pct(cpu_measure0, fidelity.read_cpu_jiffies()), 1)
        finally:
            if background is not None:
                background.stop()
        if background is not None:
            achieved = background.achieved((window0, window1))
            info["background"] = achieved
            self.checks.append(fidelity.background_check(f"{server.name}_{level.name}", achieved["requested_bps"],
                                                         achieved["achieved_bps"]))
        info["cpu_busy_pct"] = round(fidelity.cpu_busy_pct(cpu0, fidelity.read_cpu_jiffies()), 1)
        info["qdiscs"] = {label: fidelity.qdisc_delta(q0.get(label, {}), now)
                          for label, now in self._qdisc_snapshot(tb).items()}
        self.manifest["levels"].setdefault(server.name, {})[level.name] = info

    def _measure(self, tb: Testbed, server: ServerSpec, level: LevelSpec, advance) -> None:
        spec = self.spec
        client = spec.measure.client
        expected = spec.measure.file_kib * 1024
        path = url_path(spec.measure.file_kib)
        with open(self.requests_log, "a") as log:
            for rep in range(1, self.repetitions + 1):
                for fam in spec.measure.families:
                    url = url_for(tb.address(server.node, fam), server.port, path)
                    start = time.time()
                    proc = tb.run(client, curl_argv(url, fam, spec.measure.timeout_s), check=False,
                                  timeout_s=spec.measure.timeout_s + 5)
                    end = time.time()
                    result = parse_curl_json(fam, url, expected, proc)
                    entry = {"server": server.name, "server_port": server.port, "level": level.name,
                             "family": fam, "repetition": rep, "start_ts": start, "end_ts": end,
                             "client_port": result.local_port} | vars(result)
                    log.write(json.dumps(entry) + "\n")
                    advance()
                    time.sleep(spec.gap_s)

    # ------------------------------------------------------------------------------
    def _analyze(self) -> None:
        result = analyze_run(self.run_dir)
        write_csv(self.run_dir / "metrics.csv", result.rows, METRIC_FIELDS)
        summary = summarize(result.rows, [lv.name for lv in self.spec.levels])
        write_csv(self.run_dir / "summary.csv", summary, summary_fields())
        self.manifest["analysis"] = {"rows": len(result.rows), "problems": result.problems,
                                     "pcap_read": result.read_stats}
        expected = len(self.spec.servers) * len(self.spec.levels) * self.repetitions * len(self.spec.measure.families)
        self.checks.append(fidelity.Check("measured_requests", len(result.rows) == expected, len(result.rows),
                                          f"{expected}", "; ".join(result.problems[:3])))
        self._lean_log_checks(result.rows)
        self._bottleneck_checks()

    def _lean_log_checks(self, rows: list[dict]) -> None:
        """The lean server's log of its own retransmissions against what the pcap analysis found."""
        for server in (s for s in self.spec.servers if s.kind == "lean"):
            log_path = self.run_dir / "logs" / f"leanweb-{server.name}.jsonl"
            if not log_path.exists():
                continue
            ours = [r for r in rows if r["server"] == server.name]
            agreeing, problems = compare_with_pcap(ours, retransmissions_by_peer_port(log_path))
            self.checks.append(fidelity.Check(
                f"retransmissions_pcap_vs_log_{server.name}", agreeing == len(ours), f"{agreeing}/{len(ours)}",
                "every measured connection: pcap count == leanweb log count", "; ".join(problems[:3])))

    def _bottleneck_checks(self) -> None:
        for server, levels in self.manifest["levels"].items():
            for level, info in levels.items():
                # the FIFO under HTB is where packets queue and drop (HTB's own counters repeat them)
                info["bottleneck_drops"] = {label: sum(q["drops"] for q in qs.values() if q["kind"] == "pfifo")
                                            for label, qs in info.get("qdiscs", {}).items()}
