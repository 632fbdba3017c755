//! The log lines written once per segment (`tx`) and per ACK (`ack`, `rtt_sample`) as plain
//! structs: serialised straight to the log's buffer instead of through a `serde_json::Value`
//! map, which cost about a sixth of leanweb's CPU per frame (docs/notes/leantcp-sending-speed.md).
//! Fields are declared in alphabetical order so each line is byte for byte what
//! `EventLog::write` made of the same fields (tests in stack/tests.rs compare the two).
use leantcp::{RetransmitKind, Transmission};
use serde::Serialize;

#[derive(Serialize)]
pub(super) struct TxLine {
    pub conn: u64,
    pub event: &'static str,
    pub fin: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub go_back_n: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub len: usize,
    pub retransmission: bool,
    pub rto_unfloored_us: Option<f64>,
    pub rto_us: u64,
    pub rttvar_us: u64,
    pub sent_us: u64,
    pub seq: u32,
    pub srtt_us: Option<u64>,
    pub syn: bool,
    pub t_us: u64,
    pub unix_us: u64,
}

impl TxLine {
    /// `tx` (handed to the kernel) or `tx_dropped` (the TAP queue was full).
    pub fn new(conn: u64, x: &Transmission, written: bool, t_us: u64, unix_us: u64) -> TxLine {
        let retransmission_kind = x.retransmission.then_some(x.kind);
        TxLine {
            conn,
            event: if written { "tx" } else { "tx_dropped" },
            fin: x.fin,
            go_back_n: retransmission_kind.map(|k| k == RetransmitKind::GoBackN),
            kind: retransmission_kind.map(RetransmitKind::name),
            len: x.payload_len,
            retransmission: x.retransmission,
            rto_unfloored_us: x.rto_unfloored_us,
            rto_us: x.rto_us,
            rttvar_us: x.rttvar_us,
            sent_us: x.sent_at.as_micros(),
            seq: x.seq,
            srtt_us: x.srtt_us,
            syn: x.syn,
            t_us,
            unix_us,
        }
    }
}

#[derive(Serialize)]
pub(super) struct AckLine {
    pub ack: u32,
    pub at_us: u64,
    pub conn: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwnd_bytes: Option<usize>,
    pub event: &'static str,
    pub t_us: u64,
    pub unix_us: u64,
}

#[derive(Serialize)]
pub(super) struct RttSampleLine {
    pub conn: u64,
    pub event: &'static str,
    pub rto_us: u64,
    pub rtt_us: u64,
    pub rttvar_us: u64,
    pub srtt_us: u64,
    pub t_us: u64,
    pub unix_us: u64,
}
