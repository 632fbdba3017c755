"""The one experiment lifecycle, for every study: plan the points, build the testbed once,
then for each (point, repetition) in order: reconfigure the testbed, keep the right servers
and long-lived background running, capture at every server's port, run the measuring
workloads, record; then analysis, manifest and report. Teardown always runs (exceptions,
Ctrl-C, SIGTERM), and the manifest says how the run ended.

Run directory: docs/data-format.md. Each repetition of a point writes its own directory
points/<point id>/r<repetition>/ (pcap/, logs/, records.jsonl, rep.json); rep.json is
written last, so a repetition without it did not complete.

A StudyRun can also execute a subset of the runs (`runs=`: a cluster node's unit) and
continue a run directory (`resume=`: only the repetitions without rep.json run; the
manifest records each resume). With a `scheduler` (`--until-decisive`: congestlab/decisive/),
the runs given are the first batch; after each batch the scheduler names the next one (a round
of the points that still need it) on the same testbed, until it names none.
"""

from __future__ import annotations

import resource
import shutil
import time
from pathlib import Path

from rich.console import Console

from congestlab import fidelity
from congestlab.calibrate import calibrate_bottleneck
from congestlab.capture.tcpdump import tcpdump_version
from congestlab.errors import CongestlabError, Interrupted, RunDirError, SpecError
from congestlab.rundir import FULL_OR_READ_ONLY, PCAP_DIR, utc_now, write_manifest
from congestlab.runner.background import Backgrounds
from congestlab.runner.captures import Captures, ProbeSampler, probe_checks, start_captures, stop_captures
from congestlab.runner.host import CongestionControls, pause_if_asked, require_root, sigterm_as_interrupt
from congestlab.runner.manifest import (continued_manifest, new_manifest, record_analysis, rep_complete, rep_dir,
                                         write_failed_manifest, write_repetition)
from congestlab.runner.measuring import measure_workloads, measured_bytes
from congestlab.runner.network import check_reachability, qdisc_config, qdisc_snapshot
from congestlab.runner.progress import run_progress
from congestlab.runner.servers import Servers
from congestlab.runner.time_budget import (ANALYSIS, IN_PROGRESS, SERVER_RESTART, SETUP, TEARDOWN, WARMUP,
                                             TimeBudget, record_session, timed_out_seconds)
from congestlab.spec.models import StudySpec
from congestlab.spec.shaping import unshaped_links
from congestlab.spec.sweep import Point, expand, experiment_passes, longest_streaks, planned_runs
from congestlab.testbed import Testbed, new_prefix
from congestlab.testbed.executor import run_argv
from congestlab.traffic.http_request import curl_version
from congestlab.workloads import is_background, runner_for, tool_versions
from congestlab.workloads.base import Background, Context


class StudyRun:
    def __init__(self, study: StudySpec, run_dir: Path, quick: bool = False, calibrate: bool = False,
                 console: Console | None = None, argv: list[str] | None = None, preset: str | None = None,
                 runs: list[tuple[str, int]] | None = None, resume: dict | None = None, analyze: bool = True,
                 tag: str = "", repetitions: int | None = None, scheduler=None):
        """`runs`: only these (point id, repetition) pairs, in the study's order (default all).
        `resume`: the stored manifest of `run_dir`; the repetitions without rep.json run, the
        finished ones are kept. `analyze`: False leaves analysis to the caller (cluster nodes).
        `tag`: appended to server instance names and background log directories, so those of
        several executions gathered into one run directory never collide (cluster/).
        `repetitions`: every point's, instead of the spec's (the most `--until-decisive` may run).
        `scheduler`: `attach(study_run)` once, then `next_runs(study_run)` -> (point id, repetition)
        pairs after each batch, [] to end (congestlab/decisive/driver.py)."""
        self.study = study
        self.run_dir = Path(run_dir)
        self.quick = quick
        self.calibrate = calibrate
        self.console = console or Console(stderr=True)
        self.prefix = new_prefix()
        self.points: list[Point] = expand(study, quick)
        if repetitions is not None:
            for point in self.points:
                point.repetitions = repetitions
        self.scheduler = scheduler
        self.run_order = planned_runs(self.points, study.order, study.seed)  # every planned run, in order
        self.all_runs = [(r.point, r.repetition) for r in self.run_order]
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
        if runs is None:  # (a cluster node's subset leaves them to its driver, so the manifest has them once)
            self.checks += [fidelity.Check(f"link_shaped_{u.node}_{u.switch}", False, u.rate_bps,
                                           f"rate_bps below {u.limit_bps:g} (shaped)", u.message)
                            for u in unshaped_links(self.points)]
        self.manifest: dict = new_manifest(study, self.points, self.axes, len(self.runs), quick, preset, argv,
                                           self.prefix)
        # the planned order of the whole study (a cluster node's or resume's subset runs in it)
        self.manifest["run_order"] = [r.describe() for r in self.run_order]
        self.manifest["run_order_streaks"] = longest_streaks(self.all_runs)
        if study.order != "sequential":  # each experiment's passes: one visit per unit, or two mirrored
            self.manifest["run_passes"] = experiment_passes(self.points)
        self.cc = CongestionControls(self)
        self.servers = Servers(self)
        self.backgrounds = Backgrounds(self)
        self.temp_dirs: list[Path] = []
        # the BPF sampler serves every repetition: loading its programs once, not per repetition
        self.probe_sampler = ProbeSampler(self.run_dir / "logs" / "clprobe.log")
        self._last_point = ""
        self.budget = TimeBudget()  # where this session's time goes (runner/time_budget.py)
        self.previous_get: dict = {}  # the last measured GET's connection, across runs (workloads/get.py)
        self._resume_entry: dict | None = None
        if resume is not None:
            done = [(p, r) for p, r in self.runs if self.rep_complete(p.id, r)]
            self.runs = [(p, r) for p, r in self.runs if not self.rep_complete(p.id, r)]
            self.manifest, self._resume_entry, kept = continued_manifest(resume, self.manifest, self.run_dir, done,
                                                                         self.runs, argv, self.prefix)
            self.checks += kept
            self.servers.instances = sum(len(v) for v in self.manifest["servers"].values())
        if scheduler is not None:
            scheduler.attach(self)

    @property
    def resuming(self) -> bool:
        return self._resume_entry is not None

    def rep_complete(self, point_id: str, rep: int) -> bool:
        """rep.json is written last: a repetition with it completed."""
        return rep_complete(self.run_dir, point_id, rep)

    # ------------------------------------------------------------------------------
    def run(self) -> Path:
        require_root()
        self.budget = TimeBudget()
        start = self.budget.started
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        cpu0 = fidelity.read_cpu_jiffies()
        (self.run_dir / "points").mkdir(parents=True, exist_ok=True)
        for point, rep in self.runs:  # a repetition without rep.json did not complete: discarded
            shutil.rmtree(rep_dir(self.run_dir, point.id, rep), ignore_errors=True)
        write_manifest(self.run_dir, self.manifest)
        try:
            with sigterm_as_interrupt():
                if not self.runs and self.scheduler is not None:  # a resumed run whose round had finished
                    self.runs = self._next_batch()
                if self.runs:
                    self._run_testbed()
                if self.do_analyze:  # SIGTERM here too: the manifest then keeps the session's budget
                    with self.budget.phase(ANALYSIS):
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
        except OSError as err:
            if err.errno not in FULL_OR_READ_ONLY:
                self._fail("failed", f"{type(err).__name__}: {err}")
                raise
            # the run directory's file system took no more (full, read-only): said in one line
            reason = err.strerror + (f" ({err.filename})" if err.filename else "")
            self._fail("failed", reason)
            raise RunDirError(f"{self.run_dir}: run failed: {reason}; free space (or make it writable) and continue "
                              f"with --resume {self.run_dir}") from None
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
        self._record_budget(wall)
        self.manifest["fidelity"] = fidelity.manifest_section(self.checks)
        self.manifest["status"] = "complete"
        self.manifest["finished_utc"] = utc_now()
        if self._resume_entry is not None:
            self._resume_entry |= {"finished_utc": self.manifest["finished_utc"], "status": "complete",
                                   "wall_s": self.manifest["timing"]["wall_s"]}
        write_manifest(self.run_dir, self.manifest)
        return self.run_dir

    def _run_testbed(self) -> None:
        """One testbed for self.runs (built for the first point, reconfigured per run); torn down always."""
        setup0 = self.budget.clock()
        self.manifest["tools"] = self._tool_versions()
        first = self.points[0]  # as before; each run reconfigures the testbed to its point
        kernel_cc = self.cc.per_host(first.study)
        with Testbed(first.study.topology, prefix=self.prefix, kernel_cc=kernel_cc,
                     run_dir=str(self.run_dir)) as tb:
            try:
                self.manifest["testbed"] = tb.describe() | {
                    "setup_s": round(tb.setup_s, 3), "setup_commands": tb.executor.commands_run}
                check_reachability(tb, first)
                self.manifest["qdiscs"] = qdisc_config(tb)
                if self.calibrate:
                    self.manifest["calibration"] = self._calibrate(tb)
                self.budget.add(SETUP, self.budget.clock() - setup0)
                self._run_all(tb)
            finally:
                teardown0 = self.budget.clock()
                self.probe_sampler.close(tb)
                self.backgrounds.stop_all(self._last_point)
                self.servers.stop_all()
        self.manifest["testbed"]["teardown_s"] = round(tb.teardown_s, 3)
        self.manifest["testbed"]["link_emulation"] = tb.emulation  # with linkem's final counters
        self.cc.remove_installed()
        self._remove_temp_dirs()
        self.budget.add(TEARDOWN, self.budget.clock() - teardown0)

    def _fail(self, status: str, message: str) -> None:
        self._remove_temp_dirs()
        try:
            self.cc.remove_installed()
        except CongestlabError as err:
            message += f"; and removing the congestion controls it installed failed: {err}"
        self.manifest["status"] = status
        self.manifest["error"] = message
        if self._resume_entry is not None:
            self._resume_entry |= {"finished_utc": utc_now(), "status": status}
        self.manifest["fidelity"] = fidelity.manifest_section(self.checks)
        self._record_budget(time.monotonic() - self.budget.started)
        write_failed_manifest(self.run_dir, self.manifest, [rep_dir(self.run_dir, p.id, r) for p, r in self.runs])

    def finished(self, point_id: str, rep: int) -> None:
        """A repetition of this session wrote its rep.json: a resume's entry lists it as run
        (a killed attempt's entry names only those; cluster/driver.py as they arrive)."""
        if self._resume_entry is not None:
            self._resume_entry.setdefault("ran", []).append(f"{point_id}#{rep}")

    def _record_budget(self, wall_s: float) -> None:
        """The run's budget: the sum of its sessions' (a resumed run keeps every earlier
        session's in time_budget_sessions); this session's replaces its in-progress one."""
        record_session(self.manifest, self.budget.to_json(wall_s))

    def _remove_temp_dirs(self) -> None:
        for path in self.temp_dirs:
            shutil.rmtree(path, ignore_errors=True)
        self.temp_dirs = []

    # ------------------------------------------------------------------------------
    def _run_all(self, tb: Testbed) -> None:
        batch = self.runs
        while batch:
            self.runs = batch  # the runs to come: what Backgrounds.bound_s looks ahead in
            with run_progress(self.console, self.study.name, len(batch)) as (describe, advance):
                for point, rep in batch:
                    describe(f"{point.id} #{rep}")
                    with self.budget.unit_run(f"u{point.unit}"):
                        self._run_one(tb, point, rep)
                    self.finished(point.id, rep)
                    self.manifest["runs_done"] += 1
                    self.manifest[IN_PROGRESS] = self.budget.to_json()  # what a kill would otherwise lose
                    write_manifest(self.run_dir, self.manifest)
                    advance()
            if self.scheduler is None:
                break
            # a background's time bound reaches only to the end of its batch, and the look between
            # rounds may take longer than its margin: stop them; the next round starts them again
            # with their warm-up
            self.backgrounds.stop_all(self._last_point)
            batch = self._next_batch()

    def _next_batch(self) -> list[tuple[Point, int]]:
        """The scheduler's next runs not yet complete, in the study's order; recorded in the
        manifest before the first of them starts (a crash test may kill the run right there)."""
        wanted = {(str(pid), int(rep)) for pid, rep in self.scheduler.next_runs(self)}
        batch = [(p, r) for p, r in self.all_runs if (p.id, r) in wanted and not self.rep_complete(p.id, r)]
        self.manifest["runs_total"] = self.manifest.get("runs_total", 0) + len(batch)
        write_manifest(self.run_dir, self.manifest)
        if batch:
            pause_if_asked("between-rounds")
        return batch

    def _run_one(self, tb: Testbed, point: Point, rep: int) -> None:
        study = point.study
        kernel_cc = self.cc.per_host(study)
        changes = tb.reconfigure(study.topology, kernel_cc)
        if changes:
            self.manifest["reconfigurations"].append({"before": f"{point.id}#{rep}", "changes": changes})
        # before servers start: their ready check needs a quiet path
        unit = f"u{point.unit}"
        with self.budget.phase(SERVER_RESTART, unit):
            self.backgrounds.stop_stale(point, self.servers.restarting(point), self._last_point)
            self.servers.reconcile(tb, point, under_load=bool(self.backgrounds.running))
        running = self.servers.running
        ctx = Context(tb, self.run_dir, study,
                      self.servers.views(),
                      bound_s=self.backgrounds.bound_s(point, rep), point_id=point.id, previous_get=self.previous_get,
                      ca_file=str(self.servers.tls.ca) if self.servers.tls else None,
                      tls_spki=self.servers.tls.spki_sha256_b64() if self.servers.tls else None)
        started = self.backgrounds.reconcile(ctx, point, self.servers.started, self._last_point)
        self._last_point = point.id
        rep_path = rep_dir(self.run_dir, point.id, rep)
        if rep_path.exists():
            shutil.rmtree(rep_path)  # a repetition that did not complete before
        (rep_path / "logs").mkdir(parents=True)
        (rep_path / PCAP_DIR).mkdir()
        point_backgrounds: list[Background] = []
        captures = Captures()
        q0 = qdisc_snapshot(tb)
        linkem0 = tb.linkem_stats()
        cpu0 = fidelity.read_cpu_jiffies()
        info: dict = {"point": point.id, "repetition": rep, "started_utc": utc_now()}
        checks: list[fidelity.Check] = []
        try:
            if started:  # a long-lived background warms up before the capture: a 60 s warm-up
                with self.budget.phase(WARMUP, unit):  # of 100 Mbit/s would fill the first repetition's pcap
                    time.sleep(study.warmup_s)
            # the point's own servers: the others of its unit idle beside it (spec/sweep.py)
            captures = start_captures(tb, {n: s for n, s in running.items() if n in point.measured}, rep_path,
                                      study.capture, self.probe_sampler)
            started = False
            for name in point.workloads:
                spec = study.workload(name)
                if is_background(spec) and spec.lifetime == "point":
                    bg = runner_for(spec)(spec, ctx, rep_path / "logs")
                    point_backgrounds.append(bg)
                    bg.start()
                    started = True
            if started:
                with self.budget.phase(WARMUP, unit):
                    time.sleep(study.warmup_s)
            backgrounds = self.backgrounds.runners() + point_backgrounds
            measuring_bytes = measured_bytes(study, point)
            for bg in backgrounds:
                bg.open_window(measuring_bytes)
            measure0 = self.budget.clock()
            records, checks, window = measure_workloads(ctx, point, rep, rep_path, self.manifest["workloads"])
            self.budget.split_measure(self.budget.clock() - measure0, timed_out_seconds(records, window), unit)
            for bg in backgrounds:
                bg_records, bg_checks = bg.measure(window)
                records += bg_records
                checks += bg_checks
            info["window_epoch_s"] = list(window)
        finally:
            for bg in point_backgrounds:
                checks += bg.lifetime_checks()
                bg.stop()
            stop_captures(tb, captures, info)
        checks += probe_checks(info)
        info["cpu_busy_pct"] = round(fidelity.cpu_busy_pct(cpu0, fidelity.read_cpu_jiffies()), 1)
        info["qdiscs"] = {label: fidelity.qdisc_delta(q0.get(label, {}), now)
                          for label, now in qdisc_snapshot(tb).items()}
        info["bottleneck_drops"] = {label: sum(q["drops"] for q in qs.values() if q["kind"] in ("pfifo", "tbf"))
                                    for label, qs in info["qdiscs"].items()}
        # what the link emulator did during the repetition (e.g. the loss it realised)
        info["linkem"] = {label: {k: v - linkem0.get(label, {}).get(k, 0) for k, v in now.items()
                                  if isinstance(v, int) and k in ("received", "delayed", "dropped", "dropped_random",
                                                                  "dropped_held_cap", "kernel_user_dropped")}
                          for label, now in tb.linkem_stats().items()}
        info["servers"] = {name: s.record["instance"] for name, s in running.items()}
        info["checks"] = fidelity.checks_to_json(checks)
        info["finished_utc"] = utc_now()
        self.checks += [fidelity.Check(f"{c.name}@{point.id}#{rep}", c.ok, c.value, c.expected, c.message)
                        for c in checks]
        write_repetition(rep_path, info, records)
        self.servers.after_repetition(f"{point.id}#{rep}")

    # --- environment ------------------------------------------------------------------
    def _tool_versions(self) -> dict:
        versions = {"tcpdump": tcpdump_version(), "curl": curl_version(),
                    "iproute2": run_argv(["ip", "-V"]).stdout.strip()}
        return versions | tool_versions([w for p in self.points for w in p.study.workloads if w.name in p.workloads])

    def _calibrate(self, tb: Testbed) -> dict:
        """One iperf3 flow per family across the bottleneck, 5 s each."""
        if self.study.calibrate is None:
            raise SpecError("calibrate", "this spec names no (sender, receiver) pair for --calibrate")
        sender, receiver = self.study.calibrate
        log_dir = self.run_dir / "logs"
        log_dir.mkdir(exist_ok=True)
        return calibrate_bottleneck(tb, sender, receiver, log_dir)

    # ------------------------------------------------------------------------------
    def _analyze(self) -> None:
        self.checks += record_analysis(self.run_dir, self.manifest).checks
