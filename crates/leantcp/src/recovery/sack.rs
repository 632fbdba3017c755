//! Conservative SACK-based loss recovery (RFC 6675) over RFC 2018 SACK blocks.
//!
//! On every ACK the scoreboard's IsLost marks holes with DupThresh SACKed segments (or
//! more than (DupThresh − 1)·MSS SACKed bytes) above them. Recovery starts on the
//! DupThresh-th duplicate ACK or as soon as a hole is deemed lost (§5 step 4), with
//! RecoveryPoint = HighData; the first hole is retransmitted at once. While in recovery
//! the sender keeps `pipe` (SetPipe) below cwnd, resending lost segments first (NextSeg
//! rule 1) and new data next (rule 3). Recovery ends when the cumulative ACK reaches
//! RecoveryPoint. After a timeout every segment not SACKed is lost (§5.1), and a new
//! recovery may start only past the timeout's RecoveryPoint.
//!
//! With RACK-TLP on, RACK replaces the DupThresh rules (IsLost and the DupThresh-th
//! duplicate ACK), as RFC 8985 §3 intends and Linux does: losses come only from RACK's
//! time-based detection (`on_loss_detected`), so reordering within RACK's window does not
//! trigger a retransmission.
use super::episode::Episode;
use super::{AckInfo, AckOutcome, LossRecovery, RtoAction, Scoreboard, DUP_THRESH};
use crate::seq::Seq;

#[derive(Debug, Clone)]
pub struct SackRecovery {
    mss: usize,
    dupthresh_rules: bool,
    /// In recovery, and RecoveryPoint (RFC 6675 §5).
    episode: Episode,
}

impl SackRecovery {
    /// `dupthresh_rules` off when RACK detects losses instead.
    pub fn new(mss: usize, dupthresh_rules: bool) -> Self {
        SackRecovery { mss: mss.max(1), dupthresh_rules, episode: Episode::new(true) }
    }
}

impl LossRecovery for SackRecovery {
    fn name(&self) -> &'static str {
        "sack"
    }

    fn uses_scoreboard(&self) -> bool {
        true
    }

    fn on_ack(&mut self, sb: &mut Scoreboard, a: &AckInfo) -> AckOutcome {
        let mut out = AckOutcome { recovery_ended: self.episode.ends_with(a.ack), ..AckOutcome::default() };
        if !self.dupthresh_rules {
            return out;
        }
        let newly_lost = sb.mark_lost_by_sack(DUP_THRESH as usize, self.mss);
        let loss_signalled = newly_lost > 0 || (a.duplicate && a.dup_acks >= DUP_THRESH);
        if !self.episode.active() && self.episode.may_enter(a.ack) && loss_signalled {
            self.episode.enter(a.snd_max);
            if !sb.has_lost() {
                sb.mark_first_lost(); // §5 step 4.2: retransmit the first segment presumed dropped
            }
            out.congestion_event = true;
        }
        out
    }

    fn on_loss_detected(&mut self, snd_una: Seq, snd_max: Seq) -> bool {
        self.episode.enter_on_loss(snd_una, snd_max)
    }

    fn on_rto(&mut self, sb: &mut Scoreboard, snd_max: Seq) -> RtoAction {
        sb.mark_all_lost();
        self.episode.after_timeout(snd_max);
        RtoAction::MarkAllLost
    }

    fn in_recovery(&self) -> bool {
        self.episode.active()
    }

    fn pipe(&self, sb: &Scoreboard, _bytes_in_flight: usize) -> usize {
        sb.pipe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;

    fn ack(ack: u32, acked: usize, duplicate: bool, dup_acks: u32) -> AckInfo {
        AckInfo {
            ack: Seq(ack),
            acked_bytes: acked,
            duplicate,
            dup_acks,
            newly_sacked_bytes: 0,
            snd_max: Seq(1000),
            mss: 100,
        }
    }

    #[test]
    fn third_sacked_segment_starts_recovery_and_recovery_point_ends_it() {
        let mut sb = Scoreboard::default();
        for i in 0..10u32 {
            sb.on_sent(Seq(i * 100), Seq(i * 100 + 100), Instant::ZERO);
        }
        let mut rec = SackRecovery::new(100, true);
        let mut d = Vec::new();
        for (i, right) in [(1u32, 200u32), (2, 300)] {
            sb.on_sack(&[(Seq(100), Seq(right))], &mut d);
            assert!(!rec.on_ack(&mut sb, &ack(0, 0, true, i)).congestion_event, "dup ACK {i}");
            assert_eq!(sb.next_lost(), None);
        }
        sb.on_sack(&[(Seq(100), Seq(400))], &mut d);
        let out = rec.on_ack(&mut sb, &ack(0, 0, true, 3));
        assert!(out.congestion_event && rec.in_recovery());
        assert_eq!(sb.next_lost(), Some((Seq(0), Seq(100))));
        assert_eq!(rec.pipe(&sb, 1000), 600);
        // Partial ACK: still in recovery.
        sb.on_cumulative_ack(Seq(400), &mut d);
        assert!(!rec.on_ack(&mut sb, &ack(400, 400, false, 0)).recovery_ended);
        sb.on_cumulative_ack(Seq(1000), &mut d);
        assert!(rec.on_ack(&mut sb, &ack(1000, 600, false, 0)).recovery_ended);
        assert!(!rec.in_recovery());
    }

    #[test]
    fn dup_acks_without_sack_blocks_still_trigger_at_dupthresh() {
        let mut sb = Scoreboard::default();
        sb.on_sent(Seq(0), Seq(100), Instant::ZERO);
        sb.on_sent(Seq(100), Seq(200), Instant::ZERO);
        let mut rec = SackRecovery::new(100, true);
        assert!(rec.on_ack(&mut sb, &ack(0, 0, true, 3)).congestion_event);
        assert_eq!(sb.next_lost(), Some((Seq(0), Seq(100))));
    }

    #[test]
    fn with_rack_only_rack_declares_losses() {
        let mut sb = Scoreboard::default();
        for i in 0..10u32 {
            sb.on_sent(Seq(i * 100), Seq(i * 100 + 100), Instant::ZERO);
        }
        sb.on_sack(&[(Seq(100), Seq(600))], &mut Vec::new());
        let mut rec = SackRecovery::new(100, false);
        assert!(!rec.on_ack(&mut sb, &ack(0, 0, true, 5)).congestion_event);
        assert_eq!(sb.next_lost(), None, "no IsLost marking");
        sb.mark_lost_at(0);
        assert!(rec.on_loss_detected(Seq(0), Seq(1000)));
        assert!(rec.in_recovery() && !rec.on_loss_detected(Seq(0), Seq(1000)), "one event per recovery");
    }
}
