//! The studies' bare stack: no fast retransmit; on a timeout resend all outstanding data.
use super::{AckInfo, AckOutcome, LossRecovery, RtoAction, Scoreboard};
use crate::seq::Seq;

#[derive(Debug, Clone, Copy, Default)]
pub struct GoBackN;

impl LossRecovery for GoBackN {
    fn name(&self) -> &'static str {
        "go-back-n"
    }

    fn uses_scoreboard(&self) -> bool {
        false
    }

    /// No fast retransmit: duplicate ACKs are ignored.
    fn on_ack(&mut self, _sb: &mut Scoreboard, _ack: &AckInfo) -> AckOutcome {
        AckOutcome::default()
    }

    fn on_loss_detected(&mut self, _snd_una: Seq, _snd_max: Seq) -> bool {
        false
    }

    fn on_rto(&mut self, _sb: &mut Scoreboard, _snd_max: Seq) -> RtoAction {
        RtoAction::GoBackN
    }

    fn in_recovery(&self) -> bool {
        false
    }

    fn pipe(&self, _sb: &Scoreboard, bytes_in_flight: usize) -> usize {
        bytes_in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_rewinds_and_dup_acks_do_nothing() {
        let mut policy = GoBackN;
        let mut sb = Scoreboard::default();
        assert_eq!(policy.on_rto(&mut sb, Seq(0)), RtoAction::GoBackN);
        let dup = AckInfo {
            ack: Seq(0),
            acked_bytes: 0,
            duplicate: true,
            dup_acks: 3,
            newly_sacked_bytes: 0,
            snd_max: Seq(9000),
            mss: 1000,
        };
        assert_eq!(policy.on_ack(&mut sb, &dup), AckOutcome::default());
        assert_eq!(policy.pipe(&sb, 9000), 9000);
    }
}
