//! No congestion control: the window is unlimited, so the sender is bounded only by the
//! peer's advertised receive window — what the studies' bare PC stack did.
use super::{Acked, CongestionControl, Phase, RttStats};
use crate::time::Instant;

#[derive(Debug, Clone)]
pub struct NoCongestionControl {
    _mss: usize,
}

impl NoCongestionControl {
    pub fn new(mss: usize) -> Self {
        NoCongestionControl { _mss: mss }
    }
}

impl CongestionControl for NoCongestionControl {
    fn name(&self) -> &'static str {
        "none"
    }

    fn window(&self) -> usize {
        usize::MAX
    }

    fn phase(&self) -> Phase {
        Phase::Unlimited
    }

    fn on_sent(&mut self, _now: Instant, _bytes: usize, _in_flight: usize) {}

    fn on_ack(&mut self, _now: Instant, _acked: Acked, _rtt: &RttStats) {}

    fn on_congestion_event(&mut self, _now: Instant, _in_flight: usize, _rtt: &RttStats) {}

    fn on_recovery_end(&mut self, _now: Instant) {}

    fn on_rto_expired(&mut self, _now: Instant, _in_flight: usize, _first: bool) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CcKind;

    #[test]
    fn none_never_limits() {
        let mut cc = CcKind::None.build(1460, 10, crate::cc::SlowStart::default());
        cc.on_rto_expired(Instant::ZERO, 10_000, true);
        cc.on_congestion_event(Instant::ZERO, 10_000, &RttStats::default());
        assert_eq!(cc.window(), usize::MAX);
        assert_eq!(cc.name(), "none");
        assert_eq!(CcKind::parse("none"), Some(CcKind::None));
        assert_eq!(CcKind::parse("vegas"), None);
    }
}
