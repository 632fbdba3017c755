//! The RFC 6298 retransmission timer with every knob of the studies (seed 000, ch. 4):
//! weights α and β, K, clock granularity G, initial/minimum/maximum RTO, exponential
//! backoff, and the RTT sampling strategy (`all`, `one`, `some`).
use core::time::Duration;
use std::collections::VecDeque;

use crate::seq::Seq;
use crate::time::Instant;

/// Which acknowledged segments yield an RTT sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingStrategy {
    /// Every acknowledged (never retransmitted) segment.
    All,
    /// One timed segment per window (classic BSD timing).
    One,
    /// Alternate ACKs: every second ACK that acknowledges new data.
    Some,
}

impl SamplingStrategy {
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "all" => Some(Self::All),
            "one" => Some(Self::One),
            "some" => Some(Self::Some),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::One => "one",
            Self::Some => "some",
        }
    }
}

/// The weights of Table 5 (seed 000): W1 is RFC 6298's α = 1/8, β = 1/4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    W1,
    W2,
    W3,
    W4,
    W5,
    W6,
    W7,
    W8,
    W9,
}

impl Weight {
    pub const ALL: [Weight; 9] =
        [Weight::W1, Weight::W2, Weight::W3, Weight::W4, Weight::W5, Weight::W6, Weight::W7, Weight::W8, Weight::W9];

    /// (α, β) of this preset.
    pub fn alpha_beta(self) -> (f64, f64) {
        match self {
            Weight::W1 => (1.0 / 8.0, 1.0 / 4.0),
            Weight::W2 => (1.0 / 8.0, 3.0 / 8.0),
            Weight::W3 => (1.0 / 8.0, 1.0 / 8.0),
            Weight::W4 => (3.0 / 16.0, 1.0 / 4.0),
            Weight::W5 => (3.0 / 16.0, 3.0 / 8.0),
            Weight::W6 => (3.0 / 16.0, 1.0 / 8.0),
            Weight::W7 => (1.0 / 16.0, 1.0 / 4.0),
            Weight::W8 => (1.0 / 16.0, 3.0 / 8.0),
            Weight::W9 => (1.0 / 16.0, 1.0 / 8.0),
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        let upper = text.to_ascii_uppercase();
        Weight::ALL.iter().copied().find(|w| format!("{w:?}") == upper)
    }
}

/// Knobs of the estimator; `Default` is RFC 6298 (W1, K = 4, G = 250 µs, 1 s initial and minimum).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RtoConfig {
    pub alpha: f64,
    pub beta: f64,
    pub k: f64,
    pub granularity: Duration,
    pub initial: Duration,
    pub min: Duration,
    pub max: Duration,
    pub sampling: SamplingStrategy,
}

impl Default for RtoConfig {
    fn default() -> Self {
        RtoConfig {
            alpha: 1.0 / 8.0,
            beta: 1.0 / 4.0,
            k: 4.0,
            granularity: Duration::from_micros(250),
            initial: Duration::from_secs(1),
            min: Duration::from_secs(1),
            max: Duration::from_secs(60),
            sampling: SamplingStrategy::All,
        }
    }
}

impl RtoConfig {
    pub fn with_weight(mut self, weight: Weight) -> Self {
        let (alpha, beta) = weight.alpha_beta();
        self.alpha = alpha;
        self.beta = beta;
        self
    }

    /// Checks the knobs; returns which one is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.alpha > 0.0 && self.alpha <= 1.0) {
            return Err(format!("rto alpha {} not in (0, 1]", self.alpha));
        }
        if !(self.beta > 0.0 && self.beta <= 1.0) {
            return Err(format!("rto beta {} not in (0, 1]", self.beta));
        }
        if !(self.k >= 0.0 && self.k.is_finite()) {
            return Err(format!("rto K {} must be a finite number >= 0", self.k));
        }
        if self.min > self.max {
            return Err("rto min is greater than rto max".into());
        }
        if self.initial.is_zero() {
            return Err("initial rto must be > 0".into());
        }
        Ok(())
    }
}

/// SRTT, RTTVAR and RTO per RFC 6298, plus the backoff exponent of §5.5.
#[derive(Debug, Clone)]
pub struct RtoEstimator {
    config: RtoConfig,
    srtt_us: Option<f64>,
    rttvar_us: f64,
    base_rto: Duration,
    backoff_shift: u32,
}

impl RtoEstimator {
    pub fn new(config: RtoConfig) -> Self {
        RtoEstimator { config, srtt_us: None, rttvar_us: 0.0, base_rto: config.initial, backoff_shift: 0 }
    }

    pub fn config(&self) -> &RtoConfig {
        &self.config
    }

    /// Feeds one RTT measurement R (RFC 6298 §2.2/2.3); clears the backoff (Karn: only
    /// samples of never-retransmitted segments reach this).
    pub fn on_sample(&mut self, rtt: Duration) {
        let r = rtt.as_secs_f64() * 1e6;
        match self.srtt_us {
            None => {
                self.srtt_us = Some(r);
                self.rttvar_us = r / 2.0;
            }
            Some(srtt) => {
                let (a, b) = (self.config.alpha, self.config.beta);
                self.rttvar_us = (1.0 - b) * self.rttvar_us + b * (srtt - r).abs();
                self.srtt_us = Some((1.0 - a) * srtt + a * r);
            }
        }
        let rto_us = self.unfloored_rto_us().unwrap_or(r);
        self.base_rto = self.clamp(Duration::from_nanos((rto_us * 1000.0).round() as u64));
        self.backoff_shift = 0;
    }

    /// A retransmission timer expired: double the RTO (§5.5), up to the maximum.
    pub fn on_timeout(&mut self) {
        self.backoff_shift = (self.backoff_shift + 1).min(30);
    }

    /// The current RTO including backoff.
    pub fn rto(&self) -> Duration {
        let factor = 1u32.checked_shl(self.backoff_shift).unwrap_or(u32::MAX);
        self.clamp(self.base_rto.saturating_mul(factor))
    }

    /// SRTT + max(G, K·RTTVAR) in µs, neither floored nor capped nor backed off: what the
    /// estimator alone allows (seed 000, Table 6). `None` before the first sample.
    pub fn unfloored_rto_us(&self) -> Option<f64> {
        let g = self.config.granularity.as_secs_f64() * 1e6;
        self.srtt_us.map(|srtt| srtt + g.max(self.config.k * self.rttvar_us))
    }

    pub fn srtt(&self) -> Option<Duration> {
        self.srtt_us.map(|us| Duration::from_nanos((us * 1000.0).round() as u64))
    }

    pub fn rttvar(&self) -> Duration {
        Duration::from_nanos((self.rttvar_us * 1000.0).round() as u64)
    }

    pub fn backoff_shift(&self) -> u32 {
        self.backoff_shift
    }

    fn clamp(&self, rto: Duration) -> Duration {
        rto.max(self.config.min).min(self.config.max)
    }
}

#[derive(Debug, Clone, Copy)]
struct SentRecord {
    start: Seq,
    end: Seq,
    sent_at: Instant,
    retransmitted: bool,
}

/// Decides which ACKs produce RTT samples, per [`SamplingStrategy`], honouring Karn's rule.
#[derive(Debug, Clone)]
pub struct RttSampler {
    strategy: SamplingStrategy,
    records: VecDeque<SentRecord>,
    /// The timed segment of `one`: (start, end, sent at).
    timed: Option<(Seq, Seq, Instant)>,
    new_data_acks: u64,
}

impl RttSampler {
    pub fn new(strategy: SamplingStrategy) -> Self {
        RttSampler { strategy, records: VecDeque::new(), timed: None, new_data_acks: 0 }
    }

    /// A segment covering sequence space `start..end` left at `now`.
    pub fn on_send(&mut self, start: Seq, end: Seq, now: Instant, retransmission: bool) {
        let overlaps = |a_start: Seq, a_end: Seq| a_end > start && a_start < end;
        match self.strategy {
            SamplingStrategy::One => {
                if retransmission {
                    // Karn: a retransmission that overlaps the timed segment makes its ACK ambiguous.
                    if matches!(self.timed, Some((s, e, _)) if overlaps(s, e)) {
                        self.timed = None;
                    }
                } else if self.timed.is_none() {
                    self.timed = Some((start, end, now));
                }
            }
            SamplingStrategy::All | SamplingStrategy::Some => {
                if retransmission {
                    for record in self.records.iter_mut().filter(|r| overlaps(r.start, r.end)) {
                        record.retransmitted = true;
                    }
                }
                if self.records.back().is_none_or(|last| last.end < end) {
                    let start = match self.records.back() {
                        Some(last) if last.end > start => last.end,
                        _ => start,
                    };
                    self.records.push_back(SentRecord { start, end, sent_at: now, retransmitted: retransmission });
                }
            }
        }
    }

    /// Go-back-N: every outstanding segment will be sent again, none may be timed.
    pub fn on_retransmit_all(&mut self) {
        self.timed = None;
        for record in self.records.iter_mut() {
            record.retransmitted = true;
        }
    }

    /// An ACK advanced SND.UNA to `ack`; returns the RTT samples it yields.
    pub fn on_ack(&mut self, ack: Seq, now: Instant) -> Vec<Duration> {
        let mut samples = Vec::new();
        match self.strategy {
            SamplingStrategy::One => {
                if let Some((_, end, sent_at)) = self.timed {
                    if end <= ack {
                        samples.push(now.saturating_since(sent_at));
                        self.timed = None;
                    }
                }
            }
            SamplingStrategy::All | SamplingStrategy::Some => {
                self.new_data_acks += 1;
                let mut newest_clean = None;
                while let Some(record) = self.records.front().copied() {
                    if record.end > ack {
                        break;
                    }
                    self.records.pop_front();
                    if !record.retransmitted {
                        if self.strategy == SamplingStrategy::All {
                            samples.push(now.saturating_since(record.sent_at));
                        }
                        newest_clean = Some(record.sent_at);
                    }
                }
                if self.strategy == SamplingStrategy::Some && self.new_data_acks % 2 == 1 {
                    if let Some(sent_at) = newest_clean {
                        samples.push(now.saturating_since(sent_at));
                    }
                }
            }
        }
        samples
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn no_floor(weight: Weight) -> RtoEstimator {
        let config = RtoConfig { min: Duration::ZERO, ..RtoConfig::default() }.with_weight(weight);
        RtoEstimator::new(config)
    }

    fn us_of(d: Duration) -> f64 {
        d.as_nanos() as f64 / 1000.0
    }

    /// Hand-computed: samples 100 ms then 200 ms, K = 4, min RTO 0.
    /// After R1: SRTT = 100, RTTVAR = 50, RTO = 300 ms.
    /// After R2: RTTVAR = (1-β)·50 + β·100, SRTT = (1-α)·100 + α·200, RTO = SRTT + 4·RTTVAR.
    #[test]
    fn every_weight_matches_hand_computed_vector() {
        // (weight, srtt ms, rttvar ms, rto ms)
        let expected = [
            (Weight::W1, 112.5, 62.5, 362.5),   // 87.5+25; 37.5+25
            (Weight::W2, 112.5, 68.75, 387.5),  // 31.25+37.5
            (Weight::W3, 112.5, 56.25, 337.5),  // 43.75+12.5
            (Weight::W4, 118.75, 62.5, 368.75), // 81.25+37.5
            (Weight::W5, 118.75, 68.75, 393.75),
            (Weight::W6, 118.75, 56.25, 343.75),
            (Weight::W7, 106.25, 62.5, 356.25), // 93.75+12.5
            (Weight::W8, 106.25, 68.75, 381.25),
            (Weight::W9, 106.25, 56.25, 331.25),
        ];
        for (weight, srtt, rttvar, rto) in expected {
            let mut est = no_floor(weight);
            assert_eq!(est.rto(), Duration::from_secs(1), "{weight:?} initial");
            est.on_sample(ms(100));
            assert_eq!(est.srtt(), Some(ms(100)));
            assert_eq!(est.rttvar(), ms(50));
            assert_eq!(est.rto(), ms(300));
            est.on_sample(ms(200));
            assert_eq!(us_of(est.srtt().unwrap()), srtt * 1000.0, "{weight:?} srtt");
            assert_eq!(us_of(est.rttvar()), rttvar * 1000.0, "{weight:?} rttvar");
            assert_eq!(us_of(est.rto()), rto * 1000.0, "{weight:?} rto");
        }
    }

    #[test]
    fn unfloored_rto_ignores_the_floor_and_the_backoff() {
        let mut est = RtoEstimator::new(RtoConfig::default());
        assert_eq!(est.unfloored_rto_us(), None);
        est.on_sample(ms(100));
        est.on_timeout();
        // SRTT 100 ms + 4 · 50 ms, while the RTO in force is the 1 s floor doubled.
        assert_eq!(est.unfloored_rto_us(), Some(300_000.0));
        assert_eq!(est.rto(), Duration::from_secs(2));
    }

    #[test]
    fn granularity_dominates_when_variance_is_tiny() {
        let mut est = no_floor(Weight::W1);
        est.on_sample(Duration::from_micros(400));
        // RTTVAR = 200 µs, K·RTTVAR = 800 µs > G = 250 µs -> RTO = 1200 µs
        assert_eq!(est.rto(), Duration::from_micros(1200));
        for _ in 0..200 {
            est.on_sample(Duration::from_micros(400));
        }
        // RTTVAR decays to ~0, so RTO = SRTT + G = 650 µs
        assert_eq!(est.rto(), Duration::from_micros(650));
    }

    #[test]
    fn min_and_max_clamp_and_backoff_doubles() {
        let config = RtoConfig { max: Duration::from_secs(4), ..RtoConfig::default() };
        let mut est = RtoEstimator::new(config);
        est.on_sample(ms(10));
        assert_eq!(est.rto(), Duration::from_secs(1), "RFC 6298 floor of 1 s");
        est.on_timeout();
        assert_eq!(est.rto(), Duration::from_secs(2));
        est.on_timeout();
        assert_eq!(est.rto(), Duration::from_secs(4));
        est.on_timeout();
        assert_eq!(est.rto(), Duration::from_secs(4), "capped at max");
        assert_eq!(est.backoff_shift(), 3);
        est.on_sample(ms(10));
        assert_eq!(est.rto(), Duration::from_secs(1), "a valid sample clears the backoff");
    }

    /// Hand-computed with K = 2 and G = 100 ms, W1, no floor: R = 40 ms gives SRTT 40,
    /// RTTVAR 20, K·RTTVAR = 40 < G so RTO = 40 + 100 = 140 ms; then R = 80 ms gives
    /// RTTVAR = 0.75·20 + 0.25·40 = 25, SRTT = 0.875·40 + 0.125·80 = 45, K·RTTVAR = 50 < G: RTO 145 ms.
    #[test]
    fn k_and_granularity_knobs_change_the_rto() {
        let config = RtoConfig { k: 2.0, granularity: ms(100), min: Duration::ZERO, ..RtoConfig::default() };
        let mut est = RtoEstimator::new(config);
        est.on_sample(ms(40));
        assert_eq!(est.rto(), ms(140));
        est.on_sample(ms(80));
        assert_eq!(est.srtt(), Some(ms(45)));
        assert_eq!(est.rttvar(), ms(25));
        assert_eq!(est.rto(), ms(145));
        // The same samples with K = 4 and G = 250 µs: 40 + 4·20 = 120 ms, then 45 + 4·25 = 145 ms.
        let mut est = RtoEstimator::new(RtoConfig { min: Duration::ZERO, ..RtoConfig::default() });
        est.on_sample(ms(40));
        assert_eq!(est.rto(), ms(120));
        est.on_sample(ms(80));
        assert_eq!(est.rto(), ms(145));
    }

    #[test]
    fn initial_rto_applies_until_the_first_sample_and_backs_off() {
        let config = RtoConfig { initial: ms(3000), min: ms(200), ..RtoConfig::default() };
        let mut est = RtoEstimator::new(config);
        assert_eq!(est.rto(), ms(3000));
        assert_eq!(est.srtt(), None);
        est.on_timeout();
        assert_eq!(est.rto(), ms(6000), "backoff applies to the initial RTO too");
        est.on_sample(ms(10));
        // SRTT 10, RTTVAR 5, RTO = 10 + 20 = 30 ms, raised to the 200 ms floor.
        assert_eq!(est.rto(), ms(200));
        assert_eq!(est.backoff_shift(), 0);
    }

    #[test]
    fn validate_names_the_bad_knob() {
        let base = RtoConfig::default();
        assert!(base.validate().is_ok());
        assert!(RtoConfig { beta: 1.5, ..base }.validate().unwrap_err().contains("beta"));
        assert!(RtoConfig { k: f64::NAN, ..base }.validate().unwrap_err().contains("K"));
        assert!(RtoConfig { min: ms(5000), max: ms(1000), ..base }.validate().unwrap_err().contains("max"));
        assert!(RtoConfig { initial: Duration::ZERO, ..base }.validate().unwrap_err().contains("initial"));
        for weight in Weight::ALL {
            assert!(base.with_weight(weight).validate().is_ok(), "{weight:?}");
        }
    }

    /// `all` with a retransmission in the middle: only the clean segments are timed (Karn),
    /// and a cumulative ACK over several segments yields one sample per segment.
    #[test]
    fn strategy_all_skips_only_the_retransmitted_segment() {
        let mut s = RttSampler::new(SamplingStrategy::All);
        send(&mut s, 100, t(0), false);
        send(&mut s, 200, t(2), false);
        send(&mut s, 300, t(4), false);
        send(&mut s, 200, t(50), true); // segment 2 resent alone
        assert_eq!(s.on_ack(Seq(300), t(60)), vec![ms(60), ms(56)]);
    }

    /// `some` counts ACKs of new data only, and samples the newest clean segment of an odd ACK.
    #[test]
    fn strategy_some_vector_over_six_acks() {
        let mut s = RttSampler::new(SamplingStrategy::Some);
        for i in 1..=6u32 {
            send(&mut s, i * 100, t(i as u64 * 10), false);
        }
        let got: Vec<Vec<Duration>> = (1..=6u32).map(|i| s.on_ack(Seq(i * 100), t(i as u64 * 10 + 7))).collect();
        assert_eq!(got, vec![vec![ms(7)], vec![], vec![ms(7)], vec![], vec![ms(7)], vec![]]);
    }

    /// `one`: the timed segment is the first sent while none is timed; a retransmission
    /// that covers it cancels the measurement (Karn), the next new segment is timed instead.
    #[test]
    fn strategy_one_karn_then_times_next_new_segment() {
        let mut s = RttSampler::new(SamplingStrategy::One);
        send(&mut s, 100, t(0), false);
        send(&mut s, 200, t(1), false);
        send(&mut s, 100, t(30), true);
        assert_eq!(s.on_ack(Seq(200), t(40)), vec![]);
        send(&mut s, 300, t(41), false);
        send(&mut s, 400, t(42), false);
        assert_eq!(s.on_ack(Seq(400), t(45)), vec![ms(4)]);
    }

    #[test]
    fn weight_and_strategy_parse() {
        assert_eq!(Weight::parse("w5"), Some(Weight::W5));
        assert_eq!(Weight::parse("W10"), None);
        assert_eq!(SamplingStrategy::parse("Some"), Some(SamplingStrategy::Some));
        assert_eq!(SamplingStrategy::parse("most"), None);
        assert!(RtoConfig { alpha: 0.0, ..RtoConfig::default() }.validate().is_err());
    }

    fn t(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    /// Sends the 100-byte segment that ends at `end`.
    fn send(s: &mut RttSampler, end: u32, at: Instant, retransmission: bool) {
        s.on_send(Seq(end - 100), Seq(end), at, retransmission);
    }

    #[test]
    fn strategy_all_samples_every_acked_segment() {
        let mut s = RttSampler::new(SamplingStrategy::All);
        send(&mut s, 100, t(0), false);
        send(&mut s, 200, t(1), false);
        send(&mut s, 300, t(2), false);
        assert_eq!(s.on_ack(Seq(200), t(10)), vec![ms(10), ms(9)]);
        assert_eq!(s.on_ack(Seq(300), t(12)), vec![ms(10)]);
    }

    #[test]
    fn strategy_one_times_one_segment_per_window() {
        let mut s = RttSampler::new(SamplingStrategy::One);
        send(&mut s, 100, t(0), false);
        send(&mut s, 200, t(1), false);
        assert_eq!(s.on_ack(Seq(100), t(5)), vec![ms(5)]);
        assert_eq!(s.on_ack(Seq(200), t(6)), vec![], "segment 2 was not timed");
        send(&mut s, 300, t(7), false);
        assert_eq!(s.on_ack(Seq(300), t(9)), vec![ms(2)]);
    }

    #[test]
    fn strategy_some_samples_alternate_acks() {
        let mut s = RttSampler::new(SamplingStrategy::Some);
        for i in 1..=4u32 {
            send(&mut s, i * 100, t(i as u64), false);
        }
        assert_eq!(s.on_ack(Seq(100), t(11)), vec![ms(10)], "1st ack sampled");
        assert_eq!(s.on_ack(Seq(200), t(12)), vec![], "2nd ack skipped");
        assert_eq!(s.on_ack(Seq(400), t(14)), vec![ms(10)], "3rd ack samples newest segment");
    }

    #[test]
    fn karn_never_samples_retransmitted_segments() {
        for strategy in [SamplingStrategy::All, SamplingStrategy::One, SamplingStrategy::Some] {
            let mut s = RttSampler::new(strategy);
            send(&mut s, 100, t(0), false);
            s.on_retransmit_all();
            send(&mut s, 100, t(1000), true);
            assert_eq!(s.on_ack(Seq(100), t(1001)), vec![], "{strategy:?}");
        }
    }
}
