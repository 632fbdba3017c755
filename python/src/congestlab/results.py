"""Results in long form: one CSV per kind of record under RUN_DIR/results/, one row per
point x repetition x record, one column per sweep axis (docs/data-format.md, key by key).

Every row starts with COMMON_COLUMNS, then the study's axis columns (in the order the
experiments declare them), then the kind's own columns below.
"""

from __future__ import annotations

import csv
from pathlib import Path

from congestlab.errors import RunDirError

# round: the points of a unit measured side by side in time (the block to pair them on);
# block: which visit of the unit (1, 2: the mirrored passes); run_index: position in the run
# (spec/sweep.py planned_runs; empty for run directories from before the manifest recorded the order)
COMMON_COLUMNS = ["point_id", "experiment", "repetition", "round", "block", "run_index"]

# the run design's columns of a measured GET (workloads/get.py): an axis of that name would be
# overwritten by them in results/request.csv, so spec validation refuses such axes
DESIGN_COLUMNS = ["family_pair", "family_position", "family_order", "previous_closed", "previous_wait_ms"]

# columns a record fills with a setting it ran with (a GET's server, file and family, a flow's
# congestion control, the replay's weight): an axis may bear such a name only when it sets that
# same field (spec/axis_columns.py). Every other column of a kind is the record's own
# measurement or outcome, which no axis may be named like (it would overwrite the axis).
DESCRIPTIVE_COLUMNS = frozenset({
    "server", "client", "family", "file_kib", "timeout_s", "client_kind", "workload", "cls", "reversed",
    "requested_bps", "configured_mbps", "configured_fetches_per_s", "version", "protocol", "session", "cc",
    "requests", "source", "weight", "sampling", "live_settings", "threshold_s", "reading", "http", "tls",
})

KIND_COLUMNS: dict[str, list[str]] = {
    # the measured GETs, from the capture at the server's port (analysis/)
    "request": [
        "server", "client", "family", "file_kib", "outcome", "ok", "error", "timeout_s", "client_port", "start_ts",
        "delay_ms",
        "syn_to_last_ack_ms", "nrt_throughput_mbps", "captured_throughput_mbps", "goodput_mbps", "retransmissions",
        # frames of the GET's connection recorded twice in the capture, left out of its numbers
        "capture_duplicates",
        "rtt_mean_ms", "rtt_samples", "bytes_nrt", "bytes_captured", "payload_bytes", "curl_time_ms",
        "client_kind",
        # what the GET asked for and negotiated; curl's TLS handshake and request-to-last-byte
        # times; CPU per GET: the server's cgroup and the host's softirq time over it
        "http", "tls", "http_negotiated", "tls_version", "tls_handshake_ms", "request_to_last_byte_ms",
        "server_cpu_ms", "host_softirq_ms",
        # HTTP/3: what ended the GET in the capture ("ack" of the last byte, or the client's
        # "close" after the whole response: analysis/quic_capture.py); the QUIC sender's own qlog
        # (ngtcp2): "complete" or what is wrong with it, its lost packets, its largest cwnd
        "quic_end", "qlog", "qlog_packets_lost", "qlog_cwnd_max_bytes",
        # the run design (workloads/get.py): the families of one request in one repetition are
        # one pair; their order; whether the previous GET's connection had closed at its server
        # when this one started, and how long this one waited for it
        *DESIGN_COLUMNS,
    ],
    # every connection on a server's port during the repetition (stress, load and measured)
    "port": [
        "server", "connections", "interval_s", "captured_throughput_mbps", "nrt_throughput_mbps", "retransmissions",
        "capture_duplicates",
    ],
    # MGEN background per class, achieved at the sink during the measuring window
    "background": ["workload", "cls", "reversed", "requested_bps", "achieved_bps", "deviation_pct", "window_s",
                   "sent_bps", "loss_pct"],
    # dualbench load (http_load): what the load client configured, offered and received
    "load": [
        "workload", "client", "server", "family", "file_kib", "configured_mbps", "configured_fetches_per_s",
        "offered_fetches_per_s", "achieved_mbps", "shared_bandwidth_pct", "fetches_ok", "fetches_failed",
        "fetches_skipped", "latency_mean_ms", "window_s",
    ],
    # iperf sessions, as the receiving side reported them (cc: the spec's per-flow request;
    # cc_kernel: the algorithm `ss -ti` showed on the sender's connection, iperf3 only)
    "iperf": [
        "workload", "version", "client", "client_port", "server", "protocol", "session", "cc", "cc_kernel", "bytes",
        "seconds", "throughput_mbps", "udp_jitter_ms", "udp_lost", "udp_datagrams", "retransmits",
    ],
    # dualbench anma, per family (v6, v4, all)
    "anma": [
        "workload", "server", "family", "requests", "normal", "reset", "timeout", "refused", "other",
        "connect_mean_ms", "connect_p50_ms", "connect_p99_ms", "continuation_mean_ms", "continuation_p50_ms",
        "continuation_p90_ms", "latency_mean_ms", "throughput_mbps",
    ],
    # the offline RTO replay (analysis/rto_replay.py) of a lean server's RTT samples, per
    # source (log: leanweb's own, pcap: the capture's), weight (W1..W9) and sampling (all|one|some)
    "rto_bins": [
        "server", "source", "weight", "sampling", "live_settings", "connections", "samples",
        "rto_le_1s_rtt_le_rto_pct", "rto_le_1s_rtt_gt_rto_lt_1s_pct", "rto_le_1s_rtt_gt_rto_ge_1s_pct",
        "rto_gt_1s_rtt_lt_rto_pct", "rto_gt_1s_rtt_ge_rto_pct",
        # the same five against the RTO after the connection's previous sample (docs/rto-replay.md)
        "previous_sample_rto_le_1s_rtt_le_rto_pct", "previous_sample_rto_le_1s_rtt_gt_rto_lt_1s_pct",
        "previous_sample_rto_le_1s_rtt_gt_rto_ge_1s_pct", "previous_sample_rto_gt_1s_rtt_lt_rto_pct",
        "previous_sample_rto_gt_1s_rtt_ge_rto_pct",
    ],
    # ... and the share of samples a minimum RTO of threshold_s would keep from a spurious
    # retransmission, in both readings of Tables 34-35 (literal: RTT <= max(RTO, T); seed: RTO <= T)
    "rto_threshold": [
        "server", "source", "weight", "sampling", "live_settings", "threshold_s", "reading", "samples", "avoid_pct",
        "avoid_previous_sample_pct",
    ],
    # every replayed sample of the live weight and sampling (not the overrides)
    "rto_samples": [
        "server", "source", "weight", "sampling", "client_port", "sample", "sent_ts", "acked_ts", "rtt_us",
        "rto_unfloored_us", "rto_previous_sample_us", "rto_us", "logged_rto_us",
    ],
    "ping": [
        "workload", "client", "server", "family", "sent", "received", "loss", "rtt_min_ms", "rtt_avg_ms",
        "rtt_max_ms", "rtt_mdev_ms", "rtt_median_ms",
    ],
}
RESULTS_DIR = "results"


def result_path(run_dir: Path, kind: str) -> Path:
    return Path(run_dir) / RESULTS_DIR / f"{kind}.csv"


def columns(kind: str, axes: list[str]) -> list[str]:
    """An axis named like one of the kind's columns (e.g. `server`) is that column: the
    record's own value fills it where the record has one."""
    if kind not in KIND_COLUMNS:
        raise KeyError(f"unknown result kind {kind!r}")
    return COMMON_COLUMNS[:2] + axes + COMMON_COLUMNS[2:] + [c for c in KIND_COLUMNS[kind] if c not in axes]


def write_results(run_dir: Path, kind: str, axes: list[str], rows: list[dict]) -> Path:
    """Write one kind's table whole (written atomically: a reader never sees half a file)."""
    path = result_path(run_dir, kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns(kind, axes), extrasaction="raise")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(v) for k, v in row.items()})
    tmp.replace(path)
    return path


def read_results(run_dir: Path, kind: str) -> list[dict]:
    """Rows of one kind (strings, as CSV keeps them); [] when the run has none of that kind."""
    return [row for _, row in numbered_results(run_dir, kind)[1]]


def numbered_results(run_dir: Path, kind: str) -> tuple[list[str], list[tuple[int, dict]]]:
    """The header and (line number, row) of one kind's table; ([], []) when the run has none.
    A row with fewer fields than the header has None for the missing ones, one with more keeps
    the rest under the key None (csv.DictReader)."""
    path = result_path(run_dir, kind)
    if not path.exists():
        return [], []
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            rows = [(reader.line_num, row) for row in reader]
            return list(reader.fieldnames or []), rows
    except (OSError, csv.Error, UnicodeDecodeError) as err:
        raise RunDirError(f"{path}: unreadable ({err})") from None


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return round(value, 6)
    return value


def measured_columns() -> list[str]:
    """Every kind's columns that the record fills with its own measurement or outcome."""
    return sorted({c for cs in KIND_COLUMNS.values() for c in cs} - DESCRIPTIVE_COLUMNS - set(DESIGN_COLUMNS))
