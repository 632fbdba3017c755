"""Run the sweep points in leansim and measure its captures with the analysis of a real
run (analysis/trace.py): one row per measured GET, the columns of results/request.csv."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from congestlab.analysis.trace import measure_pcap
from congestlab.errors import SpecError, ToolError
from congestlab.paths import rust_binary
from congestlab.results import write_results
from congestlab.servers.files import write_files
from congestlab.simulate.mapping import SimPoint
from congestlab.stats.outcomes import COMPLETE, INVALID, TIMED_OUT

LEANSIM_TIMEOUT_S = 600
METRIC_COLUMNS = ["delay_ms", "syn_to_last_ack_ms", "nrt_throughput_mbps", "captured_throughput_mbps",
                  "goodput_mbps", "retransmissions", "bytes_nrt", "bytes_captured", "payload_bytes"]


def run_leansim(scenario: dict, scenario_path: Path, pcap_path: Path) -> dict:
    """One leansim run; its outcome (links' drops, GET times, server counters)."""
    scenario_path.write_text(json.dumps(scenario, indent=1))
    argv = [str(rust_binary("leansim")), str(scenario_path), "--pcap", str(pcap_path)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=LEANSIM_TIMEOUT_S)
    if proc.returncode == 2:
        # a knob leanweb's own parser refuses: the spec's mistake
        raise SpecError(str(scenario_path), proc.stderr.strip().removeprefix("leansim: "))
    if proc.returncode != 0:
        raise ToolError(argv, proc.returncode, proc.stderr)
    return json.loads(proc.stdout)


def _rows(sp: SimPoint, repetition: int, outcome: dict, pcap: Path) -> list[dict]:
    measured = measure_pcap(pcap, sp.scenario["port"]).by_key()
    epoch_s = outcome["pcap_epoch_us"] / 1e6
    rows = []
    for (family, kib), get in zip(sp.gets, outcome["gets"]):
        row = {"point_id": sp.point_id, "experiment": sp.experiment, **sp.labels, "repetition": repetition,
               "server": sp.server, "client": sp.client, "family": family, "file_kib": kib,
               "client_port": get["client_port"], "start_ts": epoch_s + (get["start_us"] or 0) / 1e6}
        conns = measured.get((family, get["client_port"]), [])
        metrics = conns[-1].metrics if conns else None
        if not get["ok"] or metrics is None:
            error = "not finished in the simulated time" if not get["ok"] else (
                conns[-1].error if conns else "no connection in the capture")
            rows.append({**row, "ok": False, "error": error,
                         "outcome": TIMED_OUT if not get["ok"] else INVALID})  # analysis/request_outcome.py
            continue
        rows.append({**row, "ok": True, "outcome": COMPLETE, "error": "",
                     **{c: getattr(metrics, c) for c in METRIC_COLUMNS},
                     "rtt_mean_ms": metrics.rtt_mean_ms, "rtt_samples": len(metrics.rtt_samples_ms)})
    return rows


def simulate(points: list[SimPoint], out_dir: Path, repetitions: int | None = None, seed: int = 1,
             progress=print) -> tuple[list[dict], list[dict]]:
    """Every point x repetition in leansim under `out_dir/sim/`; (request rows, outcomes).
    Repetitions differ in the seed (random loss, initial sequence numbers)."""
    sim_dir = out_dir / "sim"
    docroot = sim_dir / "docroot"
    write_files(docroot, sorted({kib for sp in points for kib in sp.file_kibs}))
    rows: list[dict] = []
    outcomes: list[dict] = []
    for sp in points:
        for rep in range(1, (repetitions or sp.repetitions) + 1):
            scenario = dict(sp.scenario, root=str(docroot.absolute()), seed=seed * 1_000_003 + rep)
            stem = f"{sp.point_id}-{rep}"  # point ids may hold dots (axis labels such as 0.01)
            pcap = sim_dir / f"{stem}.pcap"
            started = time.monotonic()
            outcome = run_leansim(scenario, sim_dir / f"{stem}.json", pcap)
            outcome.update(point_id=sp.point_id, repetition=rep)
            (sim_dir / f"{stem}.outcome.json").write_text(json.dumps(outcome, indent=1))
            outcomes.append(outcome)
            rows += _rows(sp, rep, outcome, pcap)
            progress(f"sim {sp.point_id} #{rep}: {outcome['virtual_us'] / 1e6:.3f} s simulated in "
                     f"{time.monotonic() - started:.2f} s, bottleneck drops {outcome['data_link']['dropped_queue']} "
                     f"(queue) + {outcome['data_link']['dropped_loss']} (loss)")
    axes = list(dict.fromkeys(a for sp in points for a in sp.labels))
    write_results(sim_dir, "request", axes, rows)
    return rows, outcomes
