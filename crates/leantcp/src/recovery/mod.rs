//! Loss recovery as a policy separate from congestion control.
//!
//! This issue needs only [`go_back_n`]: after a timeout, resend everything outstanding.
//! SACK-based recovery and fast retransmit/NewReno become further policies here.
pub mod go_back_n;

/// What the connection must do about lost data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryAction {
    /// Nothing to do.
    None,
    /// Rewind SND.NXT to SND.UNA: every outstanding byte is sent again.
    GoBackN,
    /// Resend only the first unacknowledged segment (the seam for fast retransmit).
    RetransmitFirst,
}

pub trait LossRecovery: core::fmt::Debug + Send {
    fn name(&self) -> &'static str;
    fn on_timeout(&mut self) -> RecoveryAction;
    /// `count` duplicate ACKs in a row have arrived.
    fn on_duplicate_ack(&mut self, count: u32) -> RecoveryAction;
    /// New data was acknowledged.
    fn on_new_ack(&mut self);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryKind {
    #[default]
    GoBackN,
}

impl RecoveryKind {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "go-back-n" | "gbn" => Some(RecoveryKind::GoBackN),
            _ => None,
        }
    }

    pub fn build(self) -> Box<dyn LossRecovery> {
        match self {
            RecoveryKind::GoBackN => Box::new(go_back_n::GoBackN),
        }
    }
}
