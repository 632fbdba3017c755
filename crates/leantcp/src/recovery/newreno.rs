//! NewReno (RFC 6582) with limited transmit (RFC 3042), for peers without SACK.
//!
//! The third duplicate ACK marks the first unacknowledged segment lost (fast retransmit),
//! sets `recover` = the highest sequence sent and starts recovery; the window is inflated
//! by one MSS per duplicate ACK (3 at entry). A partial ACK (below `recover`) marks the
//! next unacknowledged segment lost and deflates the inflation by the bytes it acknowledged
//! (adding one MSS back if it acknowledged at least one); a full ACK ends recovery. A new
//! recovery starts only once the cumulative ACK has passed `recover` (§3.2 step 2), so a
//! timeout's retransmissions do not trigger a second reduction. Before recovery, the first
//! and second duplicate ACKs each allow one new segment beyond cwnd (RFC 3042).
use super::episode::Episode;
use super::{AckInfo, AckOutcome, LossRecovery, RtoAction, Scoreboard, DUP_THRESH};
use crate::seq::Seq;

#[derive(Debug, Clone)]
pub struct NewReno {
    mss: usize,
    limited_transmit: bool,
    /// In recovery, and `recover` (RFC 6582 §3.2).
    episode: Episode,
    /// RFC 6582's window inflation, bytes (during recovery).
    inflation_bytes: usize,
    /// Duplicate ACKs before recovery, for limited transmit.
    dup_acks: u32,
}

impl NewReno {
    pub fn new(mss: usize, limited_transmit: bool) -> Self {
        NewReno { mss: mss.max(1), limited_transmit, episode: Episode::new(false), inflation_bytes: 0, dup_acks: 0 }
    }
}

impl LossRecovery for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    fn uses_scoreboard(&self) -> bool {
        true
    }

    fn on_ack(&mut self, sb: &mut Scoreboard, a: &AckInfo) -> AckOutcome {
        let mut out = AckOutcome::default();
        if a.acked_bytes > 0 {
            self.dup_acks = 0;
            if self.episode.active() {
                if self.episode.ends_with(a.ack) {
                    self.inflation_bytes = 0;
                    out.recovery_ended = true;
                } else {
                    // Partial ACK: retransmit the first unacknowledged segment, deflate.
                    sb.mark_first_lost();
                    self.inflation_bytes = self.inflation_bytes.saturating_sub(a.acked_bytes);
                    if a.acked_bytes >= self.mss {
                        self.inflation_bytes += self.mss;
                    }
                }
            }
            return out;
        }
        if !a.duplicate {
            return out;
        }
        if self.episode.active() {
            self.inflation_bytes += self.mss;
            return out;
        }
        self.dup_acks = a.dup_acks;
        if a.dup_acks >= DUP_THRESH && self.episode.may_enter(a.ack) {
            self.episode.enter(a.snd_max);
            self.inflation_bytes = DUP_THRESH as usize * self.mss;
            self.dup_acks = 0;
            sb.mark_first_lost();
            out.congestion_event = true;
        }
        out
    }

    fn on_loss_detected(&mut self, snd_una: Seq, snd_max: Seq) -> bool {
        let entered = self.episode.enter_on_loss(snd_una, snd_max);
        if entered {
            self.inflation_bytes = 0;
        }
        entered
    }

    fn on_rto(&mut self, sb: &mut Scoreboard, snd_max: Seq) -> RtoAction {
        sb.mark_all_lost();
        self.episode.after_timeout(snd_max);
        self.inflation_bytes = 0;
        self.dup_acks = 0;
        RtoAction::MarkAllLost
    }

    fn in_recovery(&self) -> bool {
        self.episode.active()
    }

    fn pipe(&self, sb: &Scoreboard, _bytes_in_flight: usize) -> usize {
        sb.pipe()
    }

    fn extra_window(&self) -> usize {
        if self.episode.active() {
            self.inflation_bytes
        } else if self.limited_transmit {
            self.dup_acks.min(2) as usize * self.mss
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;

    fn board(segments: u32) -> Scoreboard {
        let mut sb = Scoreboard::default();
        for i in 0..segments {
            sb.on_sent(Seq(i * 100), Seq(i * 100 + 100), Instant::ZERO);
        }
        sb
    }

    fn dup(n: u32) -> AckInfo {
        AckInfo {
            ack: Seq(0),
            acked_bytes: 0,
            duplicate: true,
            dup_acks: n,
            newly_sacked_bytes: 0,
            snd_max: Seq(1000),
            mss: 100,
        }
    }

    fn new_ack(ack: u32, bytes: usize) -> AckInfo {
        AckInfo {
            ack: Seq(ack),
            acked_bytes: bytes,
            duplicate: false,
            dup_acks: 0,
            newly_sacked_bytes: 0,
            snd_max: Seq(1000),
            mss: 100,
        }
    }

    #[test]
    fn limited_transmit_then_fast_retransmit_then_partial_and_full_ack() {
        let mut sb = board(10);
        let mut nr = NewReno::new(100, true);
        assert_eq!(nr.on_ack(&mut sb, &dup(1)), AckOutcome::default());
        assert_eq!(nr.extra_window(), 100, "RFC 3042: one segment beyond cwnd after the first dup ACK");
        nr.on_ack(&mut sb, &dup(2));
        assert_eq!(nr.extra_window(), 200);
        let out = nr.on_ack(&mut sb, &dup(3));
        assert!(out.congestion_event && nr.in_recovery());
        assert_eq!(sb.next_lost(), Some((Seq(0), Seq(100))), "fast retransmit of the first segment");
        assert_eq!(nr.extra_window(), 300, "inflated by 3 MSS");
        nr.on_ack(&mut sb, &dup(4));
        assert_eq!(nr.extra_window(), 400);
        // The retransmission is sent; a partial ACK covers segments 0..3 (400 bytes).
        sb.on_sent(Seq(0), Seq(100), Instant::ZERO);
        sb.on_cumulative_ack(Seq(400), &mut Vec::new());
        let out = nr.on_ack(&mut sb, &new_ack(400, 400));
        assert!(!out.recovery_ended && nr.in_recovery(), "partial ACK stays in recovery");
        assert_eq!(sb.next_lost(), Some((Seq(400), Seq(500))), "partial ACK retransmits the next hole");
        assert_eq!(nr.extra_window(), 100, "deflated by 400, one MSS added back");
        sb.on_cumulative_ack(Seq(1000), &mut Vec::new());
        let out = nr.on_ack(&mut sb, &new_ack(1000, 600));
        assert!(out.recovery_ended && !nr.in_recovery());
        assert_eq!(nr.extra_window(), 0);
    }

    #[test]
    fn no_second_reduction_until_recover_is_passed_and_limited_transmit_can_be_off() {
        let mut sb = board(10);
        let mut nr = NewReno::new(100, false);
        nr.on_ack(&mut sb, &dup(1));
        assert_eq!(nr.extra_window(), 0, "limited transmit off");
        assert_eq!(nr.on_rto(&mut sb, Seq(1000)), RtoAction::MarkAllLost);
        // Duplicate ACKs while SND.UNA is still below `recover` (the timeout's snd_max).
        assert!(!nr.on_ack(&mut sb, &dup(3)).congestion_event);
        assert!(!nr.on_loss_detected(Seq(500), Seq(1000)));
        assert!(nr.on_loss_detected(Seq(1001), Seq(2000)), "past recover a new event may start");
    }
}
