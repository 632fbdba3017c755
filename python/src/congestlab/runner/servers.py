"""The servers of a run: started when a point needs one with new settings, kept while
points with the same settings follow, and checked before anything is measured (both
families answer with the whole file; the connections use the requested congestion control)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from congestlab.errors import SpecError, TestbedError
from congestlab.rundir import utc_now
from congestlab.runner.host import pause_if_asked
from congestlab.runner.quic_cc_probe import probe_quic_cc
from congestlab.testbed.cgroups import ServerCgroup
from congestlab.servers.factory import make_server
from congestlab.servers.files import url_path, write_files
from congestlab.servers.tls import RunCertificates, make_run_certificates
from congestlab.spec.lean_knobs import requested_cc
from congestlab.spec.servers import ServerSpec
from congestlab.spec.sweep import Point
from congestlab.testbed import Testbed
from congestlab.traffic.cffi_get import cffi_argv, parse_cffi_json
from congestlab.traffic.http_request import curl_argv, http_flag, parse_curl_json, url_for
from congestlab.traffic.socket_stats import ss_algorithm
from congestlab.workloads import runner_for
from congestlab.workloads.base import RunningServer as ServerView

PROBE_FILE_KIB = 504
# a new server must answer its ready check within this long (quiet path / under a background)
READY_S = 10.0
READY_UNDER_LOAD_S = 60.0


class RunningServer:
    """A server started for a run of points with the same settings."""

    def __init__(self, spec: ServerSpec, handle, docroot: Path, record: dict):
        self.spec = spec
        self.handle = handle
        self.docroot = docroot
        self.record = record


class Servers:
    """The StudyRun's servers (name -> RunningServer); `started`: those the latest
    reconcile started (a background aimed at one of them starts again too)."""

    def __init__(self, run):
        self.run = run  # the StudyRun: run directory, manifest, prefix, tag, temporary dirs
        self.running: dict[str, RunningServer] = {}
        self.started: set[str] = set()
        self.instances = 0
        self.tls: RunCertificates | None = None

    def reconcile(self, tb: Testbed, point: Point, under_load: bool) -> None:
        want = {name: point.study.server(name) for name in point.servers}
        for name in list(self.running):
            if name not in want or self.running[name].spec != want[name]:
                self.stop(name)
        self.started = set()
        for name, spec in want.items():
            if name not in self.running:
                self._start(tb, spec, point, under_load)
                self.started.add(name)

    def restarting(self, point: Point) -> set[str]:
        """The point's servers that are not running with its settings."""
        return {name for name in point.servers
                if name not in self.running or self.running[name].spec != point.study.server(name)}

    def _start(self, tb: Testbed, spec: ServerSpec, point: Point, under_load: bool) -> None:
        run = self.run
        # Apache's workers run as www-data, which may not traverse the run directory
        # (e.g. under a private --out): serve from a world-readable temporary docroot.
        docroot = Path(tempfile.mkdtemp(prefix=f"congestlab-{run.prefix}-docroot-"))
        docroot.chmod(0o755)
        run.temp_dirs.append(docroot)
        digests = write_files(docroot, sorted(set(spec.files_kib) | {PROBE_FILE_KIB}))
        self.instances += 1
        instance = f"i{self.instances}{run.tag}"
        tls = self.certificates(tb) if spec.tls else None
        cgroup = ServerCgroup(f"{run.prefix}-{spec.name}-{instance}".lower())
        handle = make_server(spec, tb, run.run_dir, docroot, instance, tls, cgroup)
        user_stack = spec.kind == "lean"
        own_cc = user_stack or spec.udp_only  # its transport is its own: no kernel algorithm is used
        record = {"instance": instance, "kind": spec.kind, "node": spec.node, "port": spec.port,
                  "version": handle.version(), "first_point": point.id, "knobs": dict(spec.knobs),
                  "cc_requested": _own_cc(spec) if own_cc else spec.cc,
                  "cc_kernel": None if own_cc else run.cc.per_host(point.study).get(spec.node),
                  "files_sha256": {str(k): v for k, v in digests.items()},
                  "log_dir": str(Path("logs") / "servers" / f"{spec.name}-{instance}"),
                  "tls": spec.tls, "http": list(spec.http), "ready_check": spec.ready.kind, "cgroup": cgroup.name}
        if tls is not None:
            record["certificate_sha256"] = tls.fingerprint_sha256
        quic = handle.confounds() if hasattr(handle, "confounds") else None
        if quic is not None:  # a QUIC stack's own settings (docs/http3.md)
            record["quic"] = quic
        run.manifest["servers"].setdefault(spec.name, []).append(record)
        server = RunningServer(spec, handle, docroot, record)
        self.running[spec.name] = server
        families = _families_asked(point, spec.name)
        client = self.probe_client(point, spec)
        if spec.kind == "ngtcp2":  # its controller, from a probe instance's debug log (it names BBR only)
            probe = make_server(spec, tb, run.run_dir, docroot, f"{instance}-ccprobe", tls,
                                ServerCgroup(f"{run.prefix}-{spec.name}-{instance}p".lower()))
            record["cc_effective"], record["cc_effective_from"] = probe_quic_cc(
                tb, probe, client, families[0], tb.address(spec.node, families[0]), spec.port, min(spec.files_kib),
                str(tls.ca))
        started = time.monotonic()
        handle.start()  # a process in the node's namespace and its cgroup (stop kills both)
        handle.wait_started(families=families)
        pause_if_asked("server-start")
        record["argv"] = handle.argv
        # a server started while a long-lived background loads the path (e.g. the rto preset's
        # lean server per cell at 125 Mbit/s) may lose its first SYN-ACKs: give it longer
        timeout_s = max(spec.ready.timeout_s, READY_UNDER_LOAD_S) if under_load else spec.ready.timeout_s
        if spec.ready.kind == "http":
            self._ready_check(tb, server, client, families, timeout_s)
        record["ready_s"] = round(time.monotonic() - started, 3)
        if user_stack:  # leanweb's own account of the settings it runs with (first log line)
            record["settings_effective"] = handle.effective_settings()
            record["cc_effective"] = f"leanweb --cc {record['settings_effective']['cc']}"
            wanted = record["cc_requested"]
        elif spec.udp_only:  # checked by the probe run above
            wanted = record["cc_requested"]
        else:
            record["cc_effective"] = self._effective_cc(tb, spec, client)
            wanted = record["cc_kernel"]
        if record["cc_effective"] != wanted:
            raise TestbedError(f"server {spec.name}: connections use {record['cc_effective']!r}, "
                               f"not the requested {wanted!r}")

    def probe_client(self, point: Point, server: ServerSpec) -> str:
        """A kernel host that talks to this server in the point, else in another point of its
        unit (for ready and cc checks): the rto preset's E4 starts both servers of a pair at
        the unit's first point, whose GET goes to one of them."""
        unit = [point] + [p for p in self.run.points if p.unit == point.unit and p is not point]
        client = next(filter(None, (_client_of(candidate, server.name) for candidate in unit)), None)
        if client is None:
            raise SpecError(f"servers.{server.name}", "no workload of this point or its unit talks to it "
                            "(nothing to probe it from)")
        return client

    def views(self) -> dict[str, ServerView]:
        """What the workloads see of the running servers (workloads/base.py)."""
        return {name: ServerView(s.spec, s.spec.port, s.handle.log_path if s.spec.kind == "lean" else None,
                                 s.handle.cpu_ns, s.handle.exited) for name, s in self.running.items()}

    def after_repetition(self, where: str) -> None:
        """A server whose process exited during the repetition `where` ends the run
        (`on_exit = "stop"`: its GETs are invalid, named so) or is stopped, its cgroup's
        tasks with it, and started anew before the next repetition (`"restart"`)."""
        for name, server in list(self.running.items()):
            returncode = server.handle.exited()
            if returncode is None:
                continue
            tail = server.handle.log_tail()
            server.record["exited"] = {"returncode": returncode, "noticed_after": where, "log_tail": tail}
            self.stop(name)
            if server.spec.on_exit == "stop":
                raise TestbedError(f"server {name} exited ({returncode}) during {where}: {tail or 'its log is empty'}"
                                   " (on_exit = \"restart\" starts it anew instead)")

    def stop(self, name: str) -> None:
        server = self.running.pop(name)
        server.handle.stop()
        server.record["stopped_utc"] = utc_now()
        if server.handle.final_cpu_ns is not None:  # the whole instance's CPU, every task of its cgroup
            server.record["cpu_total_ms"] = round(server.handle.final_cpu_ns / 1e6, 1)

    def stop_all(self) -> None:
        for name in list(self.running):
            try:
                self.stop(name)
            except Exception:  # noqa: BLE001 - teardown kills what is left by namespace
                pass

    def certificates(self, tb: Testbed) -> RunCertificates:
        """The run's CA and server certificate (every host's addresses), made at the first
        TLS server and recorded in the manifest."""
        if self.tls is None:
            addresses = [tb.address(name, fam) for name, node in tb.layout.nodes.items() if node.kind == "host"
                         for fam in ("v4", "v6")]
            self.tls = make_run_certificates(self.run.run_dir, addresses)
            self.run.manifest["tls"] = self.tls.record()
        return self.tls

    def _ready_check(self, tb: Testbed, server: RunningServer, client: str, families: tuple[str, ...],
                     timeout_s: float = READY_S) -> None:
        """Every family asked answers 200 with the whole file over every HTTP version served
        (and TLS when it speaks it) before anything is measured; a version it does not
        negotiate, or its process exiting, fails at once with its log's tail."""
        spec = server.spec
        size = min(spec.files_kib)
        ca = str(self.tls.ca) if spec.tls and self.tls else None
        for fam in families:
            url = url_for(tb.address(spec.node, fam), spec.port, url_path(size), spec.tls)
            for http in spec.http:
                deadline = time.monotonic() + timeout_s
                while True:
                    if http == "3":  # the curl here has no HTTP/3: libcurl with ngtcp2 through curl-cffi
                        proc = tb.run(client, cffi_argv(url, fam, 5, http, ca), check=False, timeout_s=15)
                        result, _ = parse_cffi_json(fam, url, size * 1024, proc, http)
                    else:
                        proc = tb.run(client, curl_argv(url, fam, 5, http, ca), check=False, timeout_s=10)
                        result = parse_curl_json(fam, url, size * 1024, proc, http)
                    if result.ok:
                        break
                    what = f"server {spec.name} not ready over {fam} (HTTP/{http}{' over TLS' if spec.tls else ''})"
                    exited = server.handle.exited()
                    if exited is not None:
                        raise TestbedError(f"{what}: it exited ({exited}); {server.handle.log_tail()}")
                    if result.http_negotiated not in (None, http):
                        raise TestbedError(f"{what}: {result.error}")
                    if time.monotonic() > deadline:
                        raise TestbedError(f"{what} within {timeout_s:g} s: {result.error}; "
                                           f"{server.handle.log_tail() or 'its log is empty'}")
                    time.sleep(0.2)

    def _effective_cc(self, tb: Testbed, server: ServerSpec, client: str) -> str:
        """The algorithm of a live server-side connection, from `ss -ti` in the server's
        namespace while a rate-limited download keeps the connection open."""
        url = url_for(tb.address(server.node, "v4"), server.port, url_path(PROBE_FILE_KIB), server.tls)
        speaks = [] if "1.1" in server.http else [http_flag("2", server.tls)]  # an h2c-only port
        trust = ["--cacert", str(self.tls.ca)] if server.tls and self.tls else []
        probe = tb.start(client, ["curl", "-s", *speaks, *trust, "-4", "--limit-rate", "20k", "--max-time", "10",
                                  "-o", "/dev/null", url])
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                out = tb.run(server.node, ["ss", "-tinH", "state", "established", f"( sport = :{server.port} )"]).stdout
                algorithm = next(filter(None, map(ss_algorithm, out.splitlines())), None)
                if algorithm:
                    return algorithm
                time.sleep(0.1)
        finally:
            tb.stop(probe)
        raise TestbedError(f"server {server.name}: could not read the congestion control with ss -ti")


def _own_cc(spec: ServerSpec) -> str:
    """The controller of a server whose transport is its own (the lean server's, ngtcp2's)."""
    if spec.kind == "lean":
        return f"leanweb --cc {requested_cc(spec.knobs)}"
    return f"ngtcp2 --cc {spec.quic_cc or 'cubic'}"


def _families_asked(point: Point, server_name: str) -> tuple[str, ...]:
    """The families the point's GETs ask `server_name` over (both when no GET asks it: a
    background's server is checked over both, as before)."""
    asked: set[str] = set()
    for name in point.workloads:
        spec = point.study.workload(name)
        asked |= runner_for(spec).measured_families(spec, server_name)
    return tuple(f for f in ("v4", "v6") if f in asked) or ("v4", "v6")


def _client_of(point: Point, server_name: str) -> str | None:
    """The client of the first workload of `point` that talks to `server_name`."""
    for name in point.workloads:
        spec = point.study.workload(name)
        client = runner_for(spec).client_of(spec, server_name)
        if client:
            return client
    return None
