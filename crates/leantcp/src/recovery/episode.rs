//! The bookkeeping NewReno and SACK recovery share: whether a recovery episode is on, the
//! point whose cumulative ACK ends it (RFC 6582's `recover`, RFC 6675's RecoveryPoint: the
//! highest sequence sent when it began) and when the next one may begin — not before the
//! cumulative ACK has passed the last point, so a timeout's retransmissions, or the partial
//! ACKs of one loss event, never reduce the window twice.
use crate::seq::Seq;

#[derive(Debug, Clone)]
pub struct Episode {
    active: bool,
    point: Option<Seq>,
    /// A new episode may begin with an ACK *at* the last point (RFC 6675 §5), not only
    /// beyond it (RFC 6582 §3.2 step 2).
    reenter_at_point: bool,
}

impl Episode {
    pub fn new(reenter_at_point: bool) -> Self {
        Episode { active: false, point: None, reenter_at_point }
    }

    pub fn active(&self) -> bool {
        self.active
    }

    /// Whether an episode may begin with the cumulative ACK at `ack`.
    pub fn may_enter(&self, ack: Seq) -> bool {
        match self.point {
            None => true,
            Some(point) if self.reenter_at_point => ack >= point,
            Some(point) => ack > point,
        }
    }

    /// Begins an episode that ends once `snd_max` is acknowledged.
    pub fn enter(&mut self, snd_max: Seq) {
        self.active = true;
        self.point = Some(snd_max);
    }

    /// An ACK at or past the point ends the episode: true if this one did. Below it, an
    /// ACK of new data during an episode is a partial ACK.
    pub fn ends_with(&mut self, ack: Seq) -> bool {
        if self.active && self.point.is_some_and(|point| ack >= point) {
            self.active = false;
            return true;
        }
        false
    }

    /// A loss found outside the ACK rules (RACK): begins an episode unless one is on or the
    /// last one's point is not passed yet; true if it began.
    pub fn enter_on_loss(&mut self, snd_una: Seq, snd_max: Seq) -> bool {
        if self.active || !self.may_enter(snd_una) {
            return false;
        }
        self.enter(snd_max);
        true
    }

    /// The retransmission timer fired: the episode (if any) is over, and the next may begin
    /// only past what was sent before the timeout.
    pub fn after_timeout(&mut self, snd_max: Seq) {
        self.active = false;
        self.point = Some(snd_max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_ends_at_its_point_and_the_next_waits_until_past_it() {
        for reenter_at_point in [false, true] {
            let mut e = Episode::new(reenter_at_point);
            assert!(e.may_enter(Seq(0)) && !e.active());
            e.enter(Seq(1000));
            assert!(!e.ends_with(Seq(999)), "a partial ACK");
            assert!(!e.enter_on_loss(Seq(500), Seq(2000)), "one is on");
            assert!(e.ends_with(Seq(1000)) && !e.active());
            assert_eq!(e.may_enter(Seq(1000)), reenter_at_point);
            assert!(e.may_enter(Seq(1001)));
            e.after_timeout(Seq(3000));
            assert!(!e.enter_on_loss(Seq(2000), Seq(3000)));
            assert!(e.enter_on_loss(Seq(3001), Seq(4000)) && e.active());
        }
    }
}
