//! No congestion control: the window is unlimited, so the sender is bounded only by the
//! peer's advertised receive window — what the studies' bare PC stack did.
use core::time::Duration;

use super::CongestionControl;
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

    fn on_ack(&mut self, _now: Instant, _acked: usize, _in_flight: usize, _rtt: Option<Duration>) {}

    fn on_duplicate_ack(&mut self, _now: Instant, _in_flight: usize) {}

    fn on_timeout(&mut self, _now: Instant) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CcKind;

    #[test]
    fn none_never_limits() {
        let mut cc = CcKind::None.build(1460);
        cc.on_timeout(Instant::ZERO);
        cc.on_duplicate_ack(Instant::ZERO, 10_000);
        assert_eq!(cc.window(), usize::MAX);
        assert_eq!(cc.name(), "none");
        assert_eq!(CcKind::parse("none"), Some(CcKind::None));
        assert_eq!(CcKind::parse("cubic"), None, "later issue");
    }
}
