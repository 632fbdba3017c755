"""The head of a cluster run: the study's units of points as Ray tasks, one testbed per
node, gathered into the one run directory (docs/cluster.md).

Each unit (points sharing servers and long-lived background; spec/sweep.py) is one task
that needs the custom resource `congestlab_testbed: 1`; every node advertises exactly one,
so a node runs one unit at a time. Ray's own retries are off (max_retries=0): a task that
fails or whose worker dies is submitted again explicitly, once, with the repetitions still
missing, and the manifest records it. The head builds no testbed: it writes what the nodes
stream back (cluster/node.py) into the run directory, then analysis runs as for a local run.
"""

from __future__ import annotations

import gc
import json
import shutil
import tarfile
import threading
import time
from pathlib import Path

import ray

from congestlab import fidelity
from congestlab.cluster.node import CHUNK_BYTES, run_unit
from congestlab.cluster.submit_order import submission_order
from congestlab.errors import ClusterError, Interrupted
from congestlab.rundir import utc_now, write_manifest
from congestlab.runner import StudyRun
from congestlab.runner.time_budget import ANALYSIS
from congestlab.runner.time_budget import merge as merge_budgets

RESOURCE = "congestlab_testbed"
ATTEMPTS = 2  # the first, and one explicit re-submission


class ClusterRun:
    def __init__(self, study_run: StudyRun, address: str, calibrate: bool = False, console=None,
                 previous_s: dict[str, float] | None = None, previous_run: str | None = None):
        self.head = study_run
        self.previous_s = previous_s  # a previous run's task times: submit longest first (cluster/submit_order.py)
        self.previous_run = previous_run
        self.submitted: dict[str, threading.Event] = {}  # set once a task is submitted (or will not be)
        self.after: dict[str, threading.Event] = {}  # the event of the task submitted just before
        self.address = address
        self.calibrate = calibrate
        self.console = console
        self.lock = threading.RLock()  # also guards the manifest's task records while it is written
        self.active: dict[int, object] = {}
        self.stopping = threading.Event()
        self.errors: list[str] = []
        session = len(study_run.manifest.get("resumes", []))
        self.session = session
        self.record = study_run.manifest.setdefault("cluster", {"address": address, "resource": RESOURCE,
                                                             "placement": study_run.study.placement, "nodes": {},
                                                             "runs": {},
                                                             "tasks": []})
        self.record["address"] = address
        self.record["placement"] = study_run.study.placement

    # ------------------------------------------------------------------------------
    def run(self) -> Path:
        head = self.head
        manifest = head.manifest
        start = time.monotonic()
        write_manifest(head.run_dir, manifest)
        # one task per unit ("unit": a cell's repetitions on one node), or per repetition round
        # of a unit ("repetition": a cell's repetitions spread over the nodes)
        units: dict[str, list[tuple[str, int]]] = {}
        for point, rep in head.runs:
            key = f"u{point.unit}" + (f"r{rep}" if head.study.placement == "repetition" else "")
            units.setdefault(key, []).append((point.id, rep))
        # longest first, one after another: Ray starts tasks waiting for a testbed in about the
        # order they were submitted, so the longest do not start last
        order = submission_order(units, self.previous_s)
        self.record["submission"] = {
            "by": f"unit times of {self.previous_run}" if self.previous_s else "planned repetitions",
            "order": [{"task": o.task, "estimate": round(o.estimate, 3), "basis": o.basis} for o in order]}
        units = {o.task: units[o.task] for o in order}
        self.submitted = {unit: threading.Event() for unit in units}
        keys = list(units)
        self.after = {keys[i]: self.submitted[keys[i - 1]] for i in range(1, len(keys))}
        interrupted = False
        try:
            ray.init(address=self.address, log_to_driver=False, logging_level="ERROR")
        except Exception as err:  # noqa: BLE001 - Ray's own connection errors, in one line
            self._finish("failed", f"cannot join the Ray cluster at {self.address}: {_one_line(err)}")
            raise ClusterError(f"cannot join the Ray cluster at {self.address}: {_one_line(err)}") from None
        try:
            slots = ray.cluster_resources().get(RESOURCE, 0)
            if units and slots < 1:
                raise ClusterError(f"no node of the cluster at {self.address} advertises the resource {RESOURCE} "
                                   f"(ray start … --resources '{{\"{RESOURCE}\": 1}}')")
            self.record["testbed_slots"] = int(slots)
            self.task = ray.remote(run_unit).options(resources={RESOURCE: 1}, num_cpus=0, max_retries=0,
                                                     retry_exceptions=False, num_returns="streaming")
            # Each unit's thread sets its event when it ends, and this thread waits on the
            # events, not with Thread.join: a KeyboardInterrupt inside Thread.join marks the
            # joined thread as ended while it still runs (CPython before 3.13,
            # threading._wait_for_tstate_lock), so after a Ctrl-C the driver stopped waiting
            # for that unit and exited while its node was still tearing down; the job's end
            # then killed the node's worker, leaving its testbed and owner record.
            ended = {unit: threading.Event() for unit in units}
            threads = [threading.Thread(target=self._unit, args=(unit, runs, ended[unit]), daemon=True)
                       for unit, runs in units.items()]
            try:
                for t in threads:
                    t.start()
                for event in ended.values():
                    while not event.wait(0.2):  # in slices, so Ctrl-C reaches this thread
                        pass
            except KeyboardInterrupt:
                self._cancel(list(ended.values()))
                raise Interrupted("interrupted by Ctrl-C; cluster tasks cancelled, each node tore its testbed "
                                  "down; resume with --resume") from None
        except Interrupted as err:
            self._finish("interrupted", str(err))
            interrupted = True
            raise
        except ClusterError as err:
            self._finish("failed", str(err))
            raise
        except Exception as err:
            self._finish("failed", f"{type(err).__name__}: {err}")
            raise
        finally:
            with self.lock:
                self.active.clear()  # no task reference may outlive the shutdown
            gc.collect()
            # interrupted: the tasks are cancelled and the process ends at once
            # (study._run_on_cluster); ray.shutdown() here raced the cancelled tasks' threads
            # and Ray's core worker aborted the process with status 1
            if not interrupted:
                ray.shutdown()
        missing = [f"{p.id}#{r}" for p, r in head.all_runs if not head.rep_complete(p.id, r)]
        if missing:
            message = (f"{len(missing)} repetitions missing after retries ({'; '.join(self.errors[:2])}); "
                       f"continue with --resume {head.run_dir}")
            self._finish("failed", message)
            raise ClusterError(message)
        analysis0 = time.monotonic()
        head._analyze()
        analysis_s = time.monotonic() - analysis0
        self._flag_mixed_nodes()
        manifest["timing"] = {"wall_s": round(time.monotonic() - start, 2)}
        # the nodes' budgets summed (node-seconds, may exceed the wall time) and the head's analysis
        budget = merge_budgets(t["time_budget"] for t in self.record["tasks"] if t.get("time_budget"))
        budget["categories_s"][ANALYSIS] = round(budget["categories_s"].get(ANALYSIS, 0.0) + analysis_s, 3)
        manifest["time_budget"] = budget | {"node_seconds_s": budget["wall_s"], "wall_s": manifest["timing"]["wall_s"]}
        manifest["fidelity"] = fidelity.manifest_section(head.checks)
        self._finish("complete", None)
        return head.run_dir

    def _finish(self, status: str, error: str | None) -> None:
        manifest = self.head.manifest
        with self.lock:
            manifest["status"] = status
            if error:
                manifest["error"] = error
                manifest["fidelity"] = fidelity.manifest_section(self.head.checks)
            manifest["finished_utc"] = utc_now()
            entry = self.head._resume_entry
            if entry is not None:
                entry |= {"finished_utc": manifest["finished_utc"], "status": status}
            write_manifest(self.head.run_dir, manifest)

    def _cancel(self, ended: list[threading.Event]) -> None:
        self.stopping.set()
        with self.lock:
            gens = list(self.active.values())
        for gen in gens:
            try:
                ray.cancel(gen)  # KeyboardInterrupt in the task: its StudyRun tears the testbed down
            except Exception:  # noqa: BLE001 - a task that already ended
                pass
        deadline = time.monotonic() + 60  # each node's StudyRun tears its testbed down meanwhile
        for event in ended:
            event.wait(max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------------------------
    def _unit(self, unit: str, runs: list[tuple[str, int]], ended: threading.Event) -> None:
        try:
            self._attempts(unit, runs)
        finally:
            self.submitted[unit].set()
            ended.set()

    def _attempts(self, unit: str, runs: list[tuple[str, int]]) -> None:
        head = self.head
        for attempt in range(1, ATTEMPTS + 1):
            todo = [(p, r) for p, r in runs if not head.rep_complete(p, r)]
            if not todo or self.stopping.is_set():
                return
            previous = self.after.get(unit) if attempt == 1 else None
            while previous is not None and not previous.wait(0.2):  # its turn in the submission order
                if self.stopping.is_set():
                    return
            tag = f"-s{self.session}{unit}a{attempt}"
            task = {"unit": unit, "attempt": attempt, "runs": [f"{p}#{r}" for p, r in todo],
                    "submitted_utc": utc_now(), "submitted_epoch_s": round(time.time(), 3)}
            with self.lock:
                self.record["tasks"].append(task)
            gen = self.task.remote(head.study, head.quick, todo, tag, self.calibrate)
            self.submitted[unit].set()
            with self.lock:
                self.active[unit] = gen
            try:
                error = self._receive(gen, unit, attempt, task)
            except Exception as err:  # noqa: BLE001 - a killed worker, a dead node, a cancelled task
                error = _one_line(err)
            finally:
                with self.lock:
                    self.active.pop(unit, None)
            with self.lock:
                task["finished_utc"] = utc_now()
                task["finished_epoch_s"] = round(time.time(), 3)
                task["error"] = error
                if error:
                    self.errors.append(f"unit {unit} attempt {attempt}: {error}")
                write_manifest(head.run_dir, head.manifest)
            if not error:
                return

    def _receive(self, gen, unit: str, attempt: int, task: dict) -> str | None:
        head = self.head
        first = ray.get(next(gen))
        node = first["node"]
        with self.lock:
            task["node"] = node_key(node)
            task["cleaned"] = node.get("cleaned_namespaces", [])  # a dead task's leftovers, removed first
        incoming = head.run_dir / f".incoming-{unit}a{attempt}.tar"
        size = chunks = 0
        try:
            with open(incoming, "wb") as fh:
                for ref in gen:
                    chunk = ray.get(ref)
                    fh.write(chunk)
                    size += len(chunk)
                    chunks += 1
            with self.lock:
                task |= {"bytes": size, "chunks": chunks, "chunk_bytes": CHUNK_BYTES,
                         "node_wall_s": first["manifest"].get("timing", {}).get("wall_s"),
                         "time_budget": first["manifest"].get("time_budget")}
                self._gather(incoming, first, node, task)
        finally:
            incoming.unlink(missing_ok=True)
        return first["error"]

    def _gather(self, incoming: Path, first: dict, node: dict, task: dict) -> None:
        """Write a node's repetitions and logs into the run directory; merge its manifest."""
        head = self.head
        run_dir = head.run_dir
        with tarfile.open(incoming) as tar:
            members = tar.getmembers()
            reps = sorted({tuple(m.name.split("/")[1:3]) for m in members
                           if m.name.startswith("points/") and m.name.count("/") >= 2})
            for point_id, rep in reps:  # a repetition is replaced whole, never merged
                shutil.rmtree(run_dir / "points" / point_id / rep, ignore_errors=True)
            _extract_inside(tar, members, run_dir)
        key = node_key(node)
        self.record["nodes"][key] = node
        node_manifest = first["manifest"]
        came = []
        for point_id, rep in reps:
            if head.rep_complete(point_id, int(rep[1:])):
                came.append(f"{point_id}#{rep[1:]}")
                head.finished(point_id, int(rep[1:]))
                self.record["runs"][f"{point_id}#{rep[1:]}"] = key
            else:  # partial on the node: not kept
                shutil.rmtree(run_dir / "points" / point_id / rep, ignore_errors=True)
        task["completed"] = came
        manifest = head.manifest
        manifest["runs_done"] = sum(1 for p, r in head.all_runs if head.rep_complete(p.id, r))
        for name, instances in node_manifest.get("servers", {}).items():
            manifest["servers"].setdefault(name, []).extend(instances)
        for name, record in node_manifest.get("workloads", {}).items():
            mine = manifest["workloads"].setdefault(name, {k: v for k, v in record.items() if k != "instances"})
            if "instances" in record:
                mine.setdefault("instances", []).extend(i | {"node": key} for i in record["instances"])
        manifest["reconfigurations"] += [r | {"node": key} for r in node_manifest.get("reconfigurations", [])]
        for k in ("tools", "congestion_control", "qdiscs"):
            if k in node_manifest:
                manifest.setdefault(k, node_manifest[k])
        if "prefix" in node_manifest.get("testbed", {}):
            manifest["testbed"] = node_manifest["testbed"] | {"built_on": key}
        # a node's per-run summaries are folded again over the whole run from its repetitions' rows
        node_fidelity = node_manifest.get("fidelity", {})
        head.checks += [c for c in fidelity.checks_from_json(node_fidelity.get("checks", []))
                        if c.name not in fidelity.PER_RUN_SUMMARIES]
        head.checks += fidelity.checks_from_json(node_fidelity.get("per_repetition", []))
        write_manifest(run_dir, manifest)

    def _flag_mixed_nodes(self) -> None:
        """A point whose repetitions ran on nodes with different calibrations gets a warning."""
        by_point: dict[str, set[str]] = {}
        for run, key in self.record["runs"].items():
            by_point.setdefault(run.rsplit("#", 1)[0], set()).add(key)
        self.record["points"] = {p: sorted(keys) for p, keys in sorted(by_point.items())}
        for point, keys in by_point.items():
            calibrations = {json.dumps(self.record["nodes"][k].get("calibration"), sort_keys=True) for k in keys}
            if len(calibrations) > 1:
                self.head.checks.append(fidelity.Check(f"one_calibration@{point}", False, len(calibrations), "1",
                                                       f"{point}: repetitions ran on nodes with different "
                                                       f"calibrations ({', '.join(sorted(keys))})"))


def _one_line(err: Exception) -> str:
    """The cause of a task's failure in one line (a RayTaskError wraps the node's exception)."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        err = cause
    lines = [ln for ln in str(err).strip().splitlines() if ln.strip()]
    return f"{type(err).__name__}: {lines[-1].strip() if lines else ''}"[:300]


def node_key(node: dict) -> str:
    return f"{node['hostname']}/{(node.get('node_id') or '')[:12]}"


def run_on_cluster(study_run: StudyRun, address: str, calibrate: bool = False,
                   previous_s: dict[str, float] | None = None, previous_run: str | None = None) -> Path:
    return ClusterRun(study_run, address, calibrate, previous_s=previous_s, previous_run=previous_run).run()


def _extract_inside(tar: tarfile.TarFile, members: list[tarfile.TarInfo], run_dir: Path) -> None:
    """A node's archive unpacked into the run directory and nowhere else: tarfile's "data"
    filter where the Python has it (3.11.4 on), else the same refusal of what would leave it
    (Debian 12's Python 3.11.2, the interpreter mk/readable-python.sh may choose)."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(run_dir, members, filter="data")
        return
    root = run_dir.resolve()
    for member in members:
        target = (root / member.name).resolve()
        link = (target.parent / member.linkname).resolve() if member.issym() else root
        if (not (member.isfile() or member.isdir() or member.issym()) or not target.is_relative_to(root)
                or not link.is_relative_to(root)):
            raise ClusterError(f"a node's archive holds {member.name!r}, which would land outside {run_dir} "
                               "or is not a file, directory or link")
    tar.extractall(run_dir, members)
