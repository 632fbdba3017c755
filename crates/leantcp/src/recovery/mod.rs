//! Loss recovery as a policy separate from congestion control (gVisor's `lossRecovery`
//! apart from its `congestionControl`): a policy reads ACKs against the sender's
//! [`Scoreboard`], marks segments lost and tells the connection when a congestion event
//! starts or ends; the connection sends what is marked, within the controller's window.
//!
//! - [`go_back_n`]: the studies' bare stack — no fast retransmit; after a timeout every
//!   outstanding byte is sent again.
//! - [`newreno`]: RFC 6582 fast retransmit / fast recovery with partial ACKs, plus RFC 3042
//!   limited transmit.
//! - [`sack`]: RFC 6675 conservative SACK-based recovery over RFC 2018 SACK blocks.
//! - [`rack`]: RFC 8985 RACK-TLP, a time-based loss detector the connection runs beside
//!   NewReno or SACK when enabled.
pub mod episode;
pub mod go_back_n;
pub mod newreno;
pub mod rack;
pub mod sack;
pub mod scoreboard;

pub use scoreboard::{Delivered, Scoreboard, SentSegment};

use crate::seq::Seq;

/// RFC 5681 §3.2 / RFC 6675: duplicate ACKs (or SACKed segments) that signal a loss.
pub const DUP_THRESH: u32 = 3;

/// What the connection does when the retransmission timer expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtoAction {
    /// Rewind SND.NXT to SND.UNA: every outstanding byte is sent again at once.
    GoBackN,
    /// Every segment not SACKed is marked lost on the scoreboard and resent within the
    /// (collapsed) congestion window.
    MarkAllLost,
}

/// One received ACK as a recovery policy sees it (after the scoreboard absorbed it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckInfo {
    pub ack: Seq,
    /// Bytes newly acknowledged cumulatively (0 for a duplicate ACK).
    pub acked_bytes: usize,
    /// RFC 5681 §2 duplicate ACK.
    pub duplicate: bool,
    /// Duplicate ACKs in a row, this one included.
    pub dup_acks: u32,
    /// Bytes newly SACKed by this ACK.
    pub newly_sacked_bytes: usize,
    pub snd_max: Seq,
    /// Sender MSS (payload bytes per full segment).
    pub mss: usize,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckOutcome {
    /// Recovery began: the controller reduces its window once.
    pub congestion_event: bool,
    /// The recovery point was acknowledged.
    pub recovery_ended: bool,
}

pub trait LossRecovery: core::fmt::Debug + Send {
    fn name(&self) -> &'static str;
    /// Whether the connection keeps the scoreboard for this policy.
    fn uses_scoreboard(&self) -> bool;
    fn on_ack(&mut self, sb: &mut Scoreboard, ack: &AckInfo) -> AckOutcome;
    /// Another detector (RACK's reordering timer or ACK processing) marked a loss; returns
    /// whether this starts a congestion event.
    fn on_loss_detected(&mut self, snd_una: Seq, snd_max: Seq) -> bool;
    fn on_rto(&mut self, sb: &mut Scoreboard, snd_max: Seq) -> RtoAction;
    fn in_recovery(&self) -> bool;
    /// Bytes in the network as this policy counts them, given SND.NXT − SND.UNA.
    fn pipe(&self, sb: &Scoreboard, bytes_in_flight: usize) -> usize;
    /// Bytes the sender may have out beyond the congestion window (RFC 3042 limited
    /// transmit, RFC 6582's window inflation during recovery).
    fn extra_window(&self) -> usize {
        0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryKind {
    #[default]
    GoBackN,
    NewReno,
    /// SACK-based recovery; falls back to NewReno when the peer does not permit SACK.
    Sack,
}

impl RecoveryKind {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "go-back-n" | "gbn" => Some(RecoveryKind::GoBackN),
            "newreno" => Some(RecoveryKind::NewReno),
            "sack" => Some(RecoveryKind::Sack),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RecoveryKind::GoBackN => "go-back-n",
            RecoveryKind::NewReno => "newreno",
            RecoveryKind::Sack => "sack",
        }
    }

    /// Builds the policy once the handshake has fixed the MSS and whether SACK is in use;
    /// with `rack` on, SACK recovery leaves loss detection to RACK.
    pub fn build(self, mss: usize, sack_in_use: bool, limited_transmit: bool, rack: bool) -> Box<dyn LossRecovery> {
        match self {
            RecoveryKind::GoBackN => Box::new(go_back_n::GoBackN),
            RecoveryKind::Sack if sack_in_use => Box::new(sack::SackRecovery::new(mss, !rack)),
            RecoveryKind::NewReno | RecoveryKind::Sack => Box::new(newreno::NewReno::new(mss, limited_transmit)),
        }
    }
}
