"""MGEN background (traffic/mgen.py builds the flows and scripts): per pair and direction,
sinks first, then sources; achieved rates per class from the sink logs per window."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from congestlab.errors import SpecError, ToolError
from congestlab.fidelity import Check, background_check, background_min_window_s
from congestlab.traffic.mgen import (
    CLASSES,
    Flow,
    build_flows,
    compress,
    flow_table,
    mgen_argv,
    mgen_env,
    parse_sink_log,
    path_loss,
    sink_script,
    source_script,
)
from congestlab.workloads.base import Background, Record

# Ethernet + IP + UDP headers on an MGEN datagram: its payload rate becomes a frame rate.
UDP_OVERHEAD_BYTES = {"v4": 14 + 20 + 8, "v6": 14 + 40 + 8}


def utc_seconds_of_day(epoch_s: float) -> float:
    return epoch_s % 86400.0


class MgenRunner(Background):
    @classmethod
    def host_pairs(cls, spec, study) -> set[tuple[str, str]]:
        return {(p.source, p.sink) for p in spec.pairs}

    @classmethod
    def tools(cls, spec) -> set[str]:
        return {"mgen"}

    @classmethod
    def leansim_background(cls, spec, study, lean_server: str, where: str) -> list[dict] | None:
        """Its UDP classes as constant-rate datagrams (leansim has no kernel TCP)."""
        flows: list[dict] = []
        if spec.rate_bps == 0:
            return flows
        for mgen_class, rate in spec.class_rates_bps().items():
            if rate <= 0:
                continue
            if not mgen_class.startswith("udp"):
                raise SpecError(f"{where}.mix", f"class {mgen_class} is kernel TCP, which the simulator does not "
                                "model (only MGEN's UDP classes)")
            family = "v" + mgen_class[-1]
            payload = spec.udp_payload_v4_bytes if family == "v4" else spec.udp_payload_v6_bytes
            frame = payload + UDP_OVERHEAD_BYTES[family]
            flows.append({"kind": "udp", "family": family, "frame_bytes": frame, "rate_bps": rate * frame / payload})
        return flows

    """The flows of one MgenWorkload. Every flow is switched off by the source script
    itself after the context's bound, so the traffic stops even if congestlab dies."""

    def __init__(self, spec, ctx, log_dir: Path):
        super().__init__(spec, ctx, log_dir)
        self.flows = build_flows(spec)
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.sink_logs: list[tuple[Path, list[Flow]]] = []
        self.window_offsets: dict[Path, int] = {}
        self.span_epoch_s: list[float] = []  # first window's start, last window's end
        # the most bytes one window's measured workloads move (None: not known for some window)
        self.measured_bytes: float | None = 0.0

    def _groups(self):
        """(pair, reversed, flows): reversed classes run from the pair's sink to its source."""
        reversed_classes = self.spec.reversed_classes()
        for pair in self.spec.pairs:
            for reverse in (False, True):
                flows = [f for f in self.flows if f.family == pair.family and (f.cls in reversed_classes) == reverse]
                if flows:
                    src, dst = (pair.sink, pair.source) if reverse else (pair.source, pair.sink)
                    yield pair.family, reverse, src, dst, flows

    def start(self) -> None:
        if not self.flows:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = mgen_env(dict(os.environ))
        groups = list(self._groups())
        families = {f.family for f in self.flows}
        missing = families - {g[0] for g in groups}
        if missing:
            raise ToolError(["mgen"], None, f"no MGEN pair for family {', '.join(sorted(missing))}")
        for family, reverse, _, dst, flows in groups:  # sinks before sources
            stem = f"{self.spec.name}-{family}{'-rev' if reverse else ''}"
            log = self._start_one(dst, f"{stem}-sink", sink_script(flows), env, family == "v6")
            self.sink_logs.append((log, flows))
        for family, _, _, dst, flows in groups:
            self._wait_listening(dst, flows)
        for family, reverse, src, dst, flows in groups:
            stem = f"{self.spec.name}-{family}{'-rev' if reverse else ''}"
            script = source_script(flows, self.ctx.address(dst, family), self.ctx.bound_s)
            self._start_one(src, f"{stem}-source", script, env, family == "v6")

    def _start_one(self, node: str, stem: str, script: str, env: dict, ipv6: bool) -> Path:
        script_path = self.log_dir / f"{stem}.mgn"
        script_path.write_text(script)
        log_path = self.log_dir / f"{stem}.drc"
        argv = mgen_argv(script_path, log_path, ipv6)
        self.argvs.append(argv)
        with open(self.log_dir / f"{stem}.stdout", "wb") as out:
            proc = self.ctx.tb.start(node, argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.procs.append((stem, proc))
        return log_path

    def _wait_listening(self, node: str, flows: list[Flow], timeout_s: float = 5.0) -> None:
        tcp_ports = {f.port for f in flows if f.proto == "TCP"}
        deadline = time.monotonic() + timeout_s
        while tcp_ports and time.monotonic() < deadline:
            out = self.ctx.tb.run(node, ["ss", "-Hltn"]).stdout
            listening = {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if line.strip()}
            if tcp_ports <= listening:
                return
            time.sleep(0.05)
        if tcp_ports:
            raise ToolError(["mgen"], -1, f"MGEN sink on {node} did not listen on {sorted(tcp_ports)}")
        time.sleep(0.1)  # UDP sockets: nothing to poll, give the sink a moment

    def open_window(self, measured_bytes: float | None = None) -> None:
        if self.measured_bytes is not None:
            self.measured_bytes = None if measured_bytes is None else max(self.measured_bytes, measured_bytes)
        self.window_offsets = {log: (log.stat().st_size if log.exists() else 0) for log, _ in self.sink_logs}

    def measure(self, window_epoch_s: tuple[float, float]) -> tuple[list[Record], list[Check]]:
        if not self.flows:
            return [], []
        self.span_epoch_s = [self.span_epoch_s[0] if self.span_epoch_s else window_epoch_s[0], window_epoch_s[1]]
        rates = self._rates(window_epoch_s, self.window_offsets)
        span_s = window_epoch_s[1] - window_epoch_s[0]
        records: list[Record] = []
        for cls in CLASSES:
            mine = [r for r in rates if r.cls == cls]
            if not mine:
                continue
            requested = sum(r.requested_bps for r in mine)
            achieved = sum(r.achieved_bps for r in mine)
            records.append(("background", {
                "workload": self.spec.name, "cls": cls, "reversed": cls in self.spec.reversed_classes(),
                "requested_bps": requested, "achieved_bps": achieved,
                "deviation_pct": (achieved - requested) / requested * 100 if requested else 0.0,
                "window_s": span_s, "sent_bps": sum(r.sent_bps for r in mine),
                "loss_pct": path_loss(mine)[1]}))
        return records, []

    def _rates(self, window_epoch_s: tuple[float, float], offsets: dict[Path, int]):
        window = (utc_seconds_of_day(window_epoch_s[0]), utc_seconds_of_day(window_epoch_s[1]))
        if window[1] < window[0]:
            window = (window[0], window[1] + 86400)
        rates = []
        for log, flows in self.sink_logs:
            if log.exists():
                rates += parse_sink_log(log, flows, window, offsets.get(log, 0))
        return rates

    def lifetime_checks(self) -> list[Check]:
        if not self.flows or not self.span_epoch_s:
            return []
        rates = self._rates((self.span_epoch_s[0], self.span_epoch_s[1]), {})
        requested = sum(f.rate_bps for f in self.flows)
        # what the sources sent (the sequence numbers received): a UDP message the congested
        # bottleneck dropped was offered all the same, and the loss is the network's, reported
        # beside it, not a background that fell short (traffic/mgen.py parse_sink_log)
        sent = sum(r.sent_bps for r in rates)
        sent_msgs, loss_pct = path_loss(rates)
        tolerance = self.spec.tolerance_pct
        check = background_check(self.spec.name, requested, sent, tolerance,
                                 window_s=self.span_epoch_s[1] - self.span_epoch_s[0],
                                 min_window_s=background_min_window_s(self.measured_bytes, requested, tolerance))
        if loss_pct:
            loss = f"the path lost {loss_pct:.1f} % of the {sent_msgs} messages sent"
            check.message = f"{check.message}; {loss}" if check.message else loss
        return [check]

    def stop(self) -> None:
        sources = [p for stem, p in self.procs if stem.endswith("source")]
        sinks = [p for stem, p in self.procs if stem.endswith("sink")]
        for proc in sources + sinks:
            self.ctx.tb.stop(proc)
        for log, _ in self.sink_logs:
            if log.exists():
                compress(log)
        for stem, _ in self.procs:
            log = self.log_dir / f"{stem}.drc"
            if stem.endswith("source") and log.exists():
                compress(log)
        self.procs = []

    def describe(self) -> dict:
        return super().describe() | {"flows": flow_table(self.flows),
                                     "requested_bps": sum(f.rate_bps for f in self.flows)}
