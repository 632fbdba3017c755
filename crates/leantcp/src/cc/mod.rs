//! Congestion control: a trait and a factory, one module per algorithm.
//!
//! This issue needs only [`none`] (the studies' bare stack: send up to the peer's window).
//! Reno/NewReno, CUBIC and Compound plug in here as further modules and `CcKind` variants.
use core::time::Duration;

use crate::time::Instant;

pub mod none;

/// What a congestion controller sees and decides: the congestion window in bytes.
pub trait CongestionControl: core::fmt::Debug + Send {
    fn name(&self) -> &'static str;
    /// Bytes the sender may have in flight (the stack also respects the peer's window).
    fn window(&self) -> usize;
    /// `acked_bytes` of new data were acknowledged; `rtt` is a sample if this ACK gave one.
    fn on_ack(&mut self, now: Instant, acked_bytes: usize, bytes_in_flight: usize, rtt: Option<Duration>);
    /// A duplicate ACK arrived (used by fast-retransmit algorithms later).
    fn on_duplicate_ack(&mut self, now: Instant, bytes_in_flight: usize);
    /// The retransmission timer expired.
    fn on_timeout(&mut self, now: Instant);
}

/// The algorithm to build; the factory of [`CongestionControl`] objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CcKind {
    /// No congestion control (the bare PC server of the studies).
    #[default]
    None,
}

impl CcKind {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "none" => Some(CcKind::None),
            _ => None,
        }
    }

    pub fn build(self, mss: usize) -> Box<dyn CongestionControl> {
        match self {
            CcKind::None => Box::new(none::NoCongestionControl::new(mss)),
        }
    }
}
