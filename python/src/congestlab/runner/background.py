"""The long-lived background loads of a run (lifetime "block"): kept while the points that
follow want the same load, restarted when it changes or its server restarts, and bounded in
time so a background stops by itself even if the harness dies."""

from __future__ import annotations

from congestlab import fidelity
from congestlab.spec.sweep import Point, block_backgrounds
from congestlab.workloads import is_background, runner_for
from congestlab.workloads.base import Background, Context

# a background process stops by itself this long after it starts, whatever happens to us
BACKGROUND_MARGIN_S = 120.0


class Backgrounds:
    """name -> (resolved spec, runner) of the long-lived backgrounds running now."""

    def __init__(self, run):
        self.run = run  # the StudyRun: run directory, manifest, checks, runs, tag, resumes
        self.running: dict[str, tuple[object, Background]] = {}

    def runners(self) -> list[Background]:
        return [bg for _, bg in self.running.values()]

    def reconcile(self, ctx: Context, point: Point, servers_started: set[str], last_point: str) -> bool:
        """Long-lived backgrounds of the point: kept while unchanged, else restarted.
        True when one started (the caller waits the warm-up)."""
        run = self.run
        study = point.study
        want = {}
        for name in point.workloads:
            spec = study.workload(name)
            if is_background(spec) and spec.lifetime == "block":
                want[name] = spec
        for name in list(self.running):
            # a load whose server was just (re)started begins again too, with its warm-up
            if name not in want or self.running[name][0] != want[name] \
                    or getattr(want[name], "server", None) in servers_started:
                self.stop(name, last_point)
        started = False
        for name, spec in want.items():
            if name in self.running:
                continue
            # a resume starts the unit's background again: its own log directory
            resumed = f"-resume{len(run.manifest['resumes'])}" if run.resuming else ""
            log_dir = run.run_dir / "logs" / "background" / f"{name}-u{point.unit}{run.tag}{resumed}"
            runner = runner_for(spec)(spec, ctx, log_dir)
            self.running[name] = (spec, runner)
            runner.start()
            run.manifest["workloads"].setdefault(name, {"kind": spec.kind, "instances": []})["instances"].append(
                {"first_point": point.id, "log_dir": str(log_dir.relative_to(run.run_dir))} | runner.describe())
            started = True
        return started

    def stop_stale(self, point: Point, restarting: set[str], last_point: str) -> None:
        """Stop the long-lived backgrounds this point will not keep: gone, changed, or aimed
        at a server about to restart. A new server's ready check (a whole file within 5 s)
        then does not compete with loads that are about to stop anyway."""
        study = point.study
        for name in list(self.running):
            spec = study.workload(name) if name in point.workloads else None
            if spec is None or self.running[name][0] != spec or getattr(spec, "server", None) in restarting:
                self.stop(name, last_point)

    def stop(self, name: str, point_id: str = "") -> None:
        run = self.run
        spec, runner = self.running.pop(name)
        try:
            checks = runner.lifetime_checks()
        finally:
            runner.stop()
        instance = run.manifest["workloads"][name]["instances"][-1]
        where = instance["first_point"] + (f" to {point_id}" if point_id and point_id != instance["first_point"] else "")
        run.checks += [fidelity.Check(f"{c.name}@{instance['first_point']}", c.ok, c.value, c.expected,
                                      f"{where}: {c.message}" if c.message else "") for c in checks]
        instance["checks"] = fidelity.checks_to_json(checks)

    def stop_all(self, last_point: str) -> None:
        for name in list(self.running):
            try:
                self.stop(name, last_point)
            except Exception:  # noqa: BLE001 - the testbed's teardown kills what is left
                pass

    def bound_s(self, point: Point, rep: int) -> float:
        """How long a long-lived background started now may run: every run from this one on
        that could keep one of them (the same workload with the same settings, one run after
        another: its unit, and the next units while it stays unchanged, even when the other
        backgrounds change, e.g. the same MGEN rate under new HTTP loads), all of them, at most."""
        runs = self.run.runs
        kept = block_backgrounds(point)
        first = runs.index((point, rep))
        total = BACKGROUND_MARGIN_S
        for later, _ in runs[first:]:
            there = block_backgrounds(later)
            kept = {name: spec for name, spec in kept.items() if there.get(name) == spec}
            if not kept:
                break
            total += run_bound_s(later)
        return total


def run_bound_s(point: Point) -> float:
    """How long one run of the point may take at most."""
    study = point.study
    per_run = study.warmup_s + study.gap_s + 10
    for name in point.workloads:
        spec = study.workload(name)
        if not is_background(spec):
            per_run += runner_for(spec).time_bound_s(spec, study)
        else:
            per_run += getattr(spec, "duration_s", 0)
    return per_run
