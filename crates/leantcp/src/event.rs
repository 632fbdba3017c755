//! What a connection reports: its states, the events its owner polls ([`Event`]), the last
//! transmission ([`Transmission`]) and its running totals ([`ConnectionStats`]).
use crate::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
    Closed,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::SynSent => "SYN-SENT",
            State::SynReceived => "SYN-RECEIVED",
            State::Established => "ESTABLISHED",
            State::FinWait1 => "FIN-WAIT-1",
            State::FinWait2 => "FIN-WAIT-2",
            State::CloseWait => "CLOSE-WAIT",
            State::Closing => "CLOSING",
            State::LastAck => "LAST-ACK",
            State::TimeWait => "TIME-WAIT",
            State::Closed => "CLOSED",
        }
    }
}

/// Why a segment was sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetransmitKind {
    /// The bare stack's rewind after a timeout.
    GoBackN,
    /// SYN or SYN-ACK sent again.
    Handshake,
    /// Marked lost by the retransmission timeout (scoreboard policies).
    Timeout,
    /// Marked lost by fast retransmit, a partial ACK, SACK or RACK.
    Recovery,
    /// RFC 8985 tail loss probe.
    TailLossProbe,
    /// Zero-window probe byte.
    WindowProbe,
}

impl RetransmitKind {
    pub fn name(self) -> &'static str {
        match self {
            RetransmitKind::GoBackN => "go-back-n",
            RetransmitKind::Handshake => "handshake",
            RetransmitKind::Timeout => "timeout",
            RetransmitKind::Recovery => "recovery",
            RetransmitKind::TailLossProbe => "tail-loss-probe",
            RetransmitKind::WindowProbe => "window-probe",
        }
    }
}

/// One segment carrying sequence space, as the last `poll_transmit` returned it, with the
/// RTO state when it left (leanweb logs it once the frame is written).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transmission {
    pub seq: u32,
    pub payload_len: usize,
    pub syn: bool,
    pub fin: bool,
    /// Carries sequence space sent before (below SND.MAX).
    pub retransmission: bool,
    /// Why it was sent again; meaningful only for a retransmission.
    pub kind: RetransmitKind,
    pub sent_at: Instant,
    pub srtt_us: Option<u64>,
    pub rttvar_us: u64,
    /// SRTT + max(G, K·RTTVAR) without floor, cap or backoff; `None` before the first sample.
    pub rto_unfloored_us: Option<f64>,
    /// The RTO in force: floored, capped and backed off.
    pub rto_us: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    StateChanged {
        from: State,
        to: State,
    },
    RttSample {
        rtt_us: u64,
        srtt_us: u64,
        rttvar_us: u64,
        rto_us: u64,
    },
    Timeout {
        rto_us: u64,
        backoff_shift: u32,
        outstanding_bytes: usize,
    },
    Retransmit {
        seq: u32,
        len: usize,
        kind: RetransmitKind,
    },
    /// An ACK advanced SND.UNA to `ack` at `at` (the RTO replay re-runs the sampler on these);
    /// `cwnd_bytes` is the congestion window before this ACK's update (`None` without one).
    NewAck {
        ack: u32,
        at: Instant,
        cwnd_bytes: Option<usize>,
    },
    /// Loss recovery began (`entered`) or ended; the window after the change.
    Recovery {
        entered: bool,
        cwnd_bytes: usize,
        ssthresh_bytes: usize,
    },
    /// An ACK moved the controller to another phase (slow start, HyStart++'s CSS, congestion
    /// avoidance); the window after the change. Loss responses are `Recovery`/`Timeout`.
    CcPhase {
        phase: &'static str,
        cwnd_bytes: usize,
        ssthresh_bytes: usize,
    },
    TailLossProbe {
        seq: u32,
        retransmission: bool,
    },
    ZeroWindowProbe {
        seq: u32,
    },
    ResetReceived,
    Aborted {
        reason: &'static str,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    pub segments_sent: u64,
    pub segments_received: u64,
    pub bytes_sent: u64,
    pub bytes_retransmitted: u64,
    pub retransmissions: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub timeouts: u64,
    pub rtt_samples: u64,
    /// RTT samples taken from timestamp echoes (RFC 7323) where Karn's rule gave none.
    pub timestamp_rtt_samples: u64,
    pub duplicate_acks: u64,
    pub recoveries: u64,
    pub tail_loss_probes: u64,
    pub rack_marked_lost: u64,
    pub out_of_order_segments: u64,
    pub events_dropped: u64,
}
