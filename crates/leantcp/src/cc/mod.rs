//! Congestion control: a trait and a factory ([`CcKind`]), one module per algorithm.
//!
//! Kept apart from loss recovery (`crate::recovery`) in the manner of gVisor's netstack
//! (`congestionControl` vs `lossRecovery`): recovery decides *what* is lost and what to
//! resend; the controller only sizes the window. The connection builds the controller once
//! the handshake has fixed the MSS.
use core::time::Duration;

use crate::seq::Seq;
use crate::time::Instant;

pub mod compound;
pub mod cubic;
pub mod hystart;
pub mod none;
pub mod reno;

/// Read access to the connection's RTT estimates (RFC 6298 SRTT plus the latest and the
/// minimum sample), for controllers that need delay (CUBIC, Compound, RACK's min RTT).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttStats {
    pub latest: Option<Duration>,
    pub min: Option<Duration>,
    pub srtt: Option<Duration>,
    pub rttvar: Duration,
}

/// One ACK that advanced SND.UNA, as the controller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    pub ack: Seq,
    pub acked_bytes: usize,
    /// Bytes still outstanding after this ACK.
    pub bytes_in_flight: usize,
    /// Loss recovery is in progress (the window is not grown during recovery).
    pub in_recovery: bool,
    /// The highest sequence number sent so far (HyStart++'s round boundary, RFC 9406).
    pub snd_max: Seq,
    /// The smallest RTT sample this ACK gave (Karn-safe, not from a timestamp echo), if any.
    pub rtt_sample: Option<Duration>,
}

impl Acked {
    /// An ACK with no sample, `snd_max` = `ack` (unit tests of the controllers).
    pub fn new(ack: Seq, acked_bytes: usize, in_recovery: bool) -> Self {
        Acked { ack, acked_bytes, bytes_in_flight: 0, in_recovery, snd_max: ack, rtt_sample: None }
    }
}

/// How a controller's slow start grows the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowStart {
    /// RFC 9406 HyStart++ in the initial slow start (Reno and CUBIC).
    pub hystart: bool,
    /// RFC 3465's L: an ACK grows the window by at most this many segments; `None` credits
    /// every acknowledged segment, as Linux's `tcp_slow_start` does. A receiver that ACKs
    /// many segments at once (a stretch ACK) slows a small L's slow start.
    pub ack_limit_segments: Option<usize>,
}

impl Default for SlowStart {
    fn default() -> Self {
        SlowStart { hystart: false, ack_limit_segments: Some(2) }
    }
}

impl SlowStart {
    /// The bytes of an ACK that count toward slow-start growth.
    pub fn credit(&self, acked_bytes: usize, mss: usize) -> usize {
        self.ack_limit_segments.map_or(acked_bytes, |l| acked_bytes.min(l.saturating_mul(mss)))
    }
}

/// Slow start's growth as Reno and CUBIC share it: the per-ACK limit and, if asked, HyStart++
/// in the initial slow start.
#[derive(Debug, Clone)]
pub struct SlowStartGrowth {
    config: SlowStart,
    hystart: Option<hystart::HyStartPlusPlus>,
}

/// One ACK's increase in slow start: `credit_bytes` divided by `divisor` (4 in HyStart++'s CSS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Increase {
    pub credit_bytes: usize,
    pub divisor: usize,
}

impl SlowStartGrowth {
    pub fn new(config: SlowStart) -> Self {
        SlowStartGrowth { config, hystart: config.hystart.then(hystart::HyStartPlusPlus::default) }
    }

    /// One ACK of new data while cwnd < ssthresh: the increase, or `None` when HyStart++ ends
    /// slow start here (the controller sets ssthresh = cwnd).
    pub fn on_ack(&mut self, acked: &Acked, mss: usize) -> Option<Increase> {
        let credit_bytes = self.config.credit(acked.acked_bytes, mss);
        match self.hystart.as_mut().map(|h| h.on_ack(acked.ack, acked.snd_max, acked.rtt_sample)) {
            Some(hystart::Step::EnterAvoidance) => None,
            Some(hystart::Step::Grow { divisor }) => Some(Increase { credit_bytes, divisor }),
            None => Some(Increase { credit_bytes, divisor: 1 }),
        }
    }

    /// A loss or a timeout ends HyStart++ for the connection.
    pub fn on_congestion(&mut self) {
        if let Some(h) = self.hystart.as_mut() {
            h.on_congestion();
        }
    }

    /// The phase of a controller that is (`in_slow_start`) or is not below ssthresh.
    pub fn phase(&self, in_slow_start: bool) -> Phase {
        match (&self.hystart, in_slow_start) {
            (_, false) => Phase::CongestionAvoidance,
            (Some(h), true) if h.phase() == hystart::Phase::Css => Phase::ConservativeSlowStart,
            _ => Phase::SlowStart,
        }
    }
}

/// The controller's phase, for the event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    SlowStart,
    /// HyStart++'s Conservative Slow Start (RFC 9406).
    ConservativeSlowStart,
    CongestionAvoidance,
    /// No congestion window (`none`).
    Unlimited,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::SlowStart => "slow-start",
            Phase::ConservativeSlowStart => "css",
            Phase::CongestionAvoidance => "avoidance",
            Phase::Unlimited => "unlimited",
        }
    }
}

/// What a congestion controller sees and decides: the congestion window in bytes.
pub trait CongestionControl: core::fmt::Debug + Send {
    fn name(&self) -> &'static str;
    /// Bytes the sender may have in flight (the stack also respects the peer's window).
    fn window(&self) -> usize;
    /// Slow-start threshold in bytes (`usize::MAX` when the algorithm has none).
    fn ssthresh(&self) -> usize {
        usize::MAX
    }
    fn phase(&self) -> Phase {
        if self.window() < self.ssthresh() {
            Phase::SlowStart
        } else {
            Phase::CongestionAvoidance
        }
    }
    /// `bytes` of sequence space left (new data or a retransmission).
    fn on_sent(&mut self, now: Instant, bytes: usize, bytes_in_flight: usize);
    /// New data was acknowledged.
    fn on_ack(&mut self, now: Instant, acked: Acked, rtt: &RttStats);
    /// Loss recovery detected a loss (fast retransmit, SACK, RACK, TLP): reduce once per event.
    fn on_congestion_event(&mut self, now: Instant, bytes_in_flight: usize, rtt: &RttStats);
    /// Loss recovery ended (the recovery point was acknowledged).
    fn on_recovery_end(&mut self, now: Instant);
    /// The retransmission timer expired; `first` is false for a repeated timeout of the
    /// same data (RFC 5681 §3.1: ssthresh is then left alone).
    fn on_rto_expired(&mut self, now: Instant, bytes_in_flight: usize, first: bool);
}

/// The algorithm to build; the factory of [`CongestionControl`] objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CcKind {
    /// No congestion control (the bare PC server of the studies).
    #[default]
    None,
    /// RFC 5681 slow start and congestion avoidance, with the Reno window reduction
    /// (halve on a congestion event, one segment after a timeout).
    Reno,
    /// RFC 9438 CUBIC with its Reno-friendly region and fast convergence (cubic.rs).
    Cubic,
    /// Compound TCP, the algorithm of bpf/ctcp.bpf.c with its fixed-point arithmetic
    /// (compound.rs; test vectors shared with bpf/test_ctcp_fixed.c).
    Compound,
}

impl CcKind {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "none" => Some(CcKind::None),
            "reno" | "newreno" => Some(CcKind::Reno),
            "cubic" => Some(CcKind::Cubic),
            "compound" | "ctcp" => Some(CcKind::Compound),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CcKind::None => "none",
            CcKind::Reno => "reno",
            CcKind::Cubic => "cubic",
            CcKind::Compound => "compound",
        }
    }

    /// Builds the controller for a connection whose sender MSS is `mss` bytes, starting
    /// with `initial_window_segments` segments (RFC 6928 caps this by bytes, see reno.rs);
    /// `slow_start`: HyStart++ (Reno and CUBIC; Compound keeps the slow start of
    /// bpf/ctcp.bpf.c, whose kernel counterpart has none) and the per-ACK limit (all three).
    pub fn build(
        self,
        mss: usize,
        initial_window_segments: usize,
        slow_start: SlowStart,
    ) -> Box<dyn CongestionControl> {
        match self {
            CcKind::None => Box::new(none::NoCongestionControl::new(mss)),
            CcKind::Reno => Box::new(reno::Reno::new(mss, initial_window_segments).with_slow_start(slow_start)),
            CcKind::Cubic => Box::new(cubic::Cubic::new(mss, initial_window_segments).with_slow_start(slow_start)),
            CcKind::Compound => {
                Box::new(compound::Compound::new(mss, initial_window_segments).with_slow_start(slow_start))
            }
        }
    }
}
