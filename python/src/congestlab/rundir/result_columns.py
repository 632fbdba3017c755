"""What a value of each results/<kind>.csv column may be (docs/data-format.md, "results/<kind>.csv"),
and which columns make a row one measurement: the results are derived data, and a reader checks
them against this before it trusts them (stored/result_check.py).

A number must be finite and physical: not below its column's floor (a delay, a rate, a count
cannot be negative) and not above its ceiling. The ceilings are far beyond any measurement
(a day for a time in ms, 1 Tbit/s for a rate): they only refuse a number no run can give,
e.g. a delay of 300 digits. An empty cell is a value the record does not have.
"""

from __future__ import annotations

from dataclasses import dataclass

from congestlab.rundir.records import PASS_THROUGH_KEYS
from congestlab.stats.outcomes import OUTCOMES

DAY_S = 86_400.0


@dataclass(frozen=True)
class ColumnType:
    kind: str  # "text", "bool", "int", "number"
    low: float | None = None
    high: float | None = None
    what: str = ""
    choices: tuple[str, ...] = ()


TEXT = ColumnType("text")
BOOL = ColumnType("bool")
COUNT = ColumnType("int", 0, 1e12, "a count")
PORT = ColumnType("int", 0, 65_535, "a port")
INDEX = ColumnType("int", 0, 1e9, "an index")
MS = ColumnType("number", 0, DAY_S * 1e3, "a time in ms")
US = ColumnType("number", 0, DAY_S * 1e6, "a time in µs")
SECONDS = ColumnType("number", 0, 10 * DAY_S, "a time in s")
EPOCH_S = ColumnType("number", 0, 4_102_444_800, "a time in epoch s (before 2100)")
MBPS = ColumnType("number", 0, 1e6, "a rate in Mbit/s")
BPS = ColumnType("number", 0, 1e12, "a rate in bit/s")
BYTES = ColumnType("number", 0, 1e15, "a number of bytes")
RATE = ColumnType("number", 0, 1e9, "a rate per second")
PCT = ColumnType("number", 0, 100, "a percentage")
SHARE_PCT = ColumnType("number", 0, 1e6, "a percentage")
SIGNED_PCT = ColumnType("number", -1e6, 1e6, "a percentage")
FRACTION = ColumnType("number", 0, 1, "a fraction")

COLUMN_TYPES: dict[str, ColumnType] = {
    # every kind's common columns (results.py COMMON_COLUMNS)
    "point_id": TEXT, "experiment": TEXT, "repetition": ColumnType("int", 1, 1e9, "a repetition"),
    "round": TEXT, "block": ColumnType("int", 1, 1e9, "a block"), "run_index": INDEX,
    # request
    "server": TEXT, "client": TEXT, "family": TEXT, "file_kib": COUNT,
    "outcome": ColumnType("text", choices=OUTCOMES), "ok": BOOL, "error": TEXT, "timeout_s": SECONDS,
    "client_port": PORT, "start_ts": EPOCH_S, "delay_ms": MS, "syn_to_last_ack_ms": MS,
    "nrt_throughput_mbps": MBPS, "captured_throughput_mbps": MBPS, "goodput_mbps": MBPS,
    "retransmissions": COUNT, "rtt_mean_ms": MS, "rtt_samples": COUNT, "bytes_nrt": BYTES,
    "bytes_captured": BYTES, "payload_bytes": BYTES, "curl_time_ms": MS, "client_kind": TEXT,
    "family_pair": TEXT, "family_position": INDEX, "family_order": TEXT, "previous_closed": BOOL,
    "previous_wait_ms": MS,
    # port
    "connections": COUNT, "interval_s": SECONDS,
    # background
    "workload": TEXT, "cls": TEXT, "reversed": BOOL, "requested_bps": BPS, "achieved_bps": BPS,
    "deviation_pct": SIGNED_PCT, "window_s": SECONDS, "sent_bps": BPS, "loss_pct": PCT,
    # load
    "configured_mbps": MBPS, "configured_fetches_per_s": RATE, "offered_fetches_per_s": RATE,
    "achieved_mbps": MBPS, "shared_bandwidth_pct": SHARE_PCT, "fetches_ok": COUNT, "fetches_failed": COUNT,
    "fetches_skipped": COUNT, "latency_mean_ms": MS,
    # iperf
    "version": COUNT, "protocol": TEXT, "session": INDEX, "cc": TEXT, "cc_kernel": TEXT, "bytes": BYTES,
    "seconds": SECONDS, "throughput_mbps": MBPS, "udp_jitter_ms": MS, "udp_lost": COUNT,
    "udp_datagrams": COUNT, "retransmits": COUNT,
    # anma
    "requests": COUNT, "normal": COUNT, "reset": COUNT, "timeout": COUNT, "refused": COUNT, "other": COUNT,
    "connect_mean_ms": MS, "connect_p50_ms": MS, "connect_p99_ms": MS, "continuation_mean_ms": MS,
    "continuation_p50_ms": MS, "continuation_p90_ms": MS,
    # the RTO replay
    "source": TEXT, "weight": TEXT, "sampling": TEXT, "live_settings": BOOL, "samples": COUNT,
    "threshold_s": SECONDS, "reading": TEXT, "avoid_pct": PCT, "avoid_previous_sample_pct": PCT,
    "sample": INDEX, "sent_ts": EPOCH_S, "acked_ts": EPOCH_S, "rtt_us": US, "rto_unfloored_us": US,
    "rto_previous_sample_us": US, "rto_us": US, "logged_rto_us": US,
    # ping
    "sent": COUNT, "received": COUNT, "loss": FRACTION, "rtt_min_ms": MS, "rtt_avg_ms": MS, "rtt_max_ms": MS,
    "rtt_mdev_ms": MS, "rtt_median_ms": MS,
}
# Table 6's bins (results.py KIND_COLUMNS["rto_bins"]): shares of the samples
for _bin in ("rto_le_1s_rtt_le_rto_pct", "rto_le_1s_rtt_gt_rto_lt_1s_pct", "rto_le_1s_rtt_gt_rto_ge_1s_pct",
             "rto_gt_1s_rtt_lt_rto_pct", "rto_gt_1s_rtt_ge_rto_pct"):
    COLUMN_TYPES[_bin] = COLUMN_TYPES["previous_sample_" + _bin] = PCT

# Beside point_id and repetition, the columns that make a row one measurement: two rows of a
# table with the same values there are one measurement written twice
ROW_KEYS: dict[str, tuple[str, ...]] = {
    "request": ("server", "client", "family", "family_pair", "start_ts"),
    "port": ("server",),
    **PASS_THROUGH_KEYS,
    "rto_bins": ("server", "source", "weight", "sampling"),
    "rto_threshold": ("server", "source", "weight", "sampling", "threshold_s", "reading"),
    "rto_samples": ("server", "source", "weight", "sampling", "client_port", "sample", "sent_ts"),
}
