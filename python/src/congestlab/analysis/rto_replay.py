"""The offline RTO replay (seed 000 ch. 4, Tables 6, 34, 35; docs/rto-replay.md).

For every lean server of a run: take each connection's send/ACK stream from leanweb's log
and, independently, from the capture (analysis/rto_streams.py); re-run leantcp's sampler
for a sampling strategy and its estimator for a weight (analysis/rto_estimator.py); give
each sample the *unfloored* RTO in force when its segment was sent; bin the samples into
Table 6's columns and Tables 34-35's thresholds in both readings. Pure apart from reading
the run directory.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.analysis.rto_estimator import SAMPLINGS, WEIGHTS, Estimator, RtoSettings, Sampler, weight_of
from congestlab.analysis.rto_streams import ConnStream, LeanLog, pcap_streams, read_lean_log
from congestlab.errors import LeanLogError, RunDirError, TraceError
from congestlab.rundir import PCAP_DIR
from congestlab.stored import StoredRun

ONE_S_US = 1_000_000
THRESHOLDS_MS = (250, 500, 750, 1000)
READINGS = ("literal", "seed")
# Which RTO a sample is judged against: the one in force when its segment was sent, or the
# one after the connection's previous sample (docs/rto-replay.md; equal for `one`).
BASES = ("sent", "previous_sample")
SOURCES = ("log", "pcap")
BIN_COLUMNS = ("rto_le_1s_rtt_le_rto_pct", "rto_le_1s_rtt_gt_rto_lt_1s_pct", "rto_le_1s_rtt_gt_rto_ge_1s_pct",
               "rto_gt_1s_rtt_lt_rto_pct", "rto_gt_1s_rtt_ge_rto_pct")
# The same columns judged against the RTO after the previous sample (results.py, rto_bins).
PREVIOUS = "previous_sample_"


@dataclass(frozen=True)
class Sample:
    sent_us: int
    acked_us: int
    rtt_us: int
    rto_unfloored_us: float  # in force when the segment was sent; the initial RTO before any sample
    rto_us: int  # the replayed RTO after this sample, floored and capped
    logged_rto_us: int | None = None  # leanweb's, after the same sample (log source, live settings)
    rto_previous_us: float | None = None  # unfloored after the previous sample (initial RTO for the first)

    def rto(self, basis: str) -> float:
        if basis == "sent":
            return self.rto_unfloored_us
        if basis == "previous_sample":
            return self.rto_unfloored_us if self.rto_previous_us is None else self.rto_previous_us
        raise ValueError(f"basis {basis!r} is not one of {BASES}")


def settings_of(start_event: dict, weight: str | None = None) -> RtoSettings:
    """The estimator knobs leanweb logged in its start event, with another weight if given."""
    alpha, beta = float(start_event["rto_alpha"]), float(start_event["rto_beta"])
    if weight is not None:
        alpha, beta = (float(x) for x in WEIGHTS[weight])
    return RtoSettings(alpha=alpha, beta=beta, k=float(start_event["rto_k"]), g_us=int(start_event["rto_g_us"]),
                       initial_us=int(start_event["rto_initial_ms"]) * 1000,
                       min_us=int(start_event["rto_min_ms"]) * 1000, max_us=int(start_event["rto_max_ms"]) * 1000)


def sample_stream(stream: ConnStream, sampling: str) -> list[tuple[int, int, int]]:
    """(sent µs, acked µs, index of the first sample not yet taken when the segment left) per
    RTT sample, in the order leantcp's sampler yields them."""
    sampler = Sampler(sampling)
    out: list[tuple[int, int, int]] = []
    acked: list[int] = []  # ACK times of `out`, for the older logs' samples
    for event in stream.events:
        kind, t_us = event[0], event[1]
        if kind == "send":
            sampler.on_send(event[2], event[3], t_us, event[4], tag=len(out))
        elif kind == "ack":
            for rtt_us, sent_us, taken in sampler.on_ack(event[2], t_us):
                out.append((sent_us, sent_us + rtt_us, taken))
        elif kind == "timeout":
            sampler.on_retransmit_all()
        elif kind == "sample":  # a logged sample standing in (rundir/upgrade.py sample_stands_in): as logged
            sent_us = t_us - event[2]
            out.append((sent_us, t_us, bisect.bisect_right(acked, sent_us)))
            acked.append(t_us)
    return out


def replay_stream(timed: list[tuple[int, int, int]], settings: RtoSettings,
                  logged: list[tuple[int, int, int, int]] | None = None) -> list[Sample]:
    """Runs the estimator over one connection's samples in order."""
    est = Estimator(settings)
    in_force = [float(settings.initial_us)]  # unfloored RTO after 0, 1, 2, … samples
    samples = []
    pair = logged if logged is not None and len(logged) == len(timed) else None
    for i, (sent_us, acked_us, taken) in enumerate(timed):
        est.on_sample(acked_us - sent_us)
        in_force.append(est.unfloored_us())
        samples.append(Sample(sent_us, acked_us, acked_us - sent_us, in_force[taken], est.rto_us(),
                              pair[i][3] if pair else None, in_force[i]))
    return samples


def table6_bins(samples: list[Sample], basis: str = "sent") -> dict[str, float | None]:
    """Table 6's five columns as % of the samples."""
    counts = dict.fromkeys(BIN_COLUMNS, 0)
    for s in samples:
        rto = s.rto(basis)
        if rto <= ONE_S_US:
            if s.rtt_us <= rto:
                counts["rto_le_1s_rtt_le_rto_pct"] += 1
            elif s.rtt_us < ONE_S_US:
                counts["rto_le_1s_rtt_gt_rto_lt_1s_pct"] += 1
            else:
                counts["rto_le_1s_rtt_gt_rto_ge_1s_pct"] += 1
        elif s.rtt_us < rto:
            counts["rto_gt_1s_rtt_lt_rto_pct"] += 1
        else:
            counts["rto_gt_1s_rtt_ge_rto_pct"] += 1
    return {k: _pct(v, len(samples)) for k, v in counts.items()}


def avoid_pct(samples: list[Sample], threshold_us: int, reading: str, basis: str = "sent") -> float | None:
    """Tables 34-35: % of samples a minimum RTO of `threshold_us` keeps from retransmission.
    literal: RTT <= max(RTO, T); seed: RTO <= T (what the published cells are)."""
    if reading == "literal":
        hits = sum(1 for s in samples if s.rtt_us <= max(s.rto(basis), threshold_us))
    elif reading == "seed":
        hits = sum(1 for s in samples if s.rto(basis) <= threshold_us)
    else:
        raise ValueError(f"reading {reading!r} is not one of {READINGS}")
    return _pct(hits, len(samples))


def _pct(n: int, total: int) -> float | None:
    return round(100.0 * n / total, 4) if total else None


# --- a run directory ------------------------------------------------------------------


@dataclass
class ReplayResult:
    rows: dict[str, list[dict]]
    samples_replayed: int
    seconds: float  # wall clock
    cpu_s: float  # this process's CPU time (the machine is shared: wall time is noisy)
    problems: list[str]
    # files that could not be replayed, and captured connections a log does not hold
    damaged: list[str] = field(default_factory=list)
    opened: int = 0  # connections the captures saw open (their SYN captured)
    from_log: int = 0  # ... of those, the ones their server's log holds (replayed from the log too)

    def coverage(self) -> str:
        return (f"{self.opened} connections opened in the captures, {self.from_log} of them in the leanweb logs"
                + (f" ({self.opened - self.from_log} missing)" if self.from_log < self.opened else ""))


def lean_servers(manifest: dict) -> dict[str, dict[str, dict]]:
    """server name -> instance -> its manifest record, for every lean server of the run."""
    out: dict[str, dict[str, dict]] = {}
    for name, records in manifest.get("servers", {}).items():
        for record in records:
            if record.get("kind") == "lean":
                out.setdefault(name, {})[record["instance"]] = record
    return out


def replay_run(run: StoredRun, weights: list[str] | None = None, samplings: list[str] | None = None,
               thresholds_ms: tuple[int, ...] = THRESHOLDS_MS) -> ReplayResult:
    """Replays every repetition with a lean server; weights/samplings default to the live ones.
    A repetition whose rep.json or capture cannot be read, and one whose server's log cannot,
    is left out and named in `damaged`; when no log of the run can be read, its LeanLogError
    is raised."""
    started, cpu_started = time.monotonic(), time.process_time()
    servers = lean_servers(run.manifest)
    if not servers:
        raise RunDirError(f"{run.path}: no lean server in this run (the RTO replay reads leanweb's log)")
    out = ReplayResult({"rto_bins": [], "rto_threshold": [], "rto_samples": []}, 0, 0.0, 0.0, [])
    logs: dict[Path, LeanLog | LeanLogError] = {}
    absent = {(a.point, a.repetition) for a in run.missing()}  # no data: not measured, not replayed
    for rep in run.repetitions():
        point = rep.point
        if (point.id, rep.number) in absent:
            continue
        try:
            info = rep.info
        except RunDirError as err:
            out.damaged.append(f"{rep.where}: {err}")
            continue
        common = {"point_id": point.id, "experiment": point.experiment, "repetition": rep.number} | {
            axis: point.labels.get(axis, "") for axis in run.axes}
        for server, instances in servers.items():
            record = instances.get(info.get("servers", {}).get(server, ""))
            pcap = rep.dir / PCAP_DIR / f"{server}.pcap"
            if record is None or not pcap.exists():
                continue
            log_path = run.path / record["log_dir"] / "leanweb.jsonl"
            if log_path not in logs:
                try:
                    logs[log_path] = read_lean_log(log_path)
                except LeanLogError as err:
                    logs[log_path] = err
                    out.damaged.append(str(err))
            log = logs[log_path]
            if isinstance(log, LeanLogError):
                continue
            try:
                from_pcap = pcap_streams(pcap, int(record["port"]), log.settings.get("recovery") == "go-back-n")
            except TraceError as err:
                out.damaged.append(f"{pcap}: {err}")
                continue
            in_log = _log_conns_of(log, from_pcap)
            _count(out, rep.where, log_path, from_pcap, in_log)
            try:
                _replay(out, common | {"server": server}, log, log_path, {"log": in_log, "pcap": from_pcap},
                        weights, samplings, thresholds_ms)
            except (KeyError, TypeError, ValueError) as err:  # the start event's settings
                out.damaged.append(f"{log_path}: its start event lacks a valid setting ({err!r})")
    errors = [log for log in logs.values() if isinstance(log, LeanLogError)]
    if errors and len(errors) == len(logs):
        raise errors[0]
    out.seconds = round(time.monotonic() - started, 3)
    out.cpu_s = round(time.process_time() - cpu_started, 3)
    out.problems = sorted(set(out.problems))
    return out


def _count(out: ReplayResult, where: str, log_path: Path, from_pcap: list[ConnStream],
           in_log: list[ConnStream]) -> None:
    """The connections the capture saw open against those the log holds."""
    opened = [s for s in from_pcap if s.opened_in_capture]
    logged = {}
    for c in in_log:
        logged.setdefault(c.key, []).append(c.opened_unix_us)
    missing = [s for s in opened if not any(abs(t - s.opened_unix_us) <= ONE_S_US for t in logged.get(s.key, ()))]
    out.opened += len(opened)
    out.from_log += len(opened) - len(missing)
    if missing:
        ports = ", ".join(f"{s.family} {s.client_port}" for s in missing[:5])
        out.damaged.append(f"{log_path}: holds {len(opened) - len(missing)} of the {len(opened)} connections "
                           f"{where}'s capture saw open (not: {ports}{', …' if len(missing) > 5 else ''})")


def _replay(out: ReplayResult, key: dict, log: LeanLog, log_path: Path, by_source: dict[str, list[ConnStream]],
            weights: list[str] | None, samplings: list[str] | None, thresholds_ms: tuple[int, ...]) -> None:
    """One repetition and server replayed from both sources at every weight and sampling asked."""
    rows = out.rows
    live_weight = weight_of(float(log.settings["rto_alpha"]), float(log.settings["rto_beta"]))
    live_sampling = log.settings["sampling"]
    for sampling in samplings or [live_sampling]:
        for weight in weights or [live_weight]:
            live = weight == live_weight and sampling == live_sampling
            settings = settings_of(log.settings, weight)
            for source, streams in by_source.items():
                if source == "log" and not log.has_tx and sampling != live_sampling:
                    out.problems.append(f"{log_path}: no transmissions logged; the log replays only "
                                        f"its live sampling {live_sampling!r}")
                    continue
                per_conn = [(s, replay_stream(sample_stream(s, sampling), settings,
                                              s.logged_samples if source == "log" and live else None))
                            for s in streams]
                samples = [x for _, conn_samples in per_conn for x in conn_samples]
                out.samples_replayed += len(samples)
                row_key = key | {"source": source, "weight": weight or "custom", "sampling": sampling}
                previous = {PREVIOUS + k: v for k, v in table6_bins(samples, "previous_sample").items()}
                rows["rto_bins"].append(row_key | {"live_settings": live, "connections": len(streams),
                                                   "samples": len(samples)} | table6_bins(samples) | previous)
                for threshold in thresholds_ms:
                    for reading in READINGS:
                        rows["rto_threshold"].append(row_key | {
                            "live_settings": live, "threshold_s": threshold / 1000, "reading": reading,
                            "samples": len(samples), "avoid_pct": avoid_pct(samples, threshold * 1000, reading),
                            "avoid_previous_sample_pct": avoid_pct(samples, threshold * 1000, reading,
                                                                   "previous_sample")})
                if live:
                    rows["rto_samples"] += _sample_rows(row_key, per_conn)


def _log_conns_of(log: LeanLog, from_pcap: list[ConnStream]) -> list[ConnStream]:
    """The log's connections that the repetition's capture saw (a leanweb process may serve
    many repetitions): same family and client port, opened within a second of the capture's."""
    wanted = {}
    for s in from_pcap:
        wanted.setdefault(s.key, []).append(s.opened_unix_us)
    return [c for c in log.conns
            if any(abs(c.opened_unix_us - t) <= ONE_S_US for t in wanted.get(c.key, ()))]


def _sample_rows(key: dict, per_conn: list[tuple[ConnStream, list[Sample]]]) -> list[dict]:
    rows = []
    for stream, samples in per_conn:
        offset_us = stream.unix_offset_us
        for i, s in enumerate(samples, 1):
            rows.append(key | {"client_port": stream.client_port, "sample": i,
                               "sent_ts": (s.sent_us + offset_us) / 1e6, "acked_ts": (s.acked_us + offset_us) / 1e6,
                               "rtt_us": s.rtt_us, "rto_unfloored_us": round(s.rto_unfloored_us, 3),
                               "rto_previous_sample_us": round(s.rto("previous_sample"), 3),
                               "rto_us": s.rto_us, "logged_rto_us": s.logged_rto_us})
    return rows


def format_tables(rows: dict[str, list[dict]]) -> str:
    """Table 6's columns and the thresholds, one line per repetition x server x source x weight x sampling."""
    out = ["Table 6 (% of samples; RTO = unfloored RTO in force when the segment was sent)",
           f"{'point':40} {'rep':>3} {'server':8} {'source':6} {'wt':3} {'samp':4} {'basis':8} {'n':>6} "
           "  RTO<=1s: RTT<=RTO  RTT>RTO,<1s  RTT>RTO,>=1s | RTO>1s: RTT<RTO  RTT>=RTO"]
    for r in rows["rto_bins"]:
        for basis, prefix in (("sent", ""), ("previous", PREVIOUS)):
            cells = " ".join(f"{'-' if r[prefix + c] is None else format(r[prefix + c], '.2f'):>12}"
                             for c in BIN_COLUMNS)
            out.append(f"{r['point_id'][:40]:40} {r['repetition']:>3} {r['server'][:8]:8} {r['source']:6} "
                       f"{r['weight']:3} {r['sampling']:4} {basis:8} {r['samples']:>6} {cells}")
    thresholds = sorted({r["threshold_s"] for r in rows["rto_threshold"]}, reverse=True)
    out += ["", "Tables 34-35 (% of samples avoiding retransmission with minimum RTO T)",
            f"{'point':40} {'rep':>3} {'server':8} {'source':6} {'wt':3} {'samp':4} {'basis':8} {'reading':8} "
            + " ".join(f"{'T=' + format(t, 'g') + 's':>9}" for t in thresholds)]
    grouped: dict[tuple, dict] = {}
    for r in rows["rto_threshold"]:
        for basis, column in (("sent", "avoid_pct"), ("previous", "avoid_previous_sample_pct")):
            key = (r["point_id"], r["repetition"], r["server"], r["source"], r["weight"], r["sampling"], basis,
                   r["reading"])
            grouped.setdefault(key, {})[r["threshold_s"]] = r[column]
    for (point, rep, server, source, weight, sampling, basis, reading), cells in grouped.items():
        values = " ".join(f"{'-' if cells[t] is None else format(cells[t], '.2f'):>9}" for t in thresholds)
        out.append(f"{point[:40]:40} {rep:>3} {server[:8]:8} {source:6} {weight:3} {sampling:4} {basis[:8]:8} "
                   f"{reading:8} {values}")
    return "\n".join(out)


__all__ = ["BASES", "SAMPLINGS", "WEIGHTS", "Sample", "replay_run", "replay_stream", "sample_stream", "table6_bins",
           "avoid_pct", "format_tables", "settings_of"]
