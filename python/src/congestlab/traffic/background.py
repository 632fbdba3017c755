"""One congestion level's MGEN background: sinks, then sources; stopped and parsed."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from congestlab.errors import ToolError
from congestlab.spec.models import BackgroundSpec, LevelSpec
from congestlab.traffic.mgen import (
    Flow,
    build_flows,
    compress,
    flow_table,
    mgen_argv,
    mgen_env,
    parse_sink_log,
    sink_script,
    source_script,
)


def utc_seconds_of_day(epoch_s: float) -> float:
    return epoch_s % 86400.0


class MgenBackground:
    """MGEN pairs of one level inside the testbed. `duration_s` bounds the traffic: every
    flow is switched off by the script itself at that time."""

    def __init__(self, testbed, background: BackgroundSpec, level: LevelSpec, log_dir: Path, duration_s: float):
        self.tb = testbed
        self.background = background
        self.level = level
        self.log_dir = log_dir
        self.duration_s = duration_s
        self.flows = build_flows(level, background)
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []
        self.argvs: list[list[str]] = []

    def _pair_flows(self, family: str) -> list[Flow]:
        return [f for f in self.flows if f.family == family]

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = mgen_env(dict(os.environ))
        pairs = [(p, self._pair_flows(p.family)) for p in self.background.pairs]
        pairs = [(p, flows) for p, flows in pairs if flows]
        missing = {f.family for f in self.flows} - {p.family for p, _ in pairs}
        if missing:
            raise ToolError(["mgen"], None, f"no background pair for family {', '.join(sorted(missing))}")
        for pair, flows in pairs:  # sinks before sources
            self._start_one(pair.sink, f"{self.level.name}-{pair.family}-sink", sink_script(flows), env,
                            ipv6=pair.family == "v6")
        for pair, flows in pairs:
            self._wait_listening(pair.sink, flows)
        for pair, flows in pairs:
            dst = self.tb.address(pair.sink, pair.family)
            self._start_one(pair.source, f"{self.level.name}-{pair.family}-source",
                            source_script(flows, dst, self.duration_s), env, ipv6=pair.family == "v6")

    def _start_one(self, node: str, stem: str, script: str, env: dict, ipv6: bool) -> None:
        script_path = self.log_dir / f"{stem}.mgn"
        script_path.write_text(script)
        log_path = self.log_dir / f"{stem}.drc"
        argv = mgen_argv(script_path, log_path, ipv6)
        self.argvs.append(argv)
        out = open(self.log_dir / f"{stem}.stdout", "wb")
        proc = self.tb.start(node, argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        out.close()
        self.procs.append((stem, proc, log_path))

    def _wait_listening(self, node: str, flows: list[Flow], timeout_s: float = 5.0) -> None:
        tcp_ports = {f.port for f in flows if f.proto == "TCP"}
        deadline = time.monotonic() + timeout_s
        while tcp_ports and time.monotonic() < deadline:
            out = self.tb.run(node, ["ss", "-Hltn"]).stdout
            listening = {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if line.strip()}
            if tcp_ports <= listening:
                return
            time.sleep(0.05)
        if tcp_ports:
            raise ToolError(["mgen"], -1, f"MGEN sink on {node} did not listen on {sorted(tcp_ports)}")
        time.sleep(0.1)  # UDP sockets: nothing to poll, give the sink a moment

    def stop(self) -> None:
        sources = [p for p in self.procs if p[0].endswith("source")]
        sinks = [p for p in self.procs if p[0].endswith("sink")]
        for _, proc, _ in sources + sinks:
            self.tb.stop(proc)

    def achieved(self, window_epoch_s: tuple[float, float]) -> dict:
        """Per-flow achieved rates in the window; logs are compressed afterwards."""
        window = (utc_seconds_of_day(window_epoch_s[0]), utc_seconds_of_day(window_epoch_s[1]))
        if window[1] < window[0]:
            window = (window[0], window[1] + 86400)
        rates = []
        for stem, _, log in self.procs:
            if not stem.endswith("sink") or not log.exists():
                continue
            family = "v6" if "-v6-" in stem else "v4"
            rates += parse_sink_log(log, self._pair_flows(family), window)
            compress(log)
        for stem, _, log in self.procs:
            if stem.endswith("source") and log.exists():
                compress(log)
        requested = sum(f.rate_bps for f in self.flows)
        achieved = sum(r.achieved_bps for r in rates)
        return {
            "flows": flow_table(self.flows),
            "per_flow": [asdict(r) for r in rates],
            "requested_bps": requested,
            "achieved_bps": achieved,
            "deviation_pct": (achieved - requested) / requested * 100 if requested else 0.0,
            "window_s": window_epoch_s[1] - window_epoch_s[0],
            "argv": self.argvs,
        }
