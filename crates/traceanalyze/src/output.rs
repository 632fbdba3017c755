//! What the analyzer writes. Documented key by key in docs/trace-analysis.md.
//!
//! - the summary: NDJSON, one object per line, each with a `record` tag: one `header`, one
//!   `connection` per TCP connection (written when it is complete: at the end of the capture,
//!   or when its 4-tuple is reused), then one `port` and one `stats`;
//! - RTT samples: CSV `conn,ack_ts_ns,rtt_ns` (integers: exact, and cheap to write), one
//!   line per sample as it is taken;
//! - the per-flow series: CSV, one line per connection and time bin with packets in it.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use crate::error::TraceError;

pub const FORMAT: &str = "congestlab-traceanalyze";
pub const FORMAT_VERSION: u32 = 1;

pub const RTT_HEADER: &str = "conn,ack_ts_ns,rtt_ns";
pub const SERIES_HEADER: &str = "conn,bin_start_s,bin_s,server_bytes,client_bytes,server_payload_bytes,\
server_goodput_bytes,retransmissions,server_throughput_mbps,goodput_mbps,in_flight_max_bytes,in_flight_end_bytes";

#[derive(Debug, Clone, Serialize)]
pub struct HeaderRecord {
    pub record: &'static str,
    pub format: &'static str,
    pub version: u32,
    pub pcap: String,
    pub server_port: u16,
}

/// One TCP connection at the server port. The delay-window fields are null, and `error`
/// says why, when the connection has no request or no client ACK after it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ConnectionRecord {
    pub record: &'static str,
    pub conn: u64,
    pub family: &'static str,
    pub client: String,
    pub client_port: u16,
    pub server: String,
    pub server_port: u16,
    pub first_ts_s: f64,
    pub last_ts_s: f64,
    pub segments_from_client: u64,
    pub segments_from_server: u64,
    pub bytes_from_client: u64,
    pub bytes_from_server: u64,
    pub payload_bytes_from_client: u64,
    pub payload_bytes_from_server: u64,
    pub unique_payload_bytes_from_client: u64,
    pub unique_payload_bytes_from_server: u64,
    pub retransmissions: u64,
    /// Frames of the connection recorded twice (crate::dedup), left out of every other field.
    pub capture_duplicates: u64,
    pub rtt_samples: u64,
    pub rtt_mean_ms: Option<f64>,
    pub rtt_min_ms: Option<f64>,
    pub rtt_max_ms: Option<f64>,
    pub error: Option<&'static str>,
    pub request_ts_s: Option<f64>,
    pub last_ack_ts_s: Option<f64>,
    pub syn_ts_s: Option<f64>,
    pub delay_ms: Option<f64>,
    pub syn_to_last_ack_ms: Option<f64>,
    pub bytes_captured: Option<u64>,
    pub bytes_nrt: Option<u64>,
    pub payload_bytes: Option<u64>,
    pub captured_throughput_mbps: Option<f64>,
    pub nrt_throughput_mbps: Option<f64>,
    pub goodput_mbps: Option<f64>,
    /// Server payload bytes beyond the highest acknowledgment the client sent (0: the
    /// client acknowledged the last data in the capture).
    pub server_data_unacked_bytes: i64,
}

/// Everything at the server port inside one interval, both directions.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PortRecord {
    pub record: &'static str,
    pub server_port: u16,
    pub window_start_s: Option<f64>,
    pub window_end_s: Option<f64>,
    pub interval_s: f64,
    pub connections: u64,
    pub segments: u64,
    pub bytes_to_server: u64,
    pub bytes_from_server: u64,
    pub payload_bytes_from_server: u64,
    pub unique_payload_bytes_from_server: u64,
    /// Frame bytes of both directions without retransmitted segments.
    pub bytes_nrt: u64,
    pub retransmissions: u64,
    /// Capture duplicates of segments in the interval, left out of the fields above.
    pub capture_duplicates: u64,
    pub throughput_mbps: f64,
    pub nrt_throughput_mbps: f64,
    pub from_server_mbps: f64,
    pub goodput_mbps: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatsRecord {
    pub record: &'static str,
    pub frames: u64,
    pub tcp_segments: u64,
    pub segments_at_port: u64,
    pub skipped: BTreeMap<String, u64>,
    pub malformed: u64,
    /// Frames recorded twice (crate::dedup): in `frames`, in nothing else.
    pub capture_duplicates: u64,
    pub truncated: bool,
    pub stop_reason: Option<String>,
    pub connections: u64,
    pub elapsed_s: f64,
}

pub fn ndjson<W: Write + ?Sized, T: Serialize>(out: &mut W, record: &T) -> Result<(), TraceError> {
    serde_json::to_writer(&mut *out, record).map_err(|e| TraceError::Write {
        what: "summary",
        source: e.into(),
    })?;
    out.write_all(b"\n").map_err(TraceError::write("summary"))
}

pub fn seconds(ts_ns: i64) -> f64 {
    // split so that epoch seconds keep their sub-microsecond part
    (ts_ns.div_euclid(1_000_000_000)) as f64 + (ts_ns.rem_euclid(1_000_000_000)) as f64 / 1e9
}

pub fn mbps(bytes: u64, interval_ns: i64) -> f64 {
    if interval_ns <= 0 {
        0.0
    } else {
        bytes as f64 * 8.0 / (interval_ns as f64 / 1e9) / 1e6
    }
}
