//! The event log's lines about connections (`--log`, crates/leanweb/src/log.rs): `open`,
//! `close`, `request` and each connection event leantcp reports. Only this layer knows
//! their fields; the others hand it what happened.
use leantcp::{Connection, Event, Instant};
use serde_json::{json, Value};

use super::segment_lines::{AckLine, RttSampleLine};
use super::tcp_demux::Key;
use crate::log::EventLog;

/// What the peer's SYN offered, for the `open` line.
pub(super) struct Peer {
    pub(super) mss: Option<u16>,
    pub(super) window_scale: Option<u8>,
    /// Made from a valid cookie ACK, not a half-open entry.
    pub(super) syn_cookie: bool,
}

pub(super) fn log_open(log: &mut EventLog, id: u64, (local, remote): Key, peer: Peer, now: Instant) {
    let family = if remote.is_ipv4() { "ipv4" } else { "ipv6" };
    let mut fields = json!({"conn": id, "peer": remote.to_string(), "local": local.to_string(), "family": family,
                            "peer_mss": peer.mss, "peer_window_scale": peer.window_scale});
    if peer.syn_cookie {
        fields["syn_cookie"] = true.into();
    }
    log.write(now.as_micros(), "open", fields);
}

/// The connection's totals, with the state it ends in.
pub(super) fn log_close(log: &mut EventLog, id: u64, conn: &Connection, now: Instant) {
    let s = conn.stats();
    let fields = json!({
        "conn": id, "peer": conn.remote().to_string(), "state": conn.state().name(),
        "bytes_sent": s.bytes_sent, "bytes_acked": s.bytes_acked, "bytes_retransmitted": s.bytes_retransmitted,
        "bytes_received": s.bytes_received, "segments_sent": s.segments_sent,
        "segments_received": s.segments_received, "retransmissions": s.retransmissions, "timeouts": s.timeouts,
        "rtt_samples": s.rtt_samples, "duplicate_acks": s.duplicate_acks, "events_dropped": s.events_dropped,
        "timestamp_rtt_samples": s.timestamp_rtt_samples, "recoveries": s.recoveries,
        "tail_loss_probes": s.tail_loss_probes, "rack_marked_lost": s.rack_marked_lost,
        "out_of_order_segments": s.out_of_order_segments, "sack": conn.sack_in_use(),
        "timestamps": conn.timestamps_in_use(), "recovery": conn.recovery_name(),
        "send_buffer_bytes": conn.send_buffer_bytes(),
    });
    log.write(now.as_micros(), "close", fields);
}

/// A request answered: its status (and method, path and size when it parsed).
pub(super) fn log_request(log: &mut EventLog, id: u64, mut fields: Value, now: Instant) {
    fields["conn"] = id.into();
    log.write(now.as_micros(), "request", fields);
}

/// Drains the connection's events into the log (or away, with no log).
pub(super) fn log_events(log: &mut EventLog, id: u64, conn: &mut Connection, now: Instant) {
    if !log.enabled() {
        while conn.poll_event().is_some() {}
        return;
    }
    let t = now.as_micros();
    while let Some(event) = conn.poll_event() {
        match event {
            Event::RttSample { rtt_us, srtt_us, rttvar_us, rto_us } => {
                let event = "rtt_sample";
                let unix_us = log.unix_us(t);
                log.write_line(&RttSampleLine { conn: id, event, rto_us, rtt_us, rttvar_us, srtt_us, t_us: t, unix_us })
            }
            Event::Timeout { rto_us, backoff_shift, outstanding_bytes } => {
                let fields = json!({"conn": id, "rto_us": rto_us, "backoff_shift": backoff_shift,
                                    "outstanding_bytes": outstanding_bytes});
                log.write(t, "timeout", fields)
            }
            // Logged as `tx` when the frame is written, not when the segment is made.
            Event::Retransmit { .. } => {}
            Event::NewAck { ack, at, cwnd_bytes } => {
                let (at_us, unix_us) = (at.as_micros(), log.unix_us(t));
                log.write_line(&AckLine { ack, at_us, conn: id, cwnd_bytes, event: "ack", t_us: t, unix_us })
            }
            Event::Recovery { entered, cwnd_bytes, ssthresh_bytes } => {
                let fields = json!({"conn": id, "entered": entered, "cwnd_bytes": cwnd_bytes,
                                    "ssthresh_bytes": ssthresh_bytes});
                log.write(t, "recovery", fields)
            }
            Event::CcPhase { phase, cwnd_bytes, ssthresh_bytes } => {
                let fields = json!({"conn": id, "phase": phase, "cwnd_bytes": cwnd_bytes,
                                    "ssthresh_bytes": ssthresh_bytes});
                log.write(t, "cc_phase", fields)
            }
            Event::TailLossProbe { seq, retransmission } => {
                log.write(t, "tail_loss_probe", json!({"conn": id, "seq": seq, "retransmission": retransmission}))
            }
            Event::ZeroWindowProbe { seq } => log.write(t, "zero_window_probe", json!({"conn": id, "seq": seq})),
            Event::StateChanged { from, to } => {
                log.write(t, "state", json!({"conn": id, "from": from.name(), "to": to.name()}))
            }
            Event::ResetReceived => log.write(t, "reset_received", json!({"conn": id})),
            Event::Aborted { reason } => log.write(t, "aborted", json!({"conn": id, "reason": reason})),
        }
    }
}
