"""`congestlab sensitivity PRESET --axis ...`: one ordinary run directory per configuration
under one parent, each run by the one way to run a study (study.run_children: local or --cluster), so every
configuration has its own full report and `--resume`. The parent's `sensitivity.json` names
the preset, the axes and the configurations; run again with `--out PARENT` to continue:
complete configurations are kept, an interrupted one is resumed, the rest run.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from congestlab.errors import RunDirError
from congestlab.report import build_report
from congestlab.report.terminal import print_report
from congestlab.rundir import new_out_dir, read_json_file
from congestlab.sensitivity.configurations import Configuration, apply_configuration, configurations
from congestlab.spec import load_preset, load_spec
from congestlab.spec.models import AxisSpec, StudySpec
from congestlab.spec.sweep import expand
from congestlab.study import Child, run_children, write_parent_state
from congestlab.testbed import new_prefix

STATE = "sensitivity.json"
FORMAT = 1


@dataclass
class SensitivitySweep:
    """The configurations of a sensitivity run: the preset with each combination of the axes' values set."""

    preset: str
    quick: bool
    axes: list[AxisSpec]
    configs: list[Configuration]
    specs: dict[str, StudySpec]  # configuration id -> the preset with its fields set

    def state(self) -> dict:
        return {"format": FORMAT, "preset": self.preset, "quick": self.quick,
                "axes": [a.model_dump(mode="json", exclude_defaults=True) for a in self.axes],
                "configurations": [c.describe() for c in self.configs]}


def sensitivity_sweep(preset: str, axes: list[AxisSpec], quick: bool) -> SensitivitySweep:
    """Every configuration checked (field paths, values, the points of its sweep) before
    anything runs: a bad one is one SpecError line."""
    if not axes:
        raise RunDirError("sensitivity needs at least one --axis or --axes file")
    if preset.endswith(".toml"):  # a spec file: stored absolute, so the sweep continues from anywhere
        preset = str(Path(preset).absolute())
    study = load_spec(Path(preset)) if preset.endswith(".toml") else load_preset(preset)
    configs = configurations(axes)
    specs = {c.id: apply_configuration(study, c, f"preset {preset}") for c in configs}
    return SensitivitySweep(preset, quick, axes, configs, specs)


def config_dir(parent: Path, config: Configuration) -> Path:
    return parent / "configs" / config.id


def _open_parent(out: Path | None, sweep: SensitivitySweep) -> Path:
    if out is None:
        parent = Path("runs") / f"sensitivity-{Path(sweep.preset).stem}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{new_prefix()}"
        parent = parent.absolute()
        parent.mkdir(parents=True)
    else:
        parent = Path(out).absolute()
        if parent.is_symlink() or not (parent / STATE).exists():  # (a sweep's own parent is continued)
            parent = new_out_dir(parent)  # new or empty, no link, its folder there (rundir/out_paths.py)
    state_path = parent / STATE
    if state_path.exists():
        stored = read_json_file(state_path)
        if not isinstance(stored, dict) or ({k: stored.get(k) for k in ("preset", "quick", "axes")}
                                             != {k: sweep.state()[k] for k in ("preset", "quick", "axes")}):
            raise RunDirError(f"{parent}: holds a sensitivity run of other axes, preset or --quick; choose a new --out")
        return parent
    state = sweep.state() | {"started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": {}}
    write_parent_state(state_path, state)
    return parent


def _record(parent: Path, config_id: str, entry: dict) -> None:
    state_path = parent / STATE
    state = json.loads(state_path.read_text())
    state.setdefault("runs", {})[config_id] = entry
    write_parent_state(state_path, state)


def run_sensitivity(sweep: SensitivitySweep, out: Path | None, calibrate: bool = False, cluster: str | None = None,
                    echo=print) -> Path:
    """Run every configuration not yet complete (study.run_children); a configuration that
    fails is recorded and the sweep goes on (its report says so); Ctrl-C/SIGTERM stop the sweep."""
    parent = _open_parent(out, sweep)
    echo(f"sensitivity run: {parent} ({len(sweep.configs)} configurations)")
    children = []
    for config in sweep.configs:
        run_dir = config_dir(parent, config)
        children.append(Child(config.id, sweep.specs[config.id], run_dir, {"dir": str(run_dir.relative_to(parent))}))
    run_children(children, sweep.quick, calibrate, cluster, report=_report,
                 record=lambda key, entry: _record(parent, key, entry), echo=echo)
    return parent


def _report(run_dir: Path, console: Console) -> None:
    print_report(build_report(run_dir), console)


def dry_run(sweep: SensitivitySweep, echo=print) -> None:
    for config in sweep.configs:
        points = expand(sweep.specs[config.id], sweep.quick)
        reps = sum(pt.repetitions for pt in points)
        sets = ", ".join(f"{k} = {v!r}" for k, v in config.settings.items())
        echo(f"[configuration] {config.id}: {len(points)} points, {reps} repetitions; sets {sets}")
    echo(f"# {len(sweep.configs)} configurations of {sweep.preset}{' (--quick)' if sweep.quick else ''}")
