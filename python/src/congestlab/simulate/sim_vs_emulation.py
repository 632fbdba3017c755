"""Simulation ÷ emulation per point, family and metric: the means over the repetitions of
each side's measured GETs (results/request.csv of both), as a ratio."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

from congestlab.fidelity import failed
from congestlab.rundir import MANIFEST
from congestlab.rundir.upgrade import fidelity_view

COMPARED = [
    ("delay_ms", "delay (ms)"),
    ("nrt_throughput_mbps", "NRT throughput (Mbit/s)"),
    ("goodput_mbps", "goodput (Mbit/s)"),
    ("retransmissions", "retransmissions"),
    ("rtt_mean_ms", "RTT mean (ms)"),
]

BIGGER_IS_BETTER = {"nrt_throughput_mbps", "goodput_mbps"}

# Why the two sides differ, per metric (docs/simulation.md says more).
SOURCES = """\
Where the gap comes from (docs/simulation.md, "Reading the comparison"):
- timer granularity and scheduling: leanweb's loop reads the clock and wakes on poll(2) with
  millisecond timeouts, on 2 cores shared with the routers' softirqs, tcpdump and curl; the
  simulation fires every timer at its exact microsecond and processes a frame in zero time.
- queue discipline: the testbed's HTB leaf FIFO sits behind veth/TAP queues and the TAP
  device's own queue (txqueuelen); the simulation has only the FIFO, with exact serialization.
- path: the testbed's client reaches the server over routers and bridges that each add
  forwarding time; the simulation has one link per direction (RTT = 2 x delay + serialization).
- ACK behaviour: the kernel client delays ACKs, autotunes its window and runs its own
  congestion control; the simulated client is leantcp (ACK per segment, fixed window).
- a testbed that could not keep up: retransmissions without FIFO drops or configured loss,
  a CPU busy near 100 %, failed fidelity checks (above) mean packets were lost or late
  outside the modelled network; compare again on a quieter machine.
"""


def _float(value) -> float | None:
    if value in (None, ""):
        return None
    return float(value)


def _values(rows: list[dict], metric: str) -> list[float]:
    return [v for v in (_float(r.get(metric)) for r in rows if str(r.get("ok")).lower() in ("true", "1"))
            if v is not None]


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0.0) else None


def compare_rows(sim: list[dict], emu: list[dict]) -> list[dict]:
    """One row per (point, family, metric): both means, their counts and sim ÷ emulation;
    and the ratio of the best repetitions (least delay, most throughput), which a busy
    machine disturbs least (docs/notes/simulation-vs-emulation.md)."""
    keys = list(dict.fromkeys((r["point_id"], r["experiment"], r["family"]) for r in sim))
    out = []
    for point_id, experiment, family in keys:
        s_rows = [r for r in sim if r["point_id"] == point_id and r["family"] == family]
        e_rows = [r for r in emu if r["point_id"] == point_id and r["family"] == family]
        for metric, _ in COMPARED:
            s_values, e_values = _values(s_rows, metric), _values(e_rows, metric)
            s = statistics.fmean(s_values) if s_values else None
            e = statistics.fmean(e_values) if e_values else None
            best = max if metric in BIGGER_IS_BETTER else min
            s_best = best(s_values) if s_values else None
            e_best = best(e_values) if e_values else None
            out.append({"point_id": point_id, "experiment": experiment, "family": family, "metric": metric,
                        "sim_mean": s, "sim_n": len(s_values), "emulation_mean": e, "emulation_n": len(e_values),
                        "ratio": _ratio(s, e), "sim_best": s_best, "emulation_best": e_best,
                        "ratio_best": _ratio(s_best, e_best)})
    return out


def conditions(outcomes: list[dict], emu_dir: Path) -> list[dict]:
    """Per point, what each side's bottleneck did and how busy the machine was: the FIFO's
    drops per repetition on both sides (emulation: rep.json's `bottleneck_drops`, docs/data-format.md),
    the simulated random-loss drops, the emulation's CPU busy share. Retransmissions in the
    testbed without FIFO drops or configured loss were lost outside the modelled queue."""
    out = []
    for point_id in dict.fromkeys(o["point_id"] for o in outcomes):
        sim = [o for o in outcomes if o["point_id"] == point_id]
        reps = [json.loads(p.read_text()) for p in sorted((emu_dir / "points" / point_id).glob("r*/rep.json"))]
        out.append({
            "point_id": point_id,
            "sim_fifo_drops": statistics.fmean(o["data_link"]["dropped_queue"] + o["ack_link"]["dropped_queue"]
                                               for o in sim),
            "sim_loss_drops": statistics.fmean(o["data_link"]["dropped_loss"] + o["ack_link"]["dropped_loss"]
                                               for o in sim),
            "emulation_fifo_drops": statistics.fmean(sum(r.get("bottleneck_drops", {}).values()) for r in reps)
            if reps else None,
            "emulation_cpu_busy_pct": statistics.fmean(r["cpu_busy_pct"] for r in reps if r.get("cpu_busy_pct")
                                                       is not None) if any(r.get("cpu_busy_pct") is not None
                                                                           for r in reps) else None,
            "emulation_reps": len(reps),
        })
    return out


def failed_checks(emu_dir: Path) -> list[str]:
    """The emulation run's failed fidelity checks (manifest.json): a comparison against a run
    that did not do what its spec asked says so."""
    try:
        manifest = json.loads((emu_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return ["no readable manifest.json"]
    return [c.get("message") or c.get("name", "?") for c in fidelity_view(manifest.get("fidelity") or {})["checks"]
            if failed(c)]


def _cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:.0f}"


def to_markdown(rows: list[dict], title: str, where: list[dict] | None = None,
                failed: list[str] | None = None) -> str:
    """A table per point: metric | simulation | emulation | sim ÷ emulation; then each
    point's bottleneck and CPU, and the emulation's failed fidelity checks."""
    lines = [f"# {title}", ""]
    labels = dict(COMPARED)
    for key in dict.fromkeys((r["point_id"], r["family"]) for r in rows):
        lines += [f"## {key[0]}, {key[1]}", "",
                  "| metric | simulation | emulation | sim ÷ emulation | best repetitions: sim ÷ emulation |",
                  "|---|---|---|---|---|"]
        for r in rows:
            if (r["point_id"], r["family"]) != key:
                continue
            ratio = _cell(r["ratio"]) if r["ratio"] is not None else (
                "both 0" if r["sim_mean"] == 0 and r["emulation_mean"] == 0 else "-")
            best = "-" if r["ratio_best"] is None else (
                f"{_cell(r['sim_best'])} ÷ {_cell(r['emulation_best'])} = {_cell(r['ratio_best'])}")
            lines.append(f"| {labels[r['metric']]} | {_cell(r['sim_mean'])} (n={r['sim_n']}) | "
                         f"{_cell(r['emulation_mean'])} (n={r['emulation_n']}) | {ratio} | {best} |")
        lines.append("")
    if where:
        lines += ["## The bottleneck and the machine, per repetition", "",
                  "| point | sim FIFO drops | sim random-loss drops | emulation FIFO drops | emulation CPU busy % |",
                  "|---|---|---|---|---|"]
        lines += [f"| {w['point_id']} | {_cell(w['sim_fifo_drops'])} | {_cell(w['sim_loss_drops'])} | "
                  f"{_cell(w['emulation_fifo_drops'])} | {_cell(w['emulation_cpu_busy_pct'])} |" for w in where]
        lines.append("")
    if failed is not None:
        lines += ["## The emulation's fidelity checks", ""]
        lines += [f"- FAILED: {m}" for m in failed] or ["- all passed"]
        lines.append("")
    lines.append(SOURCES)
    return "\n".join(lines)


def write_comparison(out_dir: Path, rows: list[dict], title: str, where: list[dict], failed: list[str]) -> str:
    """comparison.csv (the ratios), conditions.csv (bottleneck and CPU) and comparison.md."""
    for name, table in (("comparison.csv", rows), ("conditions.csv", where)):
        with open(out_dir / name, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(table[0]) if table else ["point_id"])
            writer.writeheader()
            writer.writerows(table)
    text = to_markdown(rows, title, where, failed)
    (out_dir / "comparison.md").write_text(text)
    return text
