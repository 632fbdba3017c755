"""`congestlab simulate SPEC [--compare]`: the spec's points in leansim, then (with --compare)
the same spec in netns through the one way to run a study (study.py), and the gap per metric as sim ÷ emulation."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Console

from congestlab.results import read_results
from congestlab.rundir import prepare_out_dir
from congestlab.runner import require_root
from congestlab.simulate.sim_vs_emulation import compare_rows, conditions, failed_checks, write_comparison
from congestlab.simulate.mapping import sim_points
from congestlab.simulate.simrun import simulate
from congestlab.study import run_study


def _summary(rows: list[dict]) -> str:
    lines = ["point family: delay_ms nrt_throughput_mbps goodput_mbps retransmissions (mean over ok GETs)"]
    for key in dict.fromkeys((r["point_id"], r["family"]) for r in rows):
        ok = [r for r in rows if (r["point_id"], r["family"]) == key and r["ok"]]
        if not ok:
            lines.append(f"{key[0]} {key[1]}: no finished GET")
            continue
        mean = {m: sum(float(r[m]) for r in ok) / len(ok) for m in
                ("delay_ms", "nrt_throughput_mbps", "goodput_mbps", "retransmissions")}
        lines.append(f"{key[0]} {key[1]}: {mean['delay_ms']:.2f} {mean['nrt_throughput_mbps']:.2f} "
                     f"{mean['goodput_mbps']:.2f} {mean['retransmissions']:.1f}  (n={len(ok)}/"
                     f"{sum(1 for r in rows if (r['point_id'], r['family']) == key)})")
    return "\n".join(lines)


def run_simulate(spec, quick: bool, compare: bool, out: Path | None, repetitions: int | None, seed: int) -> Path:
    points = sim_points(spec, quick)  # refuses what it cannot model before anything runs
    if compare:
        require_root()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    if out is None:  # the default's folder runs/ is made; an --out's folder must exist (rundir/out_paths.py)
        out = Path("runs") / f"sim-{spec.name}-{stamp}"
        out.parent.mkdir(exist_ok=True)
    out_dir = prepare_out_dir(out)
    started = time.monotonic()
    sim_rows, outcomes = simulate(points, out_dir, repetitions, seed)
    sim_wall_s = time.monotonic() - started
    print(_summary(sim_rows))
    print(f"simulation: {len(sim_rows)} GETs in {sim_wall_s:.1f} s wall; rows in {out_dir / 'sim/results/request.csv'}")
    if not compare:
        return out_dir
    if repetitions is not None:
        spec = spec.model_copy(update={"repetitions": repetitions})
        if quick:
            spec = spec.model_copy(update={"quick": spec.quick.model_copy(update={"repetitions": repetitions})})
    emu_dir = out_dir / "emulation"
    started = time.monotonic()
    run_study(spec, quick, out=emu_dir, console=Console(quiet=True))  # (its place is said below)
    emu_wall_s = time.monotonic() - started
    rows = compare_rows(sim_rows, read_results(emu_dir, "request"))
    title = f"{spec.name}: simulation ÷ emulation"
    print(write_comparison(out_dir, rows, title, conditions(outcomes, emu_dir), failed_checks(emu_dir)))
    (out_dir / "timing.json").write_text(json.dumps({"sim_wall_s": sim_wall_s, "emulation_wall_s": emu_wall_s}))
    print(f"simulation {sim_wall_s:.1f} s, emulation {emu_wall_s:.1f} s wall; {out_dir / 'comparison.md'}")
    return out_dir
