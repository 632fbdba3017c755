"""A repetition's measuring workloads, all at once (a thread each), and the bytes they may
move (what a background yields to them in a window)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from congestlab.spec.models import StudySpec
from congestlab.spec.sweep import Point
from congestlab.workloads import is_background, runner_for
from congestlab.workloads.base import Context


def measure_workloads(ctx: Context, point: Point, rep: int, rep_path: Path, workloads: dict):
    """The measuring workloads of the point, all at once; with none, the background
    runs for its declared duration (the window). `workloads`: the manifest's, which gets each
    workload's kind and first commands the first time it runs."""
    study = point.study
    measuring = [study.workload(n) for n in point.workloads if not is_background(study.workload(n))]
    t0 = time.time()
    if not measuring:
        hold_s = max((getattr(study.workload(n), "duration_s", 0) for n in point.workloads), default=0)
        time.sleep(max(hold_s, 1.0))
        return [], [], (t0, time.time())
    runners = [runner_for(spec)(spec, ctx, rep_path / "logs") for spec in measuring]
    results: list = [None] * len(runners)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            results[i] = runners[i].run(rep)
        except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
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
        workloads.setdefault(spec.name, {"kind": spec.kind, "argv": r.argvs[:4]})
    records = [rec for res in results for rec in res[0]]
    checks = [c for res in results for c in res[1]]
    return records, checks, (t0, t1)


def measured_bytes(study: StudySpec, point: Point) -> float | None:
    """The most bytes the point's measuring workloads move in one repetition (None: one of
    them cannot say): bounds what a background yields to them in a window."""
    total = 0.0
    for name in point.workloads:
        spec = study.workload(name)
        if is_background(spec):
            continue
        size = runner_for(spec).bytes_per_run(spec)
        if size is None:
            return None
        total += size
    return total
