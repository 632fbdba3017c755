//! Reno window management (RFC 5681): slow start below ssthresh, congestion avoidance of
//! one MSS per window above it, ssthresh = max(FlightSize / 2, 2·MSS) and cwnd = ssthresh
//! on a congestion event (the Reno-style reduction; the recovery policy — NewReno or SACK —
//! decides when that happens), cwnd = 1 MSS after a retransmission timeout.
//!
//! Initial window: RFC 6928, min(IW·MSS, max(2·MSS, 14600 bytes)) with IW = the configured
//! segment count (10 by default). Slow start counts bytes (RFC 3465) with L = 2·MSS; with
//! HyStart++ (RFC 9406, crate::cc::hystart) the initial slow start may end on a delay increase.
use super::{Acked, CongestionControl, Phase, RttStats, SlowStart, SlowStartGrowth};
use crate::time::Instant;

#[derive(Debug, Clone)]
pub struct Reno {
    mss: usize,
    cwnd: usize,
    ssthresh: usize,
    /// Bytes acknowledged in congestion avoidance since cwnd last grew.
    avoidance_acked: usize,
    slow_start: SlowStartGrowth,
}

impl Reno {
    pub fn new(mss: usize, initial_window_segments: usize) -> Self {
        let mss = mss.max(1);
        let iw = (initial_window_segments.max(1) * mss).min((2 * mss).max(14600));
        Reno {
            mss,
            cwnd: iw,
            ssthresh: usize::MAX,
            avoidance_acked: 0,
            slow_start: SlowStartGrowth::new(SlowStart::default()),
        }
    }

    /// With RFC 9406 HyStart++ in the initial slow start if asked, and the per-ACK limit.
    pub fn with_slow_start(mut self, slow_start: SlowStart) -> Self {
        self.slow_start = SlowStartGrowth::new(slow_start);
        self
    }

    fn reduced(&self, bytes_in_flight: usize) -> usize {
        (bytes_in_flight / 2).max(2 * self.mss)
    }
}

impl CongestionControl for Reno {
    fn name(&self) -> &'static str {
        "reno"
    }

    fn window(&self) -> usize {
        self.cwnd
    }

    fn ssthresh(&self) -> usize {
        self.ssthresh
    }

    fn phase(&self) -> Phase {
        self.slow_start.phase(self.cwnd < self.ssthresh)
    }

    fn on_sent(&mut self, _now: Instant, _bytes: usize, _in_flight: usize) {}

    fn on_ack(&mut self, _now: Instant, acked: Acked, _rtt: &RttStats) {
        if acked.in_recovery {
            return;
        }
        if self.cwnd < self.ssthresh {
            match self.slow_start.on_ack(&acked, self.mss) {
                Some(increase) => self.cwnd += increase.credit_bytes / increase.divisor,
                None => self.ssthresh = self.cwnd,
            }
        } else {
            self.avoidance_acked += acked.acked_bytes;
            if self.avoidance_acked >= self.cwnd {
                self.avoidance_acked -= self.cwnd;
                self.cwnd += self.mss;
            }
        }
    }

    fn on_congestion_event(&mut self, _now: Instant, bytes_in_flight: usize, _rtt: &RttStats) {
        self.slow_start.on_congestion();
        self.ssthresh = self.reduced(bytes_in_flight);
        self.cwnd = self.ssthresh;
        self.avoidance_acked = 0;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        self.cwnd = self.cwnd.min(self.ssthresh).max(self.mss);
    }

    fn on_rto_expired(&mut self, _now: Instant, bytes_in_flight: usize, first: bool) {
        self.slow_start.on_congestion();
        if first {
            self.ssthresh = self.reduced(bytes_in_flight);
        }
        self.cwnd = self.mss;
        self.avoidance_acked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seq::Seq;

    fn ack(bytes: usize, in_recovery: bool) -> Acked {
        Acked::new(Seq(0), bytes, in_recovery)
    }

    #[test]
    fn slow_start_then_halving_then_linear_growth() {
        let rtt = RttStats::default();
        let mut reno = Reno::new(1000, 10);
        assert_eq!(reno.window(), 10_000, "IW10 (below the 14600-byte cap)");
        assert_eq!(Reno::new(1460, 10).window(), 14_600, "RFC 6928 cap");
        reno.on_ack(Instant::ZERO, ack(5000, false), &rtt);
        assert_eq!(reno.window(), 12_000, "slow start counts at most 2 MSS per ACK");
        reno.on_congestion_event(Instant::ZERO, 12_000, &rtt);
        assert_eq!((reno.window(), reno.ssthresh()), (6000, 6000));
        reno.on_ack(Instant::ZERO, ack(1000, true), &rtt);
        assert_eq!(reno.window(), 6000, "no growth during recovery");
        for _ in 0..6 {
            reno.on_ack(Instant::ZERO, ack(1000, false), &rtt);
        }
        assert_eq!(reno.window(), 7000, "one MSS per window in congestion avoidance");
        reno.on_rto_expired(Instant::ZERO, 7000, true);
        assert_eq!((reno.window(), reno.ssthresh()), (1000, 3500));
        reno.on_rto_expired(Instant::ZERO, 1000, false);
        assert_eq!(reno.ssthresh(), 3500, "a repeated timeout keeps ssthresh");
        reno.on_congestion_event(Instant::ZERO, 1000, &rtt);
        assert_eq!(reno.ssthresh(), 2000, "never below 2 MSS");
    }
}
