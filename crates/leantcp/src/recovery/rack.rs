//! RACK-TLP (RFC 8985): time-based loss detection and tail loss probes.
//!
//! RACK remembers the send time and end of the most recently *sent* segment that has been
//! delivered (cumulatively or selectively acknowledged) and the RTT it took. Any segment
//! sent before it that is still unacknowledged after RACK.rtt + reo_wnd since its own
//! transmission is lost; one that may still arrive arms the reordering timer (§6.2). The
//! reordering window is RACK.min_RTT / 4 (capped at SRTT), or 0 while no reordering has
//! been seen and either recovery is in progress or DupThresh segments are SACKed (§6.2
//! step 4; no DSACK-driven growth here: leantcp does not parse DSACK).
//!
//! TLP (§7): with data outstanding and no recovery in progress, a probe timeout
//! PTO = 2·SRTT (+ 200 ms of worst-case delayed ACK when one segment is in flight, 1 s
//! without an SRTT, never later than the RTO) sends one new segment, or resends the last
//! one, to draw an ACK that lets SACK/RACK repair a tail loss without a timeout. A probe
//! that retransmitted data and is acknowledged counts as a repaired loss (§7.4.2: without
//! DSACK the sender cannot tell the probe was needless), i.e. one congestion event.
use core::time::Duration;

use super::scoreboard::{Delivered, Scoreboard};
use crate::cc::RttStats;
use crate::seq::Seq;
use crate::time::Instant;

/// RFC 8985 §7.2: worst-case delayed-ACK time added to the PTO when one segment is out.
pub const WORST_CASE_DELAYED_ACK: Duration = Duration::from_millis(200);

/// Added to 2·SRTT when more than one segment is out, as Linux's TLP timer adds its 2 ms
/// minimum timeout: at a sub-millisecond SRTT, 2·SRTT alone is shorter than the ordinary
/// jitter of a loaded host, and a probe goes out before an ACK that was merely late
/// (docs/notes/leantcp-sending-speed.md).
pub const PTO_SLACK: Duration = Duration::from_millis(2);

#[derive(Debug, Clone, Default)]
pub struct Rack {
    xmit_ts: Option<Instant>,
    end_seq: Seq,
    rtt: Duration,
    /// Highest end of a delivered segment (RACK.fack).
    fack: Option<Seq>,
    pub reordering_seen: bool,
    /// TLP.end_seq and TLP.is_retrans of the outstanding probe.
    pub tlp_end: Option<Seq>,
    pub tlp_is_retrans: bool,
}

/// RACK_sent_after(t1, seq1, t2, seq2).
fn sent_after(t1: Instant, seq1: Seq, t2: Instant, seq2: Seq) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

impl Rack {
    /// §6.2 steps 1–3: update RACK.xmit_ts / end_seq / rtt and detect reordering.
    pub fn on_delivered(&mut self, delivered: &[Delivered], now: Instant, rtt: &RttStats) {
        for d in delivered {
            let sample = now.saturating_since(d.sent_at);
            // Step 2: a retransmitted segment acknowledged faster than min RTT was
            // probably acknowledged for its original transmission: no RACK update. Below
            // RACK.fack that original arrived out of order — leantcp takes this as the
            // reordering signal RFC 8985 gets from DSACK (it does not parse DSACK).
            let ambiguous = d.retransmitted && rtt.min.is_some_and(|min| sample < min);
            if ambiguous && self.fack.is_some_and(|fack| d.end < fack) {
                self.reordering_seen = true;
            }
            if !ambiguous && self.xmit_ts.is_none_or(|ts| sent_after(d.sent_at, d.end, ts, self.end_seq)) {
                self.xmit_ts = Some(d.sent_at);
                self.end_seq = d.end;
                self.rtt = sample;
            }
            match self.fack {
                Some(fack) if d.end < fack => {
                    if !d.retransmitted {
                        self.reordering_seen = true;
                    }
                }
                _ => self.fack = Some(d.end),
            }
        }
    }

    /// §6.2 step 4.
    pub fn reo_wnd(&self, in_recovery: bool, sacked_segments: usize, rtt: &RttStats) -> Duration {
        if !self.reordering_seen && (in_recovery || sacked_segments >= super::DUP_THRESH as usize) {
            return Duration::ZERO;
        }
        let quarter = rtt.min.unwrap_or_default() / 4;
        rtt.srtt.map_or(quarter, |srtt| quarter.min(srtt))
    }

    /// §6.2 step 5: marks lost segments; returns how many were newly marked and, if some
    /// may still arrive, when to look again (the reordering timer).
    pub fn detect_loss(&self, sb: &mut Scoreboard, now: Instant, reo_wnd: Duration) -> (usize, Option<Instant>) {
        let Some(xmit_ts) = self.xmit_ts else { return (0, None) };
        let mut marked = 0;
        let mut timer: Option<Instant> = None;
        let candidates: Vec<(usize, Instant)> = sb
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                !s.sacked && !s.needs_retransmission() && sent_after(xmit_ts, self.end_seq, s.sent_at, s.end)
            })
            .map(|(i, s)| (i, s.sent_at + self.rtt + reo_wnd))
            .collect();
        for (index, deadline) in candidates {
            if deadline <= now {
                sb.mark_lost_at(index);
                marked += 1;
            } else {
                timer = Some(timer.map_or(deadline, |t| t.max(deadline)));
            }
        }
        (marked, timer)
    }

    /// §7.2 TLP_calc_PTO (plus `PTO_SLACK` where it adds no delayed-ACK allowance), capped
    /// by the time left until the RTO fires.
    pub fn pto(rtt: &RttStats, one_segment_in_flight: bool, rto_left: Duration) -> Duration {
        let pto = match rtt.srtt {
            Some(srtt) => srtt * 2 + if one_segment_in_flight { WORST_CASE_DELAYED_ACK } else { PTO_SLACK },
            None => Duration::from_secs(1),
        };
        pto.min(rto_left)
    }

    /// Forget delivery history after a timeout (§6.3 RACK_mark_losses_on_RTO leaves the
    /// scoreboard to the caller).
    pub fn on_rto(&mut self) {
        self.tlp_end = None;
        self.tlp_is_retrans = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    fn stats(min_ms: u64, srtt_ms: u64) -> RttStats {
        RttStats {
            latest: None,
            min: Some(Duration::from_millis(min_ms)),
            srtt: Some(Duration::from_millis(srtt_ms)),
            rttvar: Duration::ZERO,
        }
    }

    /// Segments 0..4 of 100 bytes sent at 0, 1, 2, 3 ms; RTT 10 ms.
    fn board() -> Scoreboard {
        let mut sb = Scoreboard::default();
        for i in 0..4u32 {
            sb.on_sent(Seq(i * 100), Seq(i * 100 + 100), ms(i as u64));
        }
        sb
    }

    #[test]
    fn reordering_window_delays_the_verdict_then_marks_the_loss() {
        let rtt = stats(10, 10);
        let mut sb = board();
        let mut rack = Rack::default();
        let mut d = Vec::new();
        // Segment 2 SACKed at 12 ms: segments 0 and 1 were sent before it.
        sb.on_sack(&[(Seq(200), Seq(300))], &mut d);
        rack.on_delivered(&d, ms(12), &rtt);
        let reo = rack.reo_wnd(false, sb.sacked_segments(), &rtt);
        assert_eq!(reo, Duration::from_micros(2500), "min RTT / 4");
        // RACK.rtt = 10 ms: segment 0 is due at 0 + 10 + 2.5 = 12.5 ms, segment 1 at 13.5 ms.
        let (marked, timer) = rack.detect_loss(&mut sb, ms(12), reo);
        assert_eq!((marked, timer), (0, Some(Instant::from_micros(13_500))), "both may still arrive");
        let (marked, timer) = rack.detect_loss(&mut sb, Instant::from_micros(12_600), reo);
        assert_eq!((marked, timer), (1, Some(Instant::from_micros(13_500))));
        assert_eq!(sb.next_lost(), Some((Seq(0), Seq(100))));
        let (marked, timer) = rack.detect_loss(&mut sb, Instant::from_micros(13_500), reo);
        assert_eq!((marked, timer), (1, None));
        assert!(!rack.reordering_seen);
    }

    #[test]
    fn late_original_sets_reordering_seen_and_window_stays_open() {
        let rtt = stats(10, 10);
        let mut sb = board();
        let mut rack = Rack::default();
        let mut d = Vec::new();
        sb.on_sack(&[(Seq(100), Seq(400))], &mut d);
        rack.on_delivered(&d, ms(13), &rtt);
        assert_eq!(rack.reo_wnd(false, sb.sacked_segments(), &rtt), Duration::ZERO, "3 SACKed, no reordering seen: 0");
        d.clear();
        sb.on_cumulative_ack(Seq(400), &mut d); // segment 0 arrives late, never retransmitted
        rack.on_delivered(&d, ms(14), &rtt);
        assert!(rack.reordering_seen);
        assert_eq!(rack.reo_wnd(true, 3, &rtt), Duration::from_micros(2500));
    }

    #[test]
    fn pto_is_two_srtt_plus_delayed_ack_for_one_segment_or_slack_for_more_capped_by_rto() {
        let rtt = stats(10, 10);
        assert_eq!(Rack::pto(&rtt, false, Duration::from_secs(1)), Duration::from_millis(22));
        let sub_ms = RttStats { srtt: Some(Duration::from_micros(300)), ..stats(0, 0) };
        assert_eq!(Rack::pto(&sub_ms, false, Duration::from_secs(1)), Duration::from_micros(2600));
        assert_eq!(Rack::pto(&rtt, true, Duration::from_secs(1)), Duration::from_millis(220));
        assert_eq!(Rack::pto(&rtt, true, Duration::from_millis(150)), Duration::from_millis(150));
        assert_eq!(Rack::pto(&RttStats::default(), false, Duration::from_secs(3)), Duration::from_secs(1));
    }
}
