//! The studies' bare stack: no fast retransmit; on a timeout resend all outstanding data.
use super::{LossRecovery, RecoveryAction};

#[derive(Debug, Clone, Copy, Default)]
pub struct GoBackN;

impl LossRecovery for GoBackN {
    fn name(&self) -> &'static str {
        "go-back-n"
    }

    fn on_timeout(&mut self) -> RecoveryAction {
        RecoveryAction::GoBackN
    }

    fn on_duplicate_ack(&mut self, _count: u32) -> RecoveryAction {
        // No fast retransmit: duplicate ACKs are ignored.
        RecoveryAction::None
    }

    fn on_new_ack(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_rewinds_and_dup_acks_do_nothing() {
        let mut policy = GoBackN;
        assert_eq!(policy.on_timeout(), RecoveryAction::GoBackN);
        assert_eq!(policy.on_duplicate_ack(3), RecoveryAction::None);
    }
}
