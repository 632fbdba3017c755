"""What the BPF samplers cost, from a run of examples/probe-cost.toml (docs/probes.md):
the measured GETs' median delay per arm (probes off / on, interleaved), the sampler's CPU
(its BPF programs' run time, held on by [capture] probe_bpf_stats, plus its own user-space
time) as a share of one core, and the recorded bytes per repetition.

The run's sampler serves all its repetitions (runner/captures.py ProbeSampler), so CPU is
given two ways: per recording (its programs' and its own CPU between its start and stop
lines, over its wall time), and with start-up (per sampler process: everything it spent
since it started, loading the programs and idling between recordings included, plus its
programs' run time, over the summed wall time of its recordings only, so an upper bound).

    python3 -m congestlab.bench.probe_cost RUN_DIR
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from congestlab.results import read_results
from congestlab.stats.outcomes import COMPLETE

DELAY_MARGIN_PCT = 5.0
CPU_LIMIT_PCT = 2.0
BYTES_LIMIT = 5_000_000


def probe_cost(run_dir: Path) -> dict:
    run_dir = Path(run_dir)
    delays: dict[str, list[float]] = {}
    for row in read_results(run_dir, "request"):
        if row["outcome"] == COMPLETE:
            delays.setdefault(row["probes"], []).append(float(row["delay_ms"]))
    reps = []
    samplers: dict[int, dict] = {}
    for rep_json in sorted(run_dir.glob("points/*/r*/rep.json")):
        probe = json.loads(rep_json.read_text()).get("probes")
        if not probe or not probe.get("stopped"):
            continue
        point, rep = rep_json.parent.parent.name, rep_json.parent.name
        series = run_dir / "results" / "series" / point / rep
        series_bytes = sum(p.stat().st_size for p in series.glob("*-tcp_probe.csv")) + sum(
            p.stat().st_size for p in series.glob("bottleneck-queue.csv"))
        bpf_s = (probe.get("bpf_run_time_ns") or 0) / 1e9
        reps.append({"rep": f"{point}/{rep}", "wall_s": probe["wall_s"], "sampler_cpu_s": probe["cpu_s"],
                     "sampler_pid": probe.get("sampler_pid"), "recording": probe.get("recording"),
                     "bpf_cpu_s": bpf_s, "bpf_runs": probe.get("bpf_run_count"),
                     "cpu_pct_of_one_core": 100 * (bpf_s + probe["cpu_s"]) / probe["wall_s"],
                     "raw_bytes": probe["bytes"], "series_bytes": series_bytes, "lost": probe["lost"],
                     "truncated": probe["truncated"], "drift_ns": probe["drift_ns"]})
        life = samplers.setdefault(probe.get("sampler_pid"), {"recordings": 0, "wall_s": 0.0, "bpf_s": 0.0,
                                                               "cpu_total_s": 0.0, "load_cpu_s": 0.0})
        life["recordings"] += 1
        life["wall_s"] += probe["wall_s"]
        life["bpf_s"] += bpf_s
        life["cpu_total_s"] = max(life["cpu_total_s"], probe.get("sampler_cpu_total_s") or probe["cpu_s"])
        life["load_cpu_s"] = probe.get("sampler_load_cpu_s") or 0.0
    for life in samplers.values():
        life["cpu_pct_of_one_core"] = 100 * (life["cpu_total_s"] + life["bpf_s"]) / life["wall_s"]
    medians = {arm: statistics.median(v) for arm, v in delays.items()}
    out = {"n": {arm: len(v) for arm, v in delays.items()}, "median_delay_ms": medians, "reps": reps}
    if "off" in medians and "on" in medians:
        out["median_change_pct"] = 100 * (medians["on"] - medians["off"]) / medians["off"]
        out["delay_ok"] = abs(out["median_change_pct"]) <= DELAY_MARGIN_PCT
    if reps:
        out["samplers"] = [{"pid": pid} | life for pid, life in samplers.items()]
        out["cpu_pct_max"] = max(r["cpu_pct_of_one_core"] for r in reps)
        out["cpu_pct_median"] = statistics.median(r["cpu_pct_of_one_core"] for r in reps)
        out["cpu_pct_with_startup_max"] = max(life["cpu_pct_of_one_core"] for life in samplers.values())
        out["series_bytes_max"] = max(r["series_bytes"] for r in reps)
        out["raw_bytes_max"] = max(r["raw_bytes"] for r in reps)
        out["cpu_ok"] = max(out["cpu_pct_max"], out["cpu_pct_with_startup_max"]) <= CPU_LIMIT_PCT
        out["bytes_ok"] = max(out["series_bytes_max"], out["raw_bytes_max"]) <= BYTES_LIMIT
    return out


def main() -> None:
    if len(sys.argv) != 2 or not Path(sys.argv[1], "manifest.json").exists():
        print("usage: python3 -m congestlab.bench.probe_cost RUN_DIR (a run of examples/probe-cost.toml)",
              file=sys.stderr)
        raise SystemExit(2)
    result = probe_cost(Path(sys.argv[1]))
    for r in result.pop("reps"):
        print(f"{r['rep']:40} wall {r['wall_s']:6.2f} s  sampler {r['sampler_cpu_s'] * 1e3:7.1f} ms  "
              f"bpf {r['bpf_cpu_s'] * 1e3:7.1f} ms ({r['bpf_runs']} runs)  "
              f"{r['cpu_pct_of_one_core']:.2f} % of a core (pid {r['sampler_pid']} #{r['recording']})  "
              f"raw {r['raw_bytes'] / 1e6:.2f} MB  series {r['series_bytes'] / 1e6:.2f} MB  lost {r['lost']}")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
