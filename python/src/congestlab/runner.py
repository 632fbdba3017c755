"""The one experiment lifecycle, for every study: plan the points, build the testbed once,
then for each (point, repetition) in order: reconfigure the testbed, keep the right servers
and long-lived background running, capture at every server's port, run the measuring
workloads, record; then analysis, manifest and report. Teardown always runs (exceptions,
Ctrl-C, SIGTERM), and the manifest says how the run ended.

Run directory: docs/data-format.md. Each repetition of a point writes its own directory
points/<point id>/r<repetition>/ (pcap/, logs/, records.jsonl, rep.json); rep.json is
written last, so a repetition without it did not complete.

A Runner can also execute a subset of the runs (`runs=`: a cluster node's unit) and
continue a run directory (`resume=`: only the repetitions without rep.json run; the
manifest records each resume).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from congestlab import fidelity
from congestlab.capture.tcpdump import parse_drop_counts, tcpdump_argv, tcpdump_version, wait_listening
from congestlab.errors import CongestlabError, Interrupted, NotRootError, SpecError, TestbedError
from congestlab.rundir import FORMAT_VERSION, environment, utc_now, write_manifest
from congestlab.servers.files import url_path, write_files
from congestlab.spec.lean_knobs import requested_cc
from congestlab.servers.factory import make_server
from congestlab.spec.models import ServerSpec, StudySpec
from congestlab.spec.sweep import Point, block_backgrounds, expand, run_order
from congestlab.spec.workloads import BACKGROUND_KINDS
from congestlab.testbed import Testbed, new_prefix
from congestlab.testbed.executor import run_argv
from congestlab.traffic.chromium import chromium_version
from congestlab.traffic.http_request import curl_argv, curl_version, parse_curl_json, url_for
from congestlab.workloads import runner_for, tool_versions
from congestlab.workloads.base import Background, Context, RunningServer

BUILTIN_CC = ("cubic", "reno", "bbr")
PROBE_FILE_KIB = 504
# a new server must answer its ready check within this long (quiet path / under a background)
READY_S = 10.0
READY_UNDER_LOAD_S = 60.0
# a background process stops by itself this long after it starts, whatever happens to us
BACKGROUND_MARGIN_S = 120.0


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


def wanted_cc(study: StudySpec) -> dict[str, str]:
    """Spec congestion control per kernel host: the node's, or that of a server on it."""
    chosen = {n.name: n.cc for n in study.topology.nodes if n.kind == "host" and n.stack == "kernel"}
    for server in study.servers:
        if server.kind != "lean":
            chosen[server.node] = server.cc
    return chosen


def flow_cc(study: StudySpec) -> set[str]:
    """Congestion controls the study's iperf flows select per socket (iperf3 -C)."""
    return {flow.cc for w in study.workloads if w.kind == "iperf" for flow in w.flows if flow.cc}


@dataclass
class Captures:
    """A repetition's tcpdumps (name, process, stderr path, argv) and when they all listened:
    the lean log/capture check counts the log inside [started_s, stop]."""
    running: list[tuple[str, object, Path, list[str]]] = field(default_factory=list)
    started_s: float = 0.0


class _Server:
    """A server started for a run of points with the same settings."""

    def __init__(self, spec: ServerSpec, handle, docroot: Path, record: dict):
        self.spec = spec
        self.handle = handle
        self.docroot = docroot
        self.record = record


class Runner:
    def __init__(self, study: StudySpec, run_dir: Path, quick: bool = False, calibrate: bool = False,
                 console: Console | None = None, argv: list[str] | None = None, preset: str | None = None,
                 runs: list[tuple[str, int]] | None = None, resume: dict | None = None, analyze: bool = True,
                 tag: str = ""):
        """`runs`: only these (point id, repetition) pairs, in the study's order (default all).
        `resume`: the stored manifest of `run_dir`; the repetitions without rep.json run, the
        finished ones are kept. `analyze`: False leaves analysis to the caller (cluster nodes).
        `tag`: appended to server instance names and background log directories, so those of
        several executions gathered into one run directory never collide (cluster/)."""
        self.study = study
        self.run_dir = Path(run_dir)
        self.quick = quick
        self.calibrate = calibrate
        self.console = console or Console(stderr=True)
        self.prefix = new_prefix()
        self.points: list[Point] = expand(study, quick)
        self.all_runs = run_order(self.points, study.order, study.seed)
        self.runs = self.all_runs
        if runs is not None:
            wanted = {(str(pid), int(rep)) for pid, rep in runs}
            unknown = wanted - {(p.id, r) for p, r in self.all_runs}
            if unknown:
                raise SpecError("runs", f"not runs of this study: {sorted(unknown)}")
            self.runs = [(p, r) for p, r in self.all_runs if (p.id, r) in wanted]
        self.do_analyze = analyze
        self.tag = tag
        self.axes = list(dict.fromkeys(a for p in self.points for a in p.labels))
        self.checks: list[fidelity.Check] = []
        self.manifest: dict = {
            "format_version": FORMAT_VERSION,
            "study": study.name,
            "preset": preset,
            "quick": quick,
            "status": "running",
            "started_utc": utc_now(),
            "command": argv or sys.argv,
            "spec": study.model_dump(mode="json"),
            "axes": self.axes,
            "order": study.order,
            "points": [p.describe() for p in self.points],
            "runs_total": len(self.runs),
            "runs_done": 0,
            "environment": environment(),
            "testbed": {"prefix": self.prefix},
            "servers": {},
            "workloads": {},
            "reconfigurations": [],
        }
        self.installed_cc: list[str] = []
        self.servers: dict[str, _Server] = {}
        self.backgrounds: dict[str, tuple[dict, Background]] = {}  # name -> (resolved spec, runner)
        self._temp_dirs: list[Path] = []
        self._instances = 0
        self._last_point = ""
        self._servers_started: set[str] = set()  # by the latest _reconcile_servers
        self._resume_entry: dict | None = None
        if resume is not None:
            self._continue(resume, argv)

    def _continue(self, stored: dict, argv: list[str] | None) -> None:
        """Carry a stored manifest on: keep what the finished repetitions recorded (their
        server instances, background instances, fidelity checks), run only the rest."""
        done = [(p, r) for p, r in self.runs if self.rep_complete(p.id, r)]
        self.runs = [(p, r) for p, r in self.runs if not self.rep_complete(p.id, r)]
        fresh = self.manifest
        self.manifest = dict(stored)
        for key in ("error", "finished_utc", "timing"):
            self.manifest.pop(key, None)
        self.manifest["status"] = "running"
        self.manifest["runs_done"] = len(done)
        self.manifest["environment"] = fresh["environment"]
        self.manifest.setdefault("servers", {})
        self.manifest.setdefault("workloads", {})
        self.manifest.setdefault("reconfigurations", [])
        self.manifest["testbed"] = {"prefix": self.prefix}
        self._instances = sum(len(v) for v in self.manifest["servers"].values())
        self._resume_entry = {"started_utc": utc_now(), "command": argv or sys.argv,
                              "previous_status": stored.get("status"), "previous_error": stored.get("error"),
                              "previous_prefix": stored.get("testbed", {}).get("prefix"), "prefix": self.prefix,
                              "kept": len(done), "ran": [f"{p.id}#{r}" for p, r in self.runs]}
        self.manifest.setdefault("resumes", []).append(self._resume_entry)
        for point, rep in done:  # their checks stand as recorded (rep.json, background instances)
            info = json.loads((self.run_dir / "points" / point.id / f"r{rep}" / "rep.json").read_text())
            self.checks += [fidelity.Check(f"{c['name']}@{point.id}#{rep}", c["ok"], c["value"], c["expected"],
                                           c.get("message", "")) for c in info.get("checks", [])]
        for workload in self.manifest["workloads"].values():
            for instance in workload.get("instances", []):
                self.checks += [fidelity.Check(f"{c['name']}@{instance['first_point']}", c["ok"], c["value"],
                                               c["expected"], c.get("message", ""))
                                for c in instance.get("checks", [])]

    def rep_complete(self, point_id: str, rep: int) -> bool:
        """rep.json is written last: a repetition with it completed."""
        return (self.run_dir / "points" / point_id / f"r{rep}" / "rep.json").is_file()

    # ------------------------------------------------------------------------------
    def run(self) -> Path:
        require_root()
        start = time.monotonic()
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        cpu0 = fidelity.read_cpu_jiffies()
        (self.run_dir / "points").mkdir(parents=True, exist_ok=True)
        for point, rep in self.runs:  # a repetition without rep.json did not complete: discarded
            shutil.rmtree(self.run_dir / "points" / point.id / f"r{rep}", ignore_errors=True)
        write_manifest(self.run_dir, self.manifest)
        try:
            with sigterm_as_interrupt():
                if self.runs:
                    self._run_testbed()
            if self.do_analyze:
                self._analyze()
        except KeyboardInterrupt:
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
        self.manifest["finished_utc"] = utc_now()
        if self._resume_entry is not None:
            self._resume_entry |= {"finished_utc": self.manifest["finished_utc"], "status": "complete",
                                   "wall_s": self.manifest["timing"]["wall_s"]}
        write_manifest(self.run_dir, self.manifest)
        return self.run_dir

    def _run_testbed(self) -> None:
        """One testbed for self.runs (built for the first point, reconfigured per run); torn down always."""
        self.manifest["tools"] = self._tool_versions()
        first = self.points[0]  # as before; each run reconfigures the testbed to its point
        kernel_cc = self._kernel_cc(first.study)
        with Testbed(first.study.topology, prefix=self.prefix, kernel_cc=kernel_cc,
                     run_dir=str(self.run_dir)) as tb:
            try:
                self.manifest["testbed"] = tb.describe() | {
                    "setup_s": round(tb.setup_s, 3), "setup_commands": tb.executor.commands_run}
                self._check_reachability(tb, first)
                self.manifest["qdiscs"] = self._qdisc_config(tb)
                if self.calibrate:
                    self.manifest["calibration"] = self._calibrate(tb)
                self._run_all(tb)
            finally:
                self._stop_backgrounds()
                self._stop_servers()
        self.manifest["testbed"]["teardown_s"] = round(tb.teardown_s, 3)
        self.manifest["testbed"]["link_emulation"] = tb.emulation  # with linkem's final counters
        self._remove_installed_cc()
        self._remove_temp_dirs()

    def _fail(self, status: str, message: str) -> None:
        self._remove_temp_dirs()
        try:
            self._remove_installed_cc()
        except CongestlabError as err:
            message += f"; and removing the congestion controls it installed failed: {err}"
        self.manifest["status"] = status
        self.manifest["error"] = message
        if self._resume_entry is not None:
            self._resume_entry |= {"finished_utc": utc_now(), "status": status}
        self.manifest["fidelity"] = {"checks": fidelity.checks_to_json(self.checks)}
        write_manifest(self.run_dir, self.manifest)

    def _remove_temp_dirs(self) -> None:
        for path in self._temp_dirs:
            shutil.rmtree(path, ignore_errors=True)
        self._temp_dirs = []

    # ------------------------------------------------------------------------------
    def _run_all(self, tb: Testbed) -> None:
        columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("eta"), TimeRemainingColumn())
        with Progress(*columns, console=self.console, transient=False) as progress:
            task = progress.add_task(self.study.name, total=len(self.runs))
            for point, rep in self.runs:
                progress.update(task, description=f"{point.id} #{rep}")
                self._run_one(tb, point, rep)
                self.manifest["runs_done"] += 1
                write_manifest(self.run_dir, self.manifest)
                progress.advance(task)

    def _run_one(self, tb: Testbed, point: Point, rep: int) -> None:
        study = point.study
        kernel_cc = self._kernel_cc(study)
        changes = tb.reconfigure(study.topology, kernel_cc)
        if changes:
            self.manifest["reconfigurations"].append({"before": f"{point.id}#{rep}", "changes": changes})
        self._stop_stale_backgrounds(point)  # before servers start: their ready check needs a quiet path
        self._reconcile_servers(tb, point)
        ctx = Context(tb, self.run_dir, study, {n: RunningServer(s.spec, s.spec.port) for n, s in self.servers.items()},
                      bound_s=self._bound_s(point, rep))
        started = self._reconcile_backgrounds(ctx, point)
        self._last_point = point.id
        rep_dir = self.run_dir / "points" / point.id / f"r{rep}"
        if rep_dir.exists():
            shutil.rmtree(rep_dir)  # a repetition that did not complete before
        (rep_dir / "logs").mkdir(parents=True)
        (rep_dir / "pcap").mkdir()
        point_backgrounds: list[Background] = []
        captures = Captures()
        q0 = self._qdisc_snapshot(tb)
        linkem0 = tb.linkem_stats()
        cpu0 = fidelity.read_cpu_jiffies()
        info: dict = {"point": point.id, "repetition": rep, "started_utc": utc_now()}
        checks: list[fidelity.Check] = []
        try:
            if started:  # a long-lived background warms up before the capture: a 60 s warm-up
                time.sleep(study.warmup_s)  # of 100 Mbit/s would fill the first repetition's pcap
            captures = self._start_captures(tb, rep_dir)
            started = False
            for name in point.workloads:
                spec = study.workload(name)
                if spec.kind in BACKGROUND_KINDS and spec.lifetime == "point":
                    bg = runner_for(spec)(spec, ctx, rep_dir / "logs")
                    point_backgrounds.append(bg)
                    bg.start()
                    started = True
            if started:
                time.sleep(study.warmup_s)
            backgrounds = [bg for _, bg in self.backgrounds.values()] + point_backgrounds
            for bg in backgrounds:
                bg.open_window()
            records, checks, window = self._measure(ctx, point, rep, rep_dir)
            for bg in backgrounds:
                bg_records, bg_checks = bg.measure(window)
                records += bg_records
                checks += bg_checks
            info["window_epoch_s"] = list(window)
        finally:
            for bg in point_backgrounds:
                checks += bg.lifetime_checks()
                bg.stop()
            self._stop_captures(tb, captures, info)
        info["cpu_busy_pct"] = round(fidelity.cpu_busy_pct(cpu0, fidelity.read_cpu_jiffies()), 1)
        info["qdiscs"] = {label: fidelity.qdisc_delta(q0.get(label, {}), now)
                          for label, now in self._qdisc_snapshot(tb).items()}
        info["bottleneck_drops"] = {label: sum(q["drops"] for q in qs.values() if q["kind"] in ("pfifo", "tbf"))
                                    for label, qs in info["qdiscs"].items()}
        # what the link emulator did during the repetition (e.g. the loss it realised)
        info["linkem"] = {label: {k: v - linkem0.get(label, {}).get(k, 0) for k, v in now.items()
                                  if isinstance(v, int) and k in ("received", "delayed", "dropped", "dropped_random",
                                                                  "dropped_held_cap", "kernel_user_dropped")}
                          for label, now in tb.linkem_stats().items()}
        info["servers"] = {name: s.record["instance"] for name, s in self.servers.items()}
        info["checks"] = fidelity.checks_to_json(checks)
        info["finished_utc"] = utc_now()
        self.checks += [fidelity.Check(f"{c.name}@{point.id}#{rep}", c.ok, c.value, c.expected, c.message)
                        for c in checks]
        with open(rep_dir / "records.jsonl", "w") as fh:
            for kind, row in records:
                fh.write(json.dumps({"kind": kind, "row": row}) + "\n")
        (rep_dir / "rep.json").write_text(json.dumps(info, indent=1) + "\n")  # last: the repetition is complete

    def _bound_s(self, point: Point, rep: int) -> float:
        """How long a long-lived background started now may run: every run from this one on
        that could keep one of them (the same workload with the same settings, one run after
        another: its unit, and the next units while it stays unchanged, even when the other
        backgrounds change, e.g. the same MGEN rate under new HTTP loads), all of them, at most."""
        kept = block_backgrounds(point)
        first = self.runs.index((point, rep))
        total = BACKGROUND_MARGIN_S
        for later, _ in self.runs[first:]:
            there = block_backgrounds(later)
            kept = {name: spec for name, spec in kept.items() if there.get(name) == spec}
            if not kept:
                break
            total += self._run_bound_s(later)
        return total

    @staticmethod
    def _run_bound_s(point: Point) -> float:
        study = point.study
        per_run = study.warmup_s + study.gap_s + 10
        for name in point.workloads:
            spec = study.workload(name)
            if spec.kind not in BACKGROUND_KINDS:
                per_run += runner_for(spec).time_bound_s(spec, study)
            else:
                per_run += getattr(spec, "duration_s", 0)
        return per_run

    def _measure(self, ctx: Context, point: Point, rep: int, rep_dir: Path):
        """The measuring workloads of the point, all at once; with none, the background
        runs for its declared duration (the window)."""
        study = point.study
        measuring = [study.workload(n) for n in point.workloads if study.workload(n).kind not in BACKGROUND_KINDS]
        t0 = time.time()
        if not measuring:
            hold_s = max((getattr(study.workload(n), "duration_s", 0) for n in point.workloads), default=0)
            time.sleep(max(hold_s, 1.0))
            return [], [], (t0, time.time())
        runners = [runner_for(spec)(spec, ctx, rep_dir / "logs") for spec in measuring]
        results: list = [None] * len(runners)
        errors: list[BaseException] = []

        def one(i: int) -> None:
            try:
                results[i] = runners[i].run(rep)
            except BaseException as err:  # re-raised in the main thread
                errors.append(err)

        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(runners))]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():  # joined in slices so Ctrl-C reaches the main thread
                t.join(0.2)
        if errors:
            raise errors[0]
        t1 = time.time()
        for spec, r in zip(measuring, runners):
            self.manifest["workloads"].setdefault(spec.name, {"kind": spec.kind, "argv": r.argvs[:4]})
        records = [rec for res in results for rec in res[0]]
        checks = [c for res in results for c in res[1]]
        return records, checks, (t0, t1)

    # --- servers ------------------------------------------------------------------
    def _reconcile_servers(self, tb: Testbed, point: Point) -> None:
        want = {name: point.study.server(name) for name in point.servers}
        for name in list(self.servers):
            if name not in want or self.servers[name].spec != want[name]:
                self._stop_server(name)
        self._servers_started = set()
        for name, spec in want.items():
            if name not in self.servers:
                self._start_server(tb, spec, point)
                self._servers_started.add(name)

    def _start_server(self, tb: Testbed, spec: ServerSpec, point: Point) -> None:
        # Apache's workers run as www-data, which may not traverse the run directory
        # (e.g. under a private --out): serve from a world-readable temporary docroot.
        docroot = Path(tempfile.mkdtemp(prefix=f"congestlab-{self.prefix}-docroot-"))
        docroot.chmod(0o755)
        self._temp_dirs.append(docroot)
        digests = write_files(docroot, sorted(set(spec.files_kib) | {PROBE_FILE_KIB}))
        self._instances += 1
        instance = f"i{self._instances}{self.tag}"
        handle = make_server(spec, tb, self.run_dir, docroot, instance)
        user_stack = spec.kind == "lean"
        record = {"instance": instance, "kind": spec.kind, "node": spec.node, "port": spec.port,
                  "version": handle.version(), "first_point": point.id, "knobs": dict(spec.knobs),
                  "cc_requested": f"leanweb --cc {requested_cc(spec.knobs)}" if user_stack else spec.cc,
                  "cc_kernel": None if user_stack else self._kernel_cc(point.study).get(spec.node),
                  "files_sha256": {str(k): v for k, v in digests.items()},
                  "log_dir": str(Path("logs") / "servers" / f"{spec.name}-{instance}")}
        self.manifest["servers"].setdefault(spec.name, []).append(record)
        server = _Server(spec, handle, docroot, record)
        self.servers[spec.name] = server
        handle.start()  # a process in the node's namespace: namespace deletion also ends it
        handle.wait_started()
        record["argv"] = handle.argv
        client = self._probe_client(point, spec)
        # a server started while a long-lived background loads the path (e.g. the rto preset's
        # lean server per cell at 125 Mbit/s) may lose its first SYN-ACKs: give it longer
        self._ready_check(tb, spec, client, READY_UNDER_LOAD_S if self.backgrounds else READY_S)
        if user_stack:  # leanweb's own account of the settings it runs with (first log line)
            record["settings_effective"] = handle.effective_settings()
            record["cc_effective"] = f"leanweb --cc {record['settings_effective']['cc']}"
            wanted = record["cc_requested"]
        else:
            record["cc_effective"] = self._effective_cc(tb, spec, client)
            wanted = record["cc_kernel"]
        if record["cc_effective"] != wanted:
            raise TestbedError(f"server {spec.name}: connections use {record['cc_effective']!r}, "
                               f"not the requested {wanted!r}")

    def _probe_client(self, point: Point, server: ServerSpec) -> str:
        """A kernel host that talks to this server in the point, else in another point of its
        unit (for ready and cc checks): the rto preset's E4 starts both servers of a pair at
        the unit's first point, whose GET goes to one of them."""
        unit = [point] + [p for p in self.points if p.unit == point.unit and p is not point]
        client = next(filter(None, (_client_of(candidate, server.name) for candidate in unit)), None)
        if client is None:
            raise SpecError(f"servers.{server.name}", "no workload of this point or its unit talks to it "
                            "(nothing to probe it from)")
        return client

    def _stop_server(self, name: str) -> None:
        server = self.servers.pop(name)
        server.handle.stop()
        server.record["stopped_utc"] = utc_now()

    def _stop_servers(self) -> None:
        for name in list(self.servers):
            try:
                self._stop_server(name)
            except Exception:  # noqa: BLE001 - teardown kills what is left by namespace
                pass

    def _ready_check(self, tb: Testbed, server: ServerSpec, client: str, timeout_s: float = READY_S) -> None:
        """Both families answer 200 with the whole file before anything is measured."""
        size = min(server.files_kib)
        for fam in ("v4", "v6"):
            url = url_for(tb.address(server.node, fam), server.port, url_path(size))
            deadline = time.monotonic() + timeout_s
            while True:
                proc = tb.run(client, curl_argv(url, fam, 5), check=False, timeout_s=10)
                result = parse_curl_json(fam, url, size * 1024, proc)
                if result.ok:
                    break
                if time.monotonic() > deadline:
                    raise TestbedError(f"server {server.name} not ready over {fam}: {result.error}")
                time.sleep(0.2)

    def _effective_cc(self, tb: Testbed, server: ServerSpec, client: str) -> str:
        """The algorithm of a live server-side connection, from `ss -ti` in the server's
        namespace while a rate-limited download keeps the connection open."""
        from congestlab.workloads.iperf import ss_algorithm

        url = url_for(tb.address(server.node, "v4"), server.port, url_path(PROBE_FILE_KIB))
        probe = tb.start(client, ["curl", "-s", "-4", "--limit-rate", "20k", "--max-time", "10", "-o", "/dev/null",
                                  url])
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

    # --- background ---------------------------------------------------------------
    def _reconcile_backgrounds(self, ctx: Context, point: Point) -> bool:
        """Long-lived backgrounds of the point: kept while unchanged, else restarted.
        True when one started (the caller waits the warm-up)."""
        study = point.study
        want = {}
        for name in point.workloads:
            spec = study.workload(name)
            if spec.kind in BACKGROUND_KINDS and spec.lifetime == "block":
                want[name] = spec
        for name in list(self.backgrounds):
            # a load whose server was just (re)started begins again too, with its warm-up
            if name not in want or self.backgrounds[name][0] != want[name] \
                    or getattr(want[name], "server", None) in self._servers_started:
                self._stop_background(name, self._last_point)
        started = False
        for name, spec in want.items():
            if name in self.backgrounds:
                continue
            # a resume starts the unit's background again: its own log directory
            resumed = f"-resume{len(self.manifest['resumes'])}" if self._resume_entry is not None else ""
            log_dir = self.run_dir / "logs" / "background" / f"{name}-u{point.unit}{self.tag}{resumed}"
            runner = runner_for(spec)(spec, ctx, log_dir)
            self.backgrounds[name] = (spec, runner)
            runner.start()
            self.manifest["workloads"].setdefault(name, {"kind": spec.kind, "instances": []})["instances"].append(
                {"first_point": point.id, "log_dir": str(log_dir.relative_to(self.run_dir))} | runner.describe())
            started = True
        return started

    def _stop_stale_backgrounds(self, point: Point) -> None:
        """Stop the long-lived backgrounds this point will not keep: gone, changed, or aimed
        at a server about to restart. A new server's ready check (a whole file within 5 s)
        then does not compete with loads that are about to stop anyway."""
        study = point.study
        restarting = {name for name in point.servers
                      if name not in self.servers or self.servers[name].spec != study.server(name)}
        for name in list(self.backgrounds):
            spec = study.workload(name) if name in point.workloads else None
            if spec is None or self.backgrounds[name][0] != spec or getattr(spec, "server", None) in restarting:
                self._stop_background(name, self._last_point)

    def _stop_background(self, name: str, point_id: str = "") -> None:
        spec, runner = self.backgrounds.pop(name)
        try:
            checks = runner.lifetime_checks()
        finally:
            runner.stop()
        instance = self.manifest["workloads"][name]["instances"][-1]
        where = instance["first_point"] + (f" to {point_id}" if point_id and point_id != instance["first_point"] else "")
        self.checks += [fidelity.Check(f"{c.name}@{instance['first_point']}", c.ok, c.value, c.expected,
                                       f"{where}: {c.message}" if c.message else "") for c in checks]
        instance["checks"] = fidelity.checks_to_json(checks)

    def _stop_backgrounds(self) -> None:
        for name in list(self.backgrounds):
            try:
                self._stop_background(name, self._last_point)
            except Exception:  # noqa: BLE001 - the testbed's teardown kills what is left
                pass

    # --- capture ------------------------------------------------------------------
    def _start_captures(self, tb: Testbed, rep_dir: Path) -> Captures:
        captures = Captures()
        for name, server in self.servers.items():
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

    def _stop_captures(self, tb: Testbed, captures: Captures, info: dict) -> None:
        if captures.running:
            time.sleep(0.2)  # the last ACKs and FINs reach the capture
            # the lean log/capture check counts the log's transmissions inside this span
            info["capture_epoch_s"] = [captures.started_s, time.time()]
        info["captures"] = {}
        for name, proc, err_path, argv in captures.running:
            tb.stop(proc)
            info["captures"][name] = {"argv": argv, "tcpdump": parse_drop_counts(err_path.read_text(errors="replace"))}

    # --- environment ------------------------------------------------------------------
    def _tool_versions(self) -> dict:
        versions = {"tcpdump": tcpdump_version(), "curl": curl_version(),
                    "iproute2": run_argv(["ip", "-V"]).stdout.strip()}
        kinds = {w.kind for p in self.points for w in p.study.workloads if w.name in p.workloads}
        if any(w.kind == "get" and w.client_kind == "chromium"
               for p in self.points for w in p.study.workloads if w.name in p.workloads):
            versions["chromium"] = chromium_version()
        return versions | tool_versions(kinds)

    def _kernel_cc(self, study: StudySpec) -> dict[str, str]:
        chosen = wanted_cc(study)
        per_socket = flow_cc(study)  # iperf3 -C asks for these on its own sockets
        if "compound" in set(chosen.values()) | per_socket and "compound" not in self.installed_cc:
            from congestlab.cc.registry import COMPOUND_KERNEL_NAME, available

            if COMPOUND_KERNEL_NAME not in available():
                self.installed_cc.append("compound")
        for cc in sorted(per_socket):
            kernel_cc_name(cc)  # installs Compound TCP when a flow asks for it
        names = {node: kernel_cc_name(cc) for node, cc in chosen.items()}
        record = self.manifest.setdefault("congestion_control", {"per_host": names})
        record["installed_for_this_run"] = self.installed_cc
        return names

    def _remove_installed_cc(self) -> None:
        """Registration is global to the machine: what this run installed, it removes."""
        if self.installed_cc:
            from congestlab.cc.registry import remove

            for name in self.installed_cc:
                remove(name)
            self.installed_cc = []

    def _check_reachability(self, tb: Testbed, point: Point) -> None:
        """Every pair of kernel hosts a workload joins answers ping over both families."""
        study = point.study
        kernel = {n.name for n in study.topology.nodes if n.stack == "kernel"}
        pairs = set()
        for w in study.workloads:
            if w.kind == "mgen":
                pairs |= {(p.source, p.sink) for p in w.pairs}
            elif w.kind in ("iperf", "ping"):
                pairs.add((w.client, w.server))
                pairs |= {(f.client, w.server) for f in getattr(w, "flows", []) if f.client}
            elif w.kind in ("http_load", "anma"):
                pairs.add((w.client, study.server(w.server).node))
            elif w.kind == "get":
                pairs |= {(r.client, study.server(r.server).node) for r in w.requests}
        for src, dst in sorted(pairs):
            if src in kernel and dst in kernel:
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
        """One iperf3 flow per family across the bottleneck, 5 s each."""
        from congestlab.calibrate import calibrate_bottleneck

        if self.study.calibrate is None:
            raise SpecError("calibrate", "this spec names no (sender, receiver) pair for --calibrate")
        sender, receiver = self.study.calibrate
        log_dir = self.run_dir / "logs"
        log_dir.mkdir(exist_ok=True)
        return calibrate_bottleneck(tb, sender, receiver, log_dir)

    # ------------------------------------------------------------------------------
    def _analyze(self) -> None:
        from congestlab.analysis.run_analysis import analyze_run

        result = analyze_run(self.run_dir, self.manifest)
        self.manifest["analysis"] = result.summary
        self.checks += result.checks


def _client_of(point: Point, server_name: str) -> str | None:
    """The client of the first workload of `point` that talks to `server_name`."""
    for name in point.workloads:
        w = point.study.workload(name)
        if w.kind == "get":
            client = next((req.client for req in w.requests if req.server == server_name), None)
            if client:
                return client
        elif w.kind in ("http_load", "anma") and w.server == server_name:
            return w.client
    return None
