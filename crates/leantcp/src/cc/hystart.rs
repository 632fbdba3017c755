//! HyStart++ (RFC 9406): leaves the initial slow start when the round trip time rises, before
//! the queue overflows.
//!
//! Rounds: a round ends when the cumulative ACK reaches `windowEnd`, the highest sequence
//! sent when the round began (§4.2). Per round the minimum RTT sample is kept; once a round
//! has N_RTT_SAMPLE samples and its minimum is at least RttThresh = clamp(last round's
//! minimum / 8, 4 ms, 16 ms) above the previous round's, slow start gives way to Conservative
//! Slow Start (CSS): the window grows by a quarter of slow start's increase. If a CSS round's
//! minimum falls back below the RTT that started CSS, the rise was jitter: slow start resumes.
//! After CSS_ROUNDS rounds of CSS, congestion avoidance begins (ssthresh = cwnd). A loss
//! during slow start or CSS ends HyStart++ (the controller's normal response). Only the
//! initial slow start uses it (§4.3: slow start after a timeout is standard).
//!
//! Not here: L (the per-ACK increase limit) — leantcp's slow start has its own, RFC 3465's
//! (crate::cc::SlowStart, 2·SMSS by default), below RFC 9406's L = 8 for unpaced senders.
use core::time::Duration;

use crate::seq::Seq;

/// RFC 9406 §4.3 constants.
pub const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
pub const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
pub const MIN_RTT_DIVISOR: u32 = 8;
pub const N_RTT_SAMPLE: u32 = 8;
pub const CSS_GROWTH_DIVISOR: usize = 4;
pub const CSS_ROUNDS: u32 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Standard slow start, watching the RTT.
    SlowStart,
    /// Conservative Slow Start after a delay increase.
    Css,
    /// Left for good: CSS ended, a loss, or a timeout.
    Done,
}

/// What the controller does with one ACK in slow start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Grow the window by slow start's increase divided by this (1, or 4 in CSS).
    Grow { divisor: usize },
    /// CSS is over: ssthresh = cwnd, congestion avoidance from now on.
    EnterAvoidance,
}

#[derive(Debug, Clone)]
pub struct HyStartPlusPlus {
    phase: Phase,
    window_end: Option<Seq>,
    last_round_min_rtt: Option<Duration>,
    current_round_min_rtt: Option<Duration>,
    rtt_sample_count: u32,
    css_baseline_min_rtt: Option<Duration>,
    css_rounds: u32,
}

impl Default for HyStartPlusPlus {
    fn default() -> Self {
        HyStartPlusPlus {
            phase: Phase::SlowStart,
            window_end: None,
            last_round_min_rtt: None,
            current_round_min_rtt: None,
            rtt_sample_count: 0,
            css_baseline_min_rtt: None,
            css_rounds: 0,
        }
    }
}

/// RttThresh = max(4 ms, min(lastRoundMinRTT / 8, 16 ms)).
pub fn rtt_thresh(last_round_min_rtt: Duration) -> Duration {
    (last_round_min_rtt / MIN_RTT_DIVISOR).clamp(MIN_RTT_THRESH, MAX_RTT_THRESH)
}

impl HyStartPlusPlus {
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// One ACK of new data while cwnd < ssthresh: `ack` its cumulative ACK, `snd_max` the
    /// highest sequence sent so far, `rtt` the ACK's RTT sample if it gave one.
    pub fn on_ack(&mut self, ack: Seq, snd_max: Seq, rtt: Option<Duration>) -> Step {
        if self.phase == Phase::Done {
            return Step::Grow { divisor: 1 };
        }
        match self.window_end {
            None => self.start_round(snd_max),
            Some(end) if ack >= end => {
                if self.phase == Phase::Css {
                    self.css_rounds += 1;
                    if self.css_rounds >= CSS_ROUNDS {
                        self.phase = Phase::Done;
                        return Step::EnterAvoidance;
                    }
                }
                self.start_round(snd_max);
            }
            Some(_) => {}
        }
        if let Some(rtt) = rtt {
            self.current_round_min_rtt = Some(self.current_round_min_rtt.map_or(rtt, |m| m.min(rtt)));
            self.rtt_sample_count += 1;
        }
        if self.rtt_sample_count >= N_RTT_SAMPLE {
            match (self.phase, self.current_round_min_rtt, self.last_round_min_rtt) {
                (Phase::SlowStart, Some(current), Some(last)) if current >= last + rtt_thresh(last) => {
                    self.phase = Phase::Css;
                    self.css_baseline_min_rtt = Some(current);
                    self.css_rounds = 0;
                }
                (Phase::Css, Some(current), _) if self.css_baseline_min_rtt.is_some_and(|base| current < base) => {
                    // The rise was jitter: back to slow start (§4.2).
                    self.phase = Phase::SlowStart;
                    self.css_baseline_min_rtt = None;
                }
                _ => {}
            }
        }
        Step::Grow { divisor: if self.phase == Phase::Css { CSS_GROWTH_DIVISOR } else { 1 } }
    }

    /// A loss or a timeout: HyStart++ is over for this connection (§4.2, §4.3).
    pub fn on_congestion(&mut self) {
        self.phase = Phase::Done;
    }

    fn start_round(&mut self, snd_max: Seq) {
        self.window_end = Some(snd_max);
        self.last_round_min_rtt = self.current_round_min_rtt;
        self.current_round_min_rtt = None;
        self.rtt_sample_count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// One round: `acks` ACKs from `start` up to below `end`, each with an RTT sample of `rtt`,
    /// while `end` is the highest sequence sent. The first (at `start`, the previous round's
    /// window end) opens the round. Returns the last step.
    fn round(h: &mut HyStartPlusPlus, start: u32, end: u32, acks: u32, rtt: Duration) -> Step {
        let mut step = Step::Grow { divisor: 1 };
        for i in 0..acks {
            step = h.on_ack(Seq(start + (end - start) * i / acks), Seq(end), Some(rtt));
        }
        step
    }

    #[test]
    fn thresholds_are_rfc_9406s() {
        assert_eq!(rtt_thresh(ms(1)), ms(4), "floor 4 ms");
        assert_eq!(rtt_thresh(ms(80)), ms(10), "RTT / 8");
        assert_eq!(rtt_thresh(ms(400)), ms(16), "ceiling 16 ms");
    }

    #[test]
    fn a_delay_increase_enters_css_and_css_rounds_end_slow_start() {
        let mut h = HyStartPlusPlus::default();
        round(&mut h, 0, 1000, 10, ms(10));
        // 13.9 ms is below 10 + 4 ms: still slow start.
        assert_eq!(round(&mut h, 1000, 2000, 10, Duration::from_micros(13_900)), Step::Grow { divisor: 1 });
        assert_eq!(h.phase(), Phase::SlowStart);
        // 18 ms ≥ 13.9 + 4 ms, decided at the 8th sample of the round: CSS, a quarter of the growth.
        for i in 0..7u32 {
            assert_eq!(
                h.on_ack(Seq(2000 + i * 100), Seq(4000), Some(ms(18))),
                Step::Grow { divisor: 1 },
                "sample {}",
                i + 1
            );
        }
        assert_eq!(h.on_ack(Seq(2700), Seq(4000), Some(ms(18))), Step::Grow { divisor: CSS_GROWTH_DIVISOR });
        assert_eq!(h.phase(), Phase::Css);
        // The RTT stays high: CSS_ROUNDS rounds later congestion avoidance begins.
        let mut start = 4000;
        for css_round in 1..CSS_ROUNDS {
            assert_eq!(
                round(&mut h, start, start * 2, 10, ms(18)),
                Step::Grow { divisor: CSS_GROWTH_DIVISOR },
                "CSS round {css_round}"
            );
            start *= 2;
        }
        assert_eq!(h.on_ack(Seq(start), Seq(start * 2), Some(ms(18))), Step::EnterAvoidance);
        assert_eq!(h.phase(), Phase::Done);
        assert_eq!(round(&mut h, start * 2, start * 4, 10, ms(1)), Step::Grow { divisor: 1 }, "done for good");
    }

    #[test]
    fn a_falling_rtt_in_css_resumes_slow_start() {
        let mut h = HyStartPlusPlus::default();
        round(&mut h, 0, 1000, 10, ms(10));
        round(&mut h, 1000, 2000, 10, ms(20));
        assert_eq!(h.phase(), Phase::Css);
        // The next round's minimum is below the 20 ms that started CSS: jitter, not a queue.
        assert_eq!(round(&mut h, 2000, 4000, 10, ms(12)), Step::Grow { divisor: 1 });
        assert_eq!(h.phase(), Phase::SlowStart);
    }

    #[test]
    fn too_few_samples_decide_nothing_and_a_loss_ends_it() {
        let mut h = HyStartPlusPlus::default();
        round(&mut h, 0, 1000, 10, ms(10));
        round(&mut h, 1000, 2000, N_RTT_SAMPLE - 1, ms(50));
        assert_eq!(h.phase(), Phase::SlowStart, "7 samples are not enough");
        h.on_congestion();
        assert_eq!(h.phase(), Phase::Done);
        assert_eq!(round(&mut h, 2000, 3000, 10, ms(90)), Step::Grow { divisor: 1 });
    }
}
