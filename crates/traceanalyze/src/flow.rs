//! One TCP connection's state, updated segment by segment, and its summary. The metrics are
//! those of python/src/congestlab/analysis/metrics.py (`measure_connection`), computed in
//! one pass:
//!
//! - delay: from the request (the client's first segment with payload) to the last client
//!   ACK (not FIN, not RST) before the client's FIN;
//! - captured / NRT bytes: frames of both directions from the request to that ACK, with and
//!   without retransmitted segments; payload bytes: the server's new payload up to that ACK;
//! - retransmissions: segments with payload whose bytes were all or partly seen before;
//! - RTT samples: server data -> first client ACK covering it, none for resent bytes (Karn).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::decode::{Family, Segment};
use crate::output::{mbps, seconds, ConnectionRecord};
use crate::segment_trace::{sack_blocks, window_scale, TraceRow, TraceState};
use crate::seq::{ByteRanges, RttTracker, Unwrap};

pub const NO_REQUEST: &str = "no request from the client";
pub const NO_ACK: &str = "no client ACK after the request";
pub const NON_POSITIVE_DELAY: &str = "non-positive delay";

const CLIENT: usize = 0;
const SERVER: usize = 1;

/// The running sums at one qualifying client ACK.
#[derive(Debug, Clone, Copy)]
struct AckSnapshot {
    ts_ns: i64,
    bytes_captured: u64,
    bytes_nrt: u64,
    payload_bytes: u64,
    is_request: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct DirTotals {
    segments: u64,
    bytes: u64,
    payload: u64,
    unique_payload: u64,
}

/// One time bin of a flow's series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeriesBin {
    /// The bin is [index * width_ns, (index + 1) * width_ns) in capture time.
    pub index: i64,
    pub width_ns: i64,
    pub server_bytes: u64,
    pub client_bytes: u64,
    pub server_payload_bytes: u64,
    pub server_goodput_bytes: u64,
    pub retransmissions: u64,
    pub in_flight_max_bytes: i64,
    pub in_flight_end_bytes: i64,
}

/// What one segment did to its connection, for the port aggregate.
#[derive(Debug, Clone, Copy)]
pub struct SegmentEffect {
    pub from_client: bool,
    pub retransmitted: bool,
}

#[derive(Debug, Clone)]
pub struct Connection {
    pub id: u64,
    pub family: Family,
    pub client: [u8; 16],
    pub client_port: u16,
    pub server: [u8; 16],
    pub server_port: u16,
    pub first_ns: i64,
    pub last_ns: i64,
    /// A FIN or RST seen in either direction: a later fresh SYN starts a new connection.
    pub closing: bool,
    /// Already counted in the port aggregate's connections.
    pub in_window: bool,
    /// Capture duplicates of this connection's segments (dedup.rs): left out of everything else.
    pub capture_duplicates: u64,
    seq: [Unwrap; 2],
    seen: [ByteRanges; 2],
    totals: [DirTotals; 2],
    syn_ns: Option<i64>,
    request_ns: Option<i64>,
    request_fin_seen: bool,
    cum_captured: u64,
    cum_nrt: u64,
    cum_payload: u64,
    last_ack: Option<AckSnapshot>,
    retransmissions: u64,
    rtt: RttTracker,
    rtt_count: u64,
    rtt_sum_ns: i128,
    rtt_min_ns: i64,
    rtt_max_ns: i64,
    // in flight: highest server sequence sent minus highest client ACK
    snd_max: Option<i64>,
    ack_max: Option<i64>,
    /// End of the highest server payload byte (no SYN or FIN): the completeness check's
    /// "last data" (did the client acknowledge it?).
    data_end: Option<i64>,
    // the client sent its FIN or RST: server data after it is not counted in data_end
    client_closed: bool,
    // data_end when the client last spoke with all of it acknowledged (its closing)
    data_end_at_client_close: Option<i64>,
    bin: Option<SeriesBin>,
    /// Set for a traced connection (a measured GET's): its time-sequence rows.
    pub trace: Option<Box<TraceState>>,
}

impl Connection {
    pub fn new(
        id: u64,
        seg: &Segment,
        client: [u8; 16],
        client_port: u16,
        server: [u8; 16],
        server_port: u16,
    ) -> Self {
        Connection {
            id,
            family: seg.family,
            client,
            client_port,
            server,
            server_port,
            first_ns: seg.ts_ns,
            last_ns: seg.ts_ns,
            closing: false,
            in_window: false,
            capture_duplicates: 0,
            seq: Default::default(),
            seen: Default::default(),
            totals: Default::default(),
            syn_ns: None,
            request_ns: None,
            request_fin_seen: false,
            cum_captured: 0,
            cum_nrt: 0,
            cum_payload: 0,
            last_ack: None,
            retransmissions: 0,
            rtt: RttTracker::default(),
            rtt_count: 0,
            rtt_sum_ns: 0,
            rtt_min_ns: i64::MAX,
            rtt_max_ns: i64::MIN,
            snd_max: None,
            ack_max: None,
            data_end: None,
            client_closed: false,
            data_end_at_client_close: None,
            bin: None,
            trace: None,
        }
    }

    /// The end of the server data the client owes an ACK for: up to its closing once it
    /// closed (python/src/congestlab/analysis/metrics.py server_data_unacked).
    fn owed_data_end(&self) -> Option<i64> {
        match (self.client_closed, self.data_end_at_client_close) {
            (true, Some(end)) => Some(end),
            _ => self.data_end,
        }
    }

    pub fn from_client(&self, seg: &Segment) -> bool {
        seg.src == self.client && seg.sport == self.client_port
    }

    /// Adds one segment. `on_rtt(ack_ts_ns, rtt_ns)` receives each RTT sample; with `bin_ns`,
    /// `on_bin` receives each finished series bin.
    pub fn update(
        &mut self,
        seg: &Segment,
        mut on_rtt: impl FnMut(i64, i64),
        bin_ns: Option<i64>,
        mut on_bin: impl FnMut(&SeriesBin),
    ) -> SegmentEffect {
        let from_client = self.from_client(seg);
        let d = if from_client { CLIENT } else { SERVER };
        self.last_ns = seg.ts_ns;
        if seg.fin() || seg.rst() {
            self.closing = true;
            self.client_closed |= from_client;
        }
        // the client speaks with every byte so far acknowledged: its closing (a TLS
        // close_notify, an HTTP/2 GOAWAY); server data after it is owed no ACK
        if from_client && seg.payload_len > 0 && !self.client_closed {
            if let (Some(end), Some(acked)) = (self.data_end, self.ack_max) {
                if acked >= end {
                    self.data_end_at_client_close = Some(end);
                }
            }
        }
        let off = self.seq[d].offset(seg.seq);
        let length = i64::from(seg.payload_len) + i64::from(seg.syn()) + i64::from(seg.fin());
        let retransmitted = length > 0 && self.seen[d].add(off, off + length);
        let payload = u64::from(seg.payload_len);
        let frame = u64::from(seg.frame_len);

        let totals = &mut self.totals[d];
        totals.segments += 1;
        totals.bytes += frame;
        totals.payload += payload;
        if !retransmitted {
            totals.unique_payload += payload;
        }
        if retransmitted && payload > 0 {
            self.retransmissions += 1;
        }
        if from_client && seg.syn() && self.syn_ns.is_none() {
            self.syn_ns = Some(seg.ts_ns);
        }

        // the delay window: request .. last client ACK before the client's FIN
        if !from_client && payload > 0 && !retransmitted {
            self.cum_payload += payload;
        }
        let is_request = from_client && payload > 0 && self.request_ns.is_none();

        if is_request {
            self.request_ns = Some(seg.ts_ns);
        }
        if self.request_ns.is_some() && !self.request_fin_seen {
            self.cum_captured += frame;
            if !retransmitted {
                self.cum_nrt += frame;
            }
            if from_client && seg.fin() && !is_request {
                self.request_fin_seen = true;
            } else if from_client
                && seg.has_ack()
                && !seg.fin()
                && !seg.rst()
                && (payload == 0 || is_request)
            {
                // an ACK without payload: a TLS close_notify before the FIN is the client's
                // closing, which may come long after the body (docs/data-format.md)
                self.last_ack = Some(AckSnapshot {
                    ts_ns: seg.ts_ns,
                    bytes_captured: self.cum_captured,
                    bytes_nrt: self.cum_nrt,
                    payload_bytes: self.cum_payload,
                    is_request,
                });
            }
        }

        // RTT samples (Karn) and in-flight bytes
        let mut rtt_taken = None;
        if !from_client {
            if payload > 0 {
                self.rtt
                    .on_server_data(off, off + payload as i64, seg.ts_ns, retransmitted);
                // data after the client's FIN or RST is owed no ACK (a TLS close_notify
                // answering the client's; python/src/congestlab/analysis/metrics.py)
                if !self.client_closed {
                    let end = off + i64::from(seg.payload_len) + i64::from(seg.syn());
                    self.data_end = Some(self.data_end.map_or(end, |m| m.max(end)));
                }
            }
            if length > 0 {
                self.snd_max = Some(self.snd_max.map_or(off + length, |m| m.max(off + length)));
            }
        } else if seg.has_ack() {
            if let Some(ack_off) = self.seq[SERVER].nearest(seg.ack) {
                let (count, sum, min, max) = (
                    &mut self.rtt_count,
                    &mut self.rtt_sum_ns,
                    &mut self.rtt_min_ns,
                    &mut self.rtt_max_ns,
                );
                self.rtt.on_client_ack(ack_off, seg.ts_ns, |rtt_ns| {
                    *count += 1;
                    *sum += i128::from(rtt_ns);
                    *min = (*min).min(rtt_ns);
                    *max = (*max).max(rtt_ns);
                    rtt_taken = Some(rtt_ns);
                    on_rtt(seg.ts_ns, rtt_ns);
                });
                self.ack_max = Some(self.ack_max.map_or(ack_off, |m| m.max(ack_off)));
            }
        }

        if let Some(bin_ns) = bin_ns {
            let index = seg.ts_ns.div_euclid(bin_ns);
            if let Some(bin) = self.bin.as_ref() {
                if bin.index != index {
                    on_bin(bin);
                    self.bin = None;
                }
            }
            let in_flight = self.in_flight_bytes();
            let bin = self.bin.get_or_insert(SeriesBin {
                index,
                width_ns: bin_ns,
                ..Default::default()
            });
            if from_client {
                bin.client_bytes += frame;
            } else {
                bin.server_bytes += frame;
                bin.server_payload_bytes += payload;
                if !retransmitted {
                    bin.server_goodput_bytes += payload;
                }
            }
            if retransmitted && payload > 0 {
                bin.retransmissions += 1;
            }
            bin.in_flight_max_bytes = bin.in_flight_max_bytes.max(in_flight);
            bin.in_flight_end_bytes = in_flight;
        }
        if self.trace.is_some() {
            self.trace_segment(seg, d, off, length, retransmitted, rtt_taken);
        }
        SegmentEffect {
            from_client,
            retransmitted,
        }
    }

    /// The trace row of `seg` (sent by direction `d`, at sequence offset `off`).
    fn trace_segment(
        &mut self,
        seg: &Segment,
        d: usize,
        off: i64,
        length: i64,
        retransmitted: bool,
        rtt_ns: Option<i64>,
    ) {
        let in_flight_bytes = self.in_flight_bytes();
        let peer = &self.seq[1 - d];
        let Some(trace) = self.trace.as_mut() else {
            return;
        };
        if seg.syn() {
            trace.wscale[d] = window_scale(seg);
        }
        // RFC 7323: windows are scaled only when both SYNs offered it, and never in a SYN
        let shift = match trace.wscale {
            [Some(c), Some(s)] if !seg.syn() => [c, s][d],
            _ => 0,
        };
        let (edges, sack_count) = sack_blocks(seg);
        let mut sack = [(0, 0); 4];
        let mut kept = 0u8;
        for &(left, right) in &edges[..usize::from(sack_count)] {
            if let (Some(l), Some(r)) = (peer.nearest(left), peer.nearest(right)) {
                sack[usize::from(kept)] = (l, r);
                kept += 1;
            }
        }
        trace.row = Some(TraceRow {
            ts_ns: seg.ts_ns,
            from_client: d == CLIENT,
            flags: seg.flags,
            seq_off: off,
            end_off: off + length,
            payload_bytes: seg.payload_len,
            retransmitted,
            ack_off: if seg.has_ack() {
                peer.nearest(seg.ack)
            } else {
                None
            },
            rwnd_bytes: u64::from(seg.window) << shift,
            sack,
            sack_count: kept,
            in_flight_bytes,
            rtt_ns,
        });
    }

    /// Server bytes sent and not yet acknowledged (0 before the server sent anything).
    pub fn in_flight_bytes(&self) -> i64 {
        match (self.snd_max, self.ack_max) {
            (Some(snd), Some(ack)) => (snd - ack).max(0),
            (Some(snd), None) => snd.max(0),
            _ => 0,
        }
    }

    /// The series bin still open, if any (call once, at the end of the connection).
    pub fn take_bin(&mut self) -> Option<SeriesBin> {
        self.bin.take()
    }

    pub fn summary(&self) -> ConnectionRecord {
        let addr = |a: &[u8; 16]| match self.family {
            Family::V4 => Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string(),
            Family::V6 => Ipv6Addr::from(*a).to_string(),
        };
        let c = &self.totals[CLIENT];
        let s = &self.totals[SERVER];
        let ms = |ns: i64| ns as f64 / 1e6;
        let mut rec = ConnectionRecord {
            record: "connection",
            conn: self.id,
            family: self.family.as_str(),
            client: addr(&self.client),
            client_port: self.client_port,
            server: addr(&self.server),
            server_port: self.server_port,
            first_ts_s: seconds(self.first_ns),
            last_ts_s: seconds(self.last_ns),
            segments_from_client: c.segments,
            segments_from_server: s.segments,
            bytes_from_client: c.bytes,
            bytes_from_server: s.bytes,
            payload_bytes_from_client: c.payload,
            payload_bytes_from_server: s.payload,
            unique_payload_bytes_from_client: c.unique_payload,
            unique_payload_bytes_from_server: s.unique_payload,
            retransmissions: self.retransmissions,
            capture_duplicates: self.capture_duplicates,
            rtt_samples: self.rtt_count,
            rtt_mean_ms: (self.rtt_count > 0)
                .then(|| self.rtt_sum_ns as f64 / self.rtt_count as f64 / 1e6),
            rtt_min_ms: (self.rtt_count > 0).then(|| ms(self.rtt_min_ns)),
            rtt_max_ms: (self.rtt_count > 0).then(|| ms(self.rtt_max_ns)),
            error: None,
            request_ts_s: self.request_ns.map(seconds),
            last_ack_ts_s: None,
            syn_ts_s: self.syn_ns.map(seconds),
            delay_ms: None,
            syn_to_last_ack_ms: None,
            bytes_captured: None,
            bytes_nrt: None,
            payload_bytes: None,
            captured_throughput_mbps: None,
            nrt_throughput_mbps: None,
            goodput_mbps: None,
            server_data_unacked_bytes: match (self.owed_data_end(), self.ack_max) {
                (Some(end), Some(acked)) => (end - acked).max(0),
                (Some(end), None) => end.max(0),
                (None, _) => 0,
            },
        };
        let Some(request_ns) = self.request_ns else {
            rec.error = Some(NO_REQUEST);
            return rec;
        };
        let ack = match self.last_ack {
            Some(ack) if !ack.is_request => ack,
            _ => {
                rec.error = Some(NO_ACK);
                return rec;
            }
        };
        let delay_ns = ack.ts_ns - request_ns;
        if delay_ns <= 0 {
            rec.error = Some(NON_POSITIVE_DELAY);
            return rec;
        }
        rec.last_ack_ts_s = Some(seconds(ack.ts_ns));
        rec.delay_ms = Some(ms(delay_ns));
        rec.syn_to_last_ack_ms = self.syn_ns.map(|syn| ms(ack.ts_ns - syn));
        rec.bytes_captured = Some(ack.bytes_captured);
        rec.bytes_nrt = Some(ack.bytes_nrt);
        rec.payload_bytes = Some(ack.payload_bytes);
        rec.captured_throughput_mbps = Some(mbps(ack.bytes_captured, delay_ns));
        rec.nrt_throughput_mbps = Some(mbps(ack.bytes_nrt, delay_ns));
        rec.goodput_mbps = Some(mbps(ack.payload_bytes, delay_ns));
        rec
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{ACK, FIN, RST, SYN};

    const C: [u8; 16] = [10, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    const S: [u8; 16] = [10, 0, 4, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    const MS: i64 = 1_000_000;

    /// A segment at `t_ms`, sequence numbers relative to ISNs 1000 (client) and u32::MAX - 5000
    /// (server: wraps inside the transfer).
    fn seg(
        t_ms: i64,
        from_client: bool,
        seq_off: u32,
        ack_off: u32,
        flags: u8,
        payload: u32,
    ) -> Segment {
        let (ci, si) = (1000u32, u32::MAX - 5000);
        let (src, dst, sport, dport) = if from_client {
            (C, S, 40000, 80)
        } else {
            (S, C, 80, 40000)
        };
        let (seq, ack) = if from_client {
            (ci.wrapping_add(seq_off), si.wrapping_add(ack_off))
        } else {
            (si.wrapping_add(seq_off), ci.wrapping_add(ack_off))
        };
        Segment {
            ts_ns: t_ms * MS,
            family: Family::V4,
            src,
            dst,
            sport,
            dport,
            seq,
            ack,
            flags,
            payload_len: payload,
            frame_len: 66 + payload,
            window: 1000,
            options: [0; crate::decode::MAX_OPTION_BYTES],
            options_len: 0,
        }
    }

    fn run(segs: &[Segment]) -> (ConnectionRecord, Vec<i64>, Vec<SeriesBin>) {
        let mut conn = Connection::new(0, &segs[0], C, 40000, S, 80);
        let mut rtts = Vec::new();
        let mut bins = Vec::new();
        for s in segs {
            conn.update(s, |_, r| rtts.push(r), Some(10 * MS), |b| bins.push(*b));
        }
        bins.extend(conn.take_bin());
        (conn.summary(), rtts, bins)
    }

    /// Handshake, 100-byte request, 4 x 1000 bytes (the third lost and resent), ACKs, FIN.
    fn transfer() -> Vec<Segment> {
        vec![
            seg(0, true, 0, 0, SYN, 0),
            seg(1, false, 0, 1, SYN | ACK, 0),
            seg(2, true, 1, 1, ACK, 0),
            seg(3, true, 1, 1, ACK, 100), // request
            seg(5, false, 1, 101, ACK, 1000),
            seg(5, false, 1001, 101, ACK, 1000),
            seg(5, false, 2001, 101, ACK, 1000), // lost downstream
            seg(5, false, 3001, 101, ACK, 1000),
            seg(7, true, 101, 2001, ACK, 0),
            seg(7, true, 101, 2001, ACK, 0),      // duplicate
            seg(12, false, 2001, 101, ACK, 1000), // resent
            seg(14, true, 101, 4001, ACK, 0),     // last ACK before FIN
            seg(20, true, 101, 4001, FIN | ACK, 0),
            seg(21, false, 4001, 102, FIN | ACK, 0),
            seg(22, true, 102, 4002, ACK, 0),
        ]
    }

    #[test]
    fn delay_window_bytes_and_karn() {
        let (rec, rtts, _) = run(&transfer());
        assert_eq!(rec.error, None);
        assert_eq!(rec.delay_ms, Some(11.0)); // 3 ms -> 14 ms
        assert_eq!(rec.syn_to_last_ack_ms, Some(14.0));
        assert_eq!(rec.retransmissions, 1);
        // segments 3..=11 of transfer(): 9 frames, the resend (1066) only in captured
        let captured = 166 + 4 * 1066 + 66 + 66 + 1066 + 66;
        assert_eq!(rec.bytes_captured, Some(captured));
        assert_eq!(rec.bytes_nrt, Some(captured - 1066));
        assert_eq!(rec.payload_bytes, Some(4000));
        assert_eq!(rec.server_data_unacked_bytes, 0);
        // samples: two segments at the first ACK (2 ms), the fourth at the last ACK (9 ms);
        // none for the resent third
        assert_eq!(rtts, vec![2 * MS, 2 * MS, 9 * MS]);
        assert_eq!(rec.rtt_samples, 3);
        assert_eq!(rec.rtt_max_ms, Some(9.0));
    }

    #[test]
    fn series_bins_and_in_flight() {
        let (_, _, bins) = run(&transfer());
        assert_eq!(
            bins.iter().map(|b| b.index).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(bins[0].server_payload_bytes, 4000);
        assert_eq!(bins[0].in_flight_max_bytes, 4000);
        assert_eq!(bins[0].in_flight_end_bytes, 2000);
        assert_eq!(
            (
                bins[1].retransmissions,
                bins[1].server_goodput_bytes,
                bins[1].server_payload_bytes
            ),
            (1, 0, 1000)
        );
        assert_eq!(bins[2].in_flight_end_bytes, 0); // the FIN is ACKed
        let total: u64 = bins.iter().map(|b| b.server_bytes + b.client_bytes).sum();
        assert_eq!(
            total,
            transfer()
                .iter()
                .map(|s| u64::from(s.frame_len))
                .sum::<u64>()
        );
    }

    #[test]
    fn no_request_no_ack_and_get_only() {
        let t = transfer();
        let (rec, _, _) = run(&t[..3]);
        assert_eq!(rec.error, Some(NO_REQUEST));
        assert_eq!(rec.delay_ms, None);
        // the request is the last client ACK: no ACK after it
        let (rec, _, _) = run(&[
            t[0],
            t[1],
            t[2],
            t[3],
            t[4],
            seg(30, true, 101, 1001, FIN | ACK, 0),
        ]);
        assert_eq!(rec.error, Some(NO_ACK));
        // an RST is not the last ACK
        let (rec, _, _) = run(&[
            t[0],
            t[1],
            t[2],
            t[3],
            t[4],
            seg(30, true, 101, 1001, RST | ACK, 0),
        ]);
        assert_eq!(rec.error, Some(NO_ACK));
    }

    #[test]
    fn last_data_unacknowledged() {
        // cut after the duplicate ACK of 2001: 2000 bytes sent and never acknowledged
        let (rec, _, _) = run(&transfer()[..10]);
        assert_eq!(rec.error, None);
        assert_eq!(rec.server_data_unacked_bytes, 2000);
        // the last data acknowledged only by the client's FIN (its delayed ACK went with it)
        let mut t = transfer();
        t[11] = seg(14, true, 101, 2001, ACK, 0);
        let (rec, _, _) = run(&t);
        assert_eq!(rec.server_data_unacked_bytes, 0);
        // no data from the server at all: nothing to acknowledge
        let t = transfer();
        let (rec, _, _) = run(&[t[0], t[1], t[2], t[3], seg(4, true, 101, 1, ACK, 0)]);
        assert_eq!(rec.server_data_unacked_bytes, 0);
    }

    #[test]
    fn data_after_the_clients_fin_is_owed_no_ack() {
        // a TLS server's 24-byte close_notify after the client's FIN, answered by a RST
        let t = transfer();
        let mut cut = t[..13].to_vec();
        cut.push(seg(21, false, 4001, 102, ACK, 24));
        cut.push(seg(22, true, 102, 0, RST, 0));
        let (rec, _, _) = run(&cut);
        assert_eq!(rec.error, None);
        assert_eq!(rec.server_data_unacked_bytes, 0);
    }

    #[test]
    fn a_tls_close_notify_neither_ends_the_delay_nor_is_owed_an_ack() {
        // the client acknowledged the body at 14 ms; its close_notify (24 B) goes out at
        // 50 ms, the server answers with its own (24 B) before the client's FIN, then a RST
        let t = transfer();
        let mut closing = t[..12].to_vec();
        closing.push(seg(50, true, 101, 4001, ACK, 24));
        closing.push(seg(51, false, 4001, 125, ACK, 24));
        closing.push(seg(52, true, 125, 4025, FIN | ACK, 0));
        closing.push(seg(53, true, 126, 0, RST, 0));
        let (rec, _, _) = run(&closing);
        assert_eq!(rec.error, None);
        assert_eq!(rec.delay_ms, Some(11.0)); // request 3 ms -> the body's last ACK 14 ms
        assert_eq!(rec.server_data_unacked_bytes, 0);
        // a capture cut before the client's FIN still owes the 24 bytes
        let (rec, _, _) = run(&closing[..14]);
        assert_eq!(rec.server_data_unacked_bytes, 24);
    }

    #[test]
    fn acks_after_the_fin_do_not_count() {
        let mut t = transfer();
        t.push(seg(40, true, 102, 4002, ACK, 0)); // after the client's FIN
        let (rec, _, _) = run(&t);
        assert_eq!(rec.delay_ms, Some(11.0));
        assert_eq!(rec.last_ts_s, 0.04);
    }

    #[test]
    fn rtt_samples_past_4_gib() {
        let gib: u32 = 1 << 30;
        let mut segs = vec![
            seg(0, true, 0, 0, SYN, 0),
            seg(1, false, 0, 1, SYN | ACK, 0),
            seg(2, true, 1, 1, ACK, 100),
        ];
        for i in 0..6u32 {
            let t = 10 * (i64::from(i) + 1);
            segs.push(seg(
                t,
                false,
                1u32.wrapping_add(i.wrapping_mul(gib)),
                101,
                ACK,
                gib,
            ));
            segs.push(seg(
                t + 2,
                true,
                101,
                1u32.wrapping_add((i + 1).wrapping_mul(gib)),
                ACK,
                0,
            ));
        }
        let (rec, rtts, _) = run(&segs);
        assert_eq!(rtts, vec![2 * MS; 6]);
        assert_eq!(rec.payload_bytes, Some(6 * u64::from(gib)));
        assert_eq!(rec.retransmissions, 0);
    }
}
