"""Hand-made run directories in the current format (docs/data-format.md): a manifest,
results/<kind>.csv in long form, and points/<id>/r<rep>/ with stand-in capture files.

`RunBuilder` takes records per point and repetition and writes them with
congestlab.results.write_results, so the files have exactly the runner's columns.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from preset_declarations import load_declaration

from congestlab.results import write_results
from congestlab.rundir import FORMAT_VERSION
from congestlab.rundir.upgrade import stored_row_outcome


class RunBuilder:
    def __init__(self, study: str, axes: list[str], report: dict, published: list[dict] | None = None,
                 title: str = "", quick: bool = False, experiment: str = "main"):
        self.study, self.axes, self.experiment = study, axes, experiment
        self.spec = {"name": study, "title": title or f"{study} (hand-made)", "source": f"test fixture ({study})",
                     "published": published or [], "report": report}
        self.quick = quick
        self.points: dict[str, dict] = {}
        self.rows: dict[str, list[dict]] = {}
        self.fidelity = {"checks": [], "warnings": []}
        # a hand-made spec is no whole study: a run of format 2 (whose rows the reader upgrades
        # from the spec's points) needs a whole one (record_fixtures.tiny_stored_spec)
        self.format_version = FORMAT_VERSION

    def point_id(self, axes: dict, experiment: str | None = None) -> str:
        return (experiment or self.experiment) + "." + ".".join(f"{k}-{axes[k]}" for k in self.axes)

    def add(self, kind: str, axes: dict, repetition: int, experiment: str | None = None, **record) -> None:
        """One record of point `axes` (in `experiment`, default the builder's) and repetition."""
        experiment = experiment or self.experiment
        pid = self.point_id(axes, experiment)
        point = self.points.setdefault(pid, {"id": pid, "experiment": experiment,
                                             "axes": {k: str(axes[k]) for k in self.axes}, "repetitions": 0})
        point["repetitions"] = max(point["repetitions"], repetition)
        row = {"point_id": pid, "experiment": experiment, "repetition": repetition}
        row.update({k: axes[k] for k in self.axes})
        row.update(record)
        self.rows.setdefault(kind, []).append(row)

    def write(self, run_dir: Path) -> Path:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        for kind, rows in self.rows.items():
            if kind == "request" and self.format_version >= FORMAT_VERSION:
                # every row of today's analysis has its outcome: from ok and the error when not given
                rows = [row if "outcome" in row else row | {"outcome": stored_row_outcome(row)} for row in rows]
            write_results(run_dir, kind, self.axes, rows)
        for pid, point in self.points.items():
            for rep in range(1, point["repetitions"] + 1):
                d = run_dir / "points" / pid / f"r{rep}"
                d.mkdir(parents=True, exist_ok=True)
                (d / "server.pcap").write_bytes(b"")
                (d / "client.log").write_text("stand-in log\n")
        manifest = {
            "format_version": self.format_version, "study": self.study, "preset": self.study, "quick": self.quick,
            "status": "complete", "spec": self.spec, "axes": self.axes, "points": list(self.points.values()),
            "environment": {"kernel": "6.1.0-test", "cpus": 2, "python": "3.11.2", "git_revision": "abc123"},
            "tools": {"iperf": "iperf version 2.1.8", "apache2": "Apache/2.4.62"},
            "servers": {}, "testbed": {"setup_s": 1.2, "teardown_s": 0.4},
            "fidelity": self.fidelity, "timing": {"wall_s": 321.0},
        }
        (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
        return run_dir


def request_run(values: dict[tuple[str, str, str], list[float]], delay: dict | None = None,
                report: dict | None = None, published: list[dict] | None = None) -> RunBuilder:
    """An ipv6-shaped run: values[(server, level, family)] = throughputs, one per repetition;
    delay likewise (default: 8000 / throughput ms)."""
    b = RunBuilder("ipv6", ["server", "level"], report or {}, published)
    for (server, level, family), thr in values.items():
        for rep, t in enumerate(thr, start=1):
            d = (delay or {}).get((server, level, family), [8000 / t] * len(thr))[rep - 1]
            b.add("request", {"server": server, "level": level}, rep, server=server, client="c", family=family,
                  file_kib=320, ok=True, delay_ms=round(d, 3), nrt_throughput_mbps=t, start_ts=1000.0 + rep * 10)
    return b


# one claim (v6's delay above v4's) and the seed's delays: a parent's child run (sensitivity, suites)
DELAY_CLAIM_REPORT = {
    "metrics": {"delay_ms": {"kind": "request", "column": "delay_ms", "where": {"ok": True}}},
    "claims": [{"id": "v6slower", "title": "v6 delay above v4", "seed": "test", "rule": "compare", "metric": "delay_ms",
                "relation": ">", "a": {"family": "v6"}, "b": {"family": "v4"}, "for_each": ["server"]}],
}
DELAY_PUBLISHED = [{"server": "apache", "level": "C1B", "family": "v4", "delay_ms": 100},
                   {"server": "apache", "level": "C1B", "family": "v6", "delay_ms": 120}]


def delay_claim_run(v4_ms: list[float], v6_ms: list[float]) -> RunBuilder:
    """Three repetitions of apache at C1B with these delays, DELAY_CLAIM_REPORT's claim and
    DELAY_PUBLISHED's seed values."""
    return request_run({("apache", "C1B", "v4"): [10.0] * 3, ("apache", "C1B", "v6"): [10.0] * 3},
                       delay={("apache", "C1B", "v4"): v4_ms, ("apache", "C1B", "v6"): v6_ms},
                       report=DELAY_CLAIM_REPORT, published=DELAY_PUBLISHED)


IPV6_LEVELS = ["C0", "C1B", "C2B", "C3B", "C4B", "C5B", "C6B"]


def realistic_ipv6(repetitions: int = 10, seed: int = 7) -> RunBuilder:
    """A full ipv6 run with plausible numbers (not a measurement): Apache near the seed's
    shape, the lean server faster than Apache at 75 Mbit/s as README reports, and leanmodern
    (the lean server with TCP's optimizations) a little faster than Apache everywhere."""
    decl = load_declaration("ipv6")
    rng = random.Random(seed)
    b = RunBuilder("ipv6", ["server", "level"], decl["report"], decl["published"],
                   title="IPv6 and IPv4 web servers under congestion (seed 001 / 000 Ch. 5)")
    base = {"apache": {"C0": 90, "C1B": 30, "C2B": 31, "C3B": 29, "C4B": 21, "C5B": 22, "C6B": 20},
            "lean": {"C0": 85, "C1B": 36, "C2B": 35, "C3B": 34, "C4B": 14, "C5B": 13, "C6B": 15},
            "leanmodern": {"C0": 92, "C1B": 33, "C2B": 33, "C3B": 32, "C4B": 23, "C5B": 23, "C6B": 22}}
    for server, levels in base.items():
        for level, thr in levels.items():
            for family, factor in (("v4", 1.0), ("v6", 0.93)):
                for rep in range(1, repetitions + 1):
                    t = max(0.5, rng.gauss(thr * factor, thr * 0.06))
                    delay = 320 * 1024 * 8 / (t * 1e6) * 1000 * 1.1 + rng.gauss(0, 1.5)
                    b.add("request", {"server": server, "level": level}, rep, server=server, client="client",
                          family=family, file_kib=320, ok=True, delay_ms=round(delay, 3),
                          nrt_throughput_mbps=round(t, 3), start_ts=1700000000 + rep * 60 + IPV6_LEVELS.index(level),
                          retransmissions=rng.randint(0, 4) if level != "C0" else 0)
    b.fidelity = {"checks": [{"name": "background_rate_C4B", "ok": False, "value": "96.1 Mbit/s",
                              "expected": "100 Mbit/s ± 3 %", "message": "MGEN fell short at 100 Mbit/s"},
                             {"name": "rps_single_cpu", "ok": True, "value": "1", "expected": "1", "message": ""}],
                  "warnings": ["C4B: background achieved 96.1 Mbit/s of 100 (−3.9 %)"]}
    return b


def tcplab_run(repetitions: int = 3, seed: int = 3, noise: float = 0.03) -> RunBuilder:
    """A tcp-lab run shaped like the preset (spec/presets/tcp-lab.toml: one experiment per figure,
    axis x) at its quick points, with numbers like docs/notes/linkem.md's quick run, plus more
    loss/delay points so that shapes can be fitted; each TCP value scattered by up to ± noise."""
    decl = load_declaration("tcp-lab")
    rng = random.Random(seed)
    b = RunBuilder("tcp-lab", ["x"], decl["report"], decl["published"], title="TCP throughput lab (seed 003)")

    def one(task, x, mbps_sessions, udp=0):
        for rep in range(1, repetitions + 1):
            for i, m in enumerate(mbps_sessions):
                b.add("iperf", {"x": x}, rep, experiment=task, workload="iperf", protocol="tcp", session=i,
                      throughput_mbps=round(max(0.01, m * rng.uniform(1 - noise, 1 + noise)), 3))
            for j in range(udp):
                b.add("iperf", {"x": x}, rep, experiment=task, workload="iperf", protocol="udp", session=100 + j,
                      throughput_mbps=round(0.963 * rng.uniform(0.995, 1.005), 4))

    # the line's fill check runs an iperf workload of its own, outside every figure
    b.add("iperf", {"x": ""}, 1, experiment="check_fill", workload="fill", protocol="tcp", session=0,
          throughput_mbps=93.1)
    for task in ("window_receiver", "window_sender"):
        for x, m in ((2000, 85.7), (10000, 95.5), (50000, 95.5)):
            one(task, x, [m])
    for task in ("length_receiver", "length_sender"):
        for x in (64, 4096, 65536):
            one(task, x, [95.4])
    for x, m in ((10_000_000, 9.58), (50_000_000, 47.6), (150_000_000, 95.7)):
        one("rate", x, [m])
    for x in (0, 10, 20, 40, 80):
        one("delay", x, [95.6 * 40 / (40 + x)])  # window-limited: ~1/RTT, not a straight line
    for task in ("loss_30s", "loss_60s"):
        for x in (0.0, 0.005, 0.01, 0.02, 0.05):
            one(task, x, [95.6 * 2.718 ** (-22 * x)])
    for x in (25000, 100000, 200000):
        one("bdp", x, [x * 8 / 0.08 / 1e6 * 1.07])
    for n in (1, 2, 4):
        one("parallel", n, [95.3 / n * f for f in ([1.0] if n == 1 else [1.3, 0.7] if n == 2 else [1.6, 0.6, 0.9, 0.9])])
    for task, udp in (("udp1", 1), ("udp2", 2)):
        for n in (1, 2):
            one(task, n, [(94.7 - udp) / n] * n, udp=udp)
    return b


def anma_run(repetitions: int = 1, seed: int = 4) -> RunBuilder:
    """An anma run: both servers, patterns A-E, dualbench's exact N*k/E split, no RESETs."""
    decl = load_declaration("anma")
    rng = random.Random(seed)
    b = RunBuilder("anma", ["server", "pattern"], decl["report"], decl["published"], title="ANMA (seed 004)")
    ratios = {"A": (1, 1), "B": (4, 1), "C": (1, 4), "D": (1, 0), "E": (0, 1)}
    for server in ("apache", "lean"):
        for pattern, (k6, k4) in ratios.items():
            for rep in range(1, repetitions + 1):
                total = 2000
                n6 = total * k6 // (k6 + k4)
                fams = {"v6": n6, "v4": total - n6}
                rows = {}
                for fam, n in fams.items():
                    rows[fam] = dict(requests=n, normal=n, reset=0, timeout=0, refused=0, other=0,
                                     connect_mean_ms=round(rng.uniform(0.05, 0.07) if n else 0, 4) if n else "",
                                     continuation_mean_ms=round(rng.uniform(0.30, 0.34), 4) if n else "")
                rows["all"] = dict(requests=total, normal=total, reset=0, timeout=0, refused=0, other=0)
                for fam, rec in rows.items():
                    b.add("anma", {"server": server, "pattern": pattern}, rep, workload="anma", family=fam, **rec)
    return b


def get_outcome_row(delay, repetition: int, timeout_s: float = 0.45) -> dict:
    """A measured GET's request row: `delay` in ms (complete), "timeout" (timed out at
    timeout_s) or "invalid" (an HTTP 500)."""
    row = dict(client="c", family="v4", file_kib=320, timeout_s=timeout_s, start_ts=1000.0 + repetition)
    if delay == "timeout":
        row.update(outcome="timed_out", ok=False, error=f"timed out after {timeout_s:g} s")
    elif delay == "invalid":
        row.update(outcome="invalid", ok=False, error="HTTP 500")
    else:
        row.update(outcome="complete", ok=True, delay_ms=delay)
    return row
