//! CUBIC (RFC 9438), in segments as the RFC writes it, as f64.
//!
//! - Window growth in congestion avoidance: W_cubic(t) = C·(t − K)³ + W_max (§4.2, eq. 1),
//!   K = ∛((W_max − cwnd_epoch) / C) (eq. 2), C = 0.4; t counts from the first ACK of
//!   congestion avoidance after a reduction. Each ACK moves cwnd toward
//!   target = W_cubic(t + RTT), clamped to [cwnd, 1.5·cwnd] (§4.4, eq. 3/4).
//! - Reno-friendly region (§4.3): W_est starts at cwnd_epoch and grows by
//!   α_cubic·acked/cwnd with α_cubic = 3(1 − β)/(1 + β) until W_est ≥ cwnd_prior, then by
//!   1 segment per window; while W_cubic(t) < W_est, cwnd = W_est.
//! - Multiplicative decrease (§4.6): ssthresh = FlightSize·β_cubic (β = 0.7), never below
//!   2 segments; cwnd_prior = cwnd.
//! - Fast convergence (§4.7): when cwnd < the previous W_max at a congestion event,
//!   W_max = cwnd·(1 + β)/2, else W_max = cwnd.
//! - Timeout (§4.8): ssthresh as in §4.6 (first timeout only), cwnd = 1 segment, slow start;
//!   the next congestion-avoidance epoch starts anew.
//! - Slow start as Reno (crate::cc::reno, RFC 3465 byte counting with L = 2·MSS), with
//!   HyStart++ (RFC 9406, crate::cc::hystart) if built so. When HyStart++ ends the initial slow
//!   start without a loss, W_max is unknown: §4.10 sets W_max = cwnd_prior = cwnd and K = 0,
//!   which the epoch below does for any window at or above W_max.
//!
//! RTT in the target is SRTT (the latest sample before the first SRTT).
use core::time::Duration;

use super::{Acked, CongestionControl, Phase, RttStats, SlowStart, SlowStartGrowth};
use crate::time::Instant;

/// RFC 9438 §5.1: C = 0.4 (segments / s³).
pub const C: f64 = 0.4;
/// RFC 9438 §4.6: β_cubic = 0.7.
pub const BETA: f64 = 0.7;
/// RFC 9438 §4.3: α_cubic = 3(1 − β_cubic)/(1 + β_cubic) ≈ 0.529.
pub const ALPHA_RENO_FRIENDLY: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);

/// RFC 9438 eq. 2: K = ∛((W_max − cwnd_epoch) / C), in seconds.
pub fn k_seconds(w_max: f64, cwnd_epoch: f64) -> f64 {
    ((w_max - cwnd_epoch).max(0.0) / C).cbrt()
}

/// RFC 9438 eq. 1: W_cubic(t) = C·(t − K)³ + W_max, in segments.
pub fn w_cubic(t_seconds: f64, k_seconds: f64, w_max: f64) -> f64 {
    C * (t_seconds - k_seconds).powi(3) + w_max
}

/// A congestion-avoidance epoch: from the first ACK after a reduction to the next one.
#[derive(Debug, Clone, Copy)]
struct Epoch {
    start: Instant,
    k_seconds: f64,
    /// Reno-friendly estimate W_est, segments.
    w_est: f64,
}

#[derive(Debug, Clone)]
pub struct Cubic {
    mss: usize,
    /// Congestion window in segments (fractional: growth per ACK is a fraction of one).
    cwnd: f64,
    ssthresh: f64,
    /// W_max: the window before the last reduction, after fast convergence.
    w_max: f64,
    /// cwnd_prior: the window at the last reduction (§4.3's switch of α_cubic to 1).
    cwnd_prior: f64,
    epoch: Option<Epoch>,
    slow_start: SlowStartGrowth,
}

impl Cubic {
    pub fn new(mss: usize, initial_window_segments: usize) -> Self {
        let mss = mss.max(1);
        // RFC 6928 as in reno.rs: min(IW·MSS, max(2·MSS, 14600 bytes)).
        let iw_bytes = (initial_window_segments.max(1) * mss).min((2 * mss).max(14600));
        Cubic {
            mss,
            cwnd: (iw_bytes / mss) as f64,
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            cwnd_prior: 0.0,
            epoch: None,
            slow_start: SlowStartGrowth::new(SlowStart::default()),
        }
    }

    /// With RFC 9406 HyStart++ in the initial slow start if asked, and the per-ACK limit.
    pub fn with_slow_start(mut self, slow_start: SlowStart) -> Self {
        self.slow_start = SlowStartGrowth::new(slow_start);
        self
    }

    /// The window in segments (for tests and the event log).
    pub fn cwnd_segments(&self) -> f64 {
        self.cwnd
    }

    pub fn w_max_segments(&self) -> f64 {
        self.w_max
    }

    fn rtt(rtt: &RttStats) -> Duration {
        rtt.srtt.or(rtt.latest).unwrap_or(Duration::ZERO)
    }

    /// §4.6/§4.7: the reduction on a congestion event (and the ssthresh of a timeout).
    fn reduce(&mut self, bytes_in_flight: usize) {
        let flight = bytes_in_flight as f64 / self.mss as f64;
        self.w_max = if self.cwnd < self.w_max { self.cwnd * (1.0 + BETA) / 2.0 } else { self.cwnd };
        self.cwnd_prior = self.cwnd;
        self.ssthresh = (flight * BETA).max(2.0);
        self.epoch = None;
    }

    fn avoidance(&mut self, now: Instant, acked_segments: f64, rtt: &RttStats) {
        let epoch = *self.epoch.get_or_insert_with(|| {
            // §4.2: a window above W_max (no reduction yet, or the window grew past it)
            // starts the curve at its plateau.
            if self.cwnd >= self.w_max {
                self.w_max = self.cwnd;
            }
            Epoch { start: now, k_seconds: k_seconds(self.w_max, self.cwnd), w_est: self.cwnd }
        });
        let t = now.saturating_since(epoch.start).as_secs_f64();
        let rtt = Self::rtt(rtt).as_secs_f64();
        // §4.4: target = W_cubic(t + RTT), clamped to [cwnd, 1.5·cwnd].
        let target = w_cubic(t + rtt, epoch.k_seconds, self.w_max).clamp(self.cwnd, 1.5 * self.cwnd);
        let cubic_cwnd = self.cwnd + (target - self.cwnd) / self.cwnd * acked_segments;
        // §4.3: the Reno-friendly estimate.
        let alpha = if epoch.w_est >= self.cwnd_prior { 1.0 } else { ALPHA_RENO_FRIENDLY };
        let w_est = epoch.w_est + alpha * acked_segments / self.cwnd;
        self.epoch = Some(Epoch { w_est, ..epoch });
        self.cwnd = if w_cubic(t, epoch.k_seconds, self.w_max) < w_est { w_est.max(cubic_cwnd) } else { cubic_cwnd };
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn window(&self) -> usize {
        (self.cwnd * self.mss as f64).round() as usize
    }

    fn ssthresh(&self) -> usize {
        if self.ssthresh.is_finite() {
            (self.ssthresh * self.mss as f64).round() as usize
        } else {
            usize::MAX
        }
    }

    fn phase(&self) -> Phase {
        self.slow_start.phase(self.cwnd < self.ssthresh)
    }

    fn on_sent(&mut self, _now: Instant, _bytes: usize, _in_flight: usize) {}

    fn on_ack(&mut self, now: Instant, acked: Acked, rtt: &RttStats) {
        if acked.in_recovery {
            return;
        }
        if self.cwnd < self.ssthresh {
            let Some(increase) = self.slow_start.on_ack(&acked, self.mss) else {
                self.ssthresh = self.cwnd;
                return;
            };
            let grow = increase.credit_bytes as f64 / self.mss as f64 / increase.divisor as f64;
            self.cwnd = (self.cwnd + grow).min(self.ssthresh.max(self.cwnd));
            return;
        }
        self.avoidance(now, acked.acked_bytes as f64 / self.mss as f64, rtt);
    }

    fn on_congestion_event(&mut self, _now: Instant, bytes_in_flight: usize, _rtt: &RttStats) {
        self.slow_start.on_congestion();
        self.reduce(bytes_in_flight);
        self.cwnd = self.ssthresh;
    }

    fn on_recovery_end(&mut self, _now: Instant) {
        self.cwnd = self.cwnd.min(self.ssthresh).max(1.0);
    }

    fn on_rto_expired(&mut self, _now: Instant, bytes_in_flight: usize, first: bool) {
        self.slow_start.on_congestion();
        if first {
            self.reduce(bytes_in_flight);
        }
        self.cwnd = 1.0;
        self.epoch = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CcKind;
    use crate::seq::Seq;

    const MSS: usize = 1000;

    fn ack(segments: usize) -> Acked {
        Acked::new(Seq(0), segments * MSS, false)
    }

    fn rtt(ms: u64) -> RttStats {
        RttStats {
            srtt: Some(Duration::from_millis(ms)),
            latest: Some(Duration::from_millis(ms)),
            ..RttStats::default()
        }
    }

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    /// A CUBIC in congestion avoidance after one reduction from `w_max` segments.
    fn after_loss_from(w_max: usize) -> Cubic {
        let mut cubic = Cubic::new(MSS, 10);
        cubic.cwnd = w_max as f64;
        cubic.on_congestion_event(at(0), w_max * MSS, &rtt(100));
        cubic.on_recovery_end(at(0));
        cubic
    }

    #[test]
    fn constants_and_formulas_are_rfc_9438s() {
        assert!((ALPHA_RENO_FRIENDLY - 0.5294).abs() < 1e-4, "3(1-0.7)/(1+0.7)");
        // K = cbrt(W_max (1 - β) / C) when the epoch starts at β·W_max (eq. 2).
        let k = k_seconds(100.0, 70.0);
        assert!((k - (100.0 * 0.3 / 0.4f64).cbrt()).abs() < 1e-12);
        assert!((w_cubic(0.0, k, 100.0) - 70.0).abs() < 1e-9, "the curve starts at cwnd_epoch");
        assert!((w_cubic(k, k, 100.0) - 100.0).abs() < 1e-12, "plateau at W_max when t = K");
        assert!((w_cubic(k + 2.0, k, 100.0) - (100.0 + 0.4 * 8.0)).abs() < 1e-9, "convex beyond K");
        assert_eq!(CcKind::parse("cubic"), Some(CcKind::Cubic));
        assert_eq!(CcKind::Cubic.build(MSS, 10, SlowStart::default()).name(), "cubic");
    }

    #[test]
    fn multiplicative_decrease_is_beta_of_flight() {
        let cubic = after_loss_from(100);
        assert_eq!(cubic.window(), 70 * MSS);
        assert_eq!(cubic.ssthresh(), 70 * MSS);
        assert_eq!(cubic.w_max_segments(), 100.0);
        let mut tiny = after_loss_from(2);
        assert_eq!(tiny.window(), 2 * MSS, "never below 2 segments");
        tiny.on_rto_expired(at(0), 2 * MSS, true);
        assert_eq!(tiny.window(), MSS, "one segment after a timeout");
    }

    #[test]
    fn window_follows_w_cubic_of_t_plus_rtt() {
        // Large W_max: the cubic curve is far above the Reno-friendly estimate, so cwnd tracks
        // W_cubic(t + RTT). One ACK of a whole window per RTT (cwnd segments acked):
        // cwnd += (target − cwnd) per RTT, i.e. cwnd reaches the previous RTT's target.
        let mut cubic = after_loss_from(1000);
        let k = k_seconds(1000.0, 700.0);
        let mut t_ms = 0;
        let mut worst = 0.0f64;
        while t_ms < 12_000 {
            let cwnd_before = cubic.cwnd_segments();
            let target = w_cubic((t_ms + 100) as f64 / 1000.0, k, 1000.0).clamp(cwnd_before, 1.5 * cwnd_before);
            let whole_window = cwnd_before.round() as usize;
            let expected = cwnd_before + (target - cwnd_before) / cwnd_before * whole_window as f64;
            cubic.on_ack(at(t_ms), ack(whole_window), &rtt(100));
            worst = worst.max((cubic.cwnd_segments() - expected).abs());
            t_ms += 100;
        }
        assert!(worst < 1e-9, "cwnd off the RFC 9438 update by {worst} segments");
        // After K = ∛(300 / 0.4) ≈ 9.09 s the window has come back to W_max and grows beyond it.
        assert!((k - 750f64.cbrt()).abs() < 1e-12, "K = {k}");
        assert!(cubic.cwnd_segments() > 1000.0, "convex region reached: {}", cubic.cwnd_segments());
    }

    #[test]
    fn small_windows_are_reno_friendly() {
        // W_max = 10 segments, RTT 100 ms: the cubic curve needs K = 1.96 s to regain 3 segments,
        // while Reno-friendly growth gains α_cubic ≈ 0.53 segments per RTT.
        let mut cubic = after_loss_from(10);
        let rtt = rtt(100);
        let mut w_est = 7.0;
        let mut t_ms = 0;
        for _ in 0..10 {
            // one RTT: cwnd ACKs of one segment each
            let cwnd = cubic.cwnd_segments();
            let acks = cwnd.floor() as usize;
            for _ in 0..acks {
                let alpha = if w_est >= 10.0 { 1.0 } else { ALPHA_RENO_FRIENDLY };
                w_est += alpha / cubic.cwnd_segments();
                cubic.on_ack(at(t_ms), ack(1), &rtt);
            }
            t_ms += 100;
        }
        let k = k_seconds(10.0, 7.0);
        assert!(w_cubic(1.0, k, 10.0) < w_est, "in the Reno-friendly region");
        assert!((cubic.cwnd_segments() - w_est).abs() < 1e-9, "cwnd = W_est: {} vs {w_est}", cubic.cwnd_segments());
        assert!(cubic.cwnd_segments() > 10.0, "passed cwnd_prior: then α = 1");
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut cubic = after_loss_from(100);
        assert_eq!(cubic.w_max_segments(), 100.0);
        // A second loss below the previous W_max: W_max = cwnd·(1 + β)/2.
        cubic.on_congestion_event(at(10), 70 * MSS, &rtt(100));
        assert!((cubic.w_max_segments() - 70.0 * 0.85).abs() < 1e-9);
        assert_eq!(cubic.window(), 49 * MSS);
        // A loss at or above W_max keeps the window as W_max.
        let mut grown = after_loss_from(100);
        grown.cwnd = 120.0;
        grown.on_congestion_event(at(10), 120 * MSS, &rtt(100));
        assert_eq!(grown.w_max_segments(), 120.0);
    }

    #[test]
    fn slow_start_until_ssthresh_and_no_growth_in_recovery() {
        let mut cubic = Cubic::new(MSS, 10);
        cubic.on_ack(at(0), ack(5), &rtt(10));
        assert_eq!(cubic.window(), 12 * MSS, "2 MSS per ACK at most (RFC 3465 L = 2)");
        let mut linux =
            Cubic::new(MSS, 10).with_slow_start(SlowStart { ack_limit_segments: None, ..SlowStart::default() });
        linux.on_ack(at(0), ack(5), &rtt(10));
        assert_eq!(linux.window(), 15 * MSS, "no limit: every acknowledged segment counts (tcp_slow_start)");
        let mut in_recovery = ack(10);
        in_recovery.in_recovery = true;
        cubic.on_ack(at(0), in_recovery, &rtt(10));
        assert_eq!(cubic.window(), 12 * MSS);
        cubic.on_rto_expired(at(0), 12 * MSS, true);
        assert_eq!(cubic.ssthresh(), 8400, "β·flight");
        cubic.on_rto_expired(at(0), MSS, false);
        assert_eq!(cubic.ssthresh(), 8400, "a repeated timeout keeps ssthresh");
    }

    #[test]
    fn hystart_exit_starts_the_curve_at_the_window_with_k_zero() {
        // RFC 9438 §4.10: HyStart++ ended slow start without a loss, so W_max is unknown:
        // W_max = cwnd_prior = cwnd, K = 0 — the window grows from where it is.
        let mut cubic = Cubic::new(MSS, 10).with_slow_start(SlowStart { hystart: true, ..SlowStart::default() });
        let sample = |ms| Acked { rtt_sample: Some(Duration::from_millis(ms)), ..ack(1) };
        // Rounds of ACKs (one segment each): 10 ms, then 30 ms (≥ 10 + 4 ms) from the 2nd round on.
        let (mut seq, mut end, mut acks) = (0u32, 10 * MSS as u32, 0u32);
        while cubic.phase() != Phase::CongestionAvoidance {
            assert!(acks < 1000, "never left slow start");
            if seq >= end {
                end = seq + cubic.window() as u32;
            }
            let rtt_ms = if seq < 10 * MSS as u32 { 10 } else { 30 };
            cubic.on_ack(at(0), Acked { ack: Seq(seq), snd_max: Seq(end), ..sample(rtt_ms) }, &rtt(rtt_ms));
            if cubic.phase() == Phase::ConservativeSlowStart {
                acks += 1; // counted once CSS began
            }
            seq += MSS as u32;
        }
        assert!(acks > 0, "went through CSS");
        let exit = cubic.cwnd_segments();
        assert_eq!(cubic.ssthresh(), cubic.window(), "ssthresh = cwnd at the end of CSS");
        cubic.on_ack(at(0), ack(1), &rtt(30));
        assert_eq!(cubic.w_max_segments(), exit, "W_max = the window at the start of avoidance");
        // K = 0: W_cubic(t) = W_max + C·t³ from the exit window on.
        let before = cubic.cwnd_segments();
        cubic.on_ack(at(2000), ack(1), &rtt(30));
        let target = w_cubic(2.03, 0.0, exit).min(1.5 * before);
        assert!((cubic.cwnd_segments() - (before + (target - before) / before)).abs() < 1e-9);
    }
}
