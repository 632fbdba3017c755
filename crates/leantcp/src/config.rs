//! A connection's settings: [`TcpConfig`], the named profiles `bare` (the studies' server,
//! the default) and `modern`, and where PSH goes ([`Push`]).
use core::time::Duration;

use crate::cc::CcKind;
use crate::recovery::RecoveryKind;
use crate::rto::RtoConfig;

/// Named sets of defaults: `bare` (the studies' server) and `modern`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    #[default]
    Bare,
    Modern,
}

impl Profile {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "bare" => Some(Profile::Bare),
            "modern" => Some(Profile::Modern),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Bare => "bare",
            Profile::Modern => "modern",
        }
    }

    pub fn config(self) -> TcpConfig {
        match self {
            Profile::Bare => TcpConfig::bare(),
            Profile::Modern => TcpConfig::modern(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpConfig {
    /// Link MTU; the MSS we advertise is MTU minus IP and TCP headers.
    pub mtu: usize,
    pub send_buffer_bytes: usize,
    /// Send-buffer autotuning (`None`: the buffer stays `send_buffer_bytes`): the buffer grows
    /// to hold two congestion (or peer) windows, as Linux's `tcp_sndbuf_expand` does, never
    /// beyond this many bytes (Linux: `tcp_wmem[2]`, 4 MiB) nor below `send_buffer_bytes`.
    pub send_buffer_max_bytes: Option<usize>,
    pub recv_buffer_bytes: usize,
    /// Our window-scale shift (RFC 7323), used when the peer offers scaling too.
    pub window_scale: u8,
    pub rto: RtoConfig,
    pub cc: CcKind,
    pub recovery: RecoveryKind,
    /// RFC 2018: offer/accept SACK; keep out-of-order data and report it in SACK blocks;
    /// read the peer's blocks into the scoreboard.
    pub sack: bool,
    /// RFC 7323 timestamps.
    pub timestamps: bool,
    /// RFC 8985 RACK-TLP (needs a scoreboard policy: `newreno` or `sack`).
    pub rack_tlp: bool,
    /// RFC 3042 limited transmit (NewReno; SACK's pipe allows the same by itself).
    pub limited_transmit: bool,
    /// Initial congestion window in segments (RFC 6928), for controllers that have one.
    pub initial_window_segments: usize,
    /// RFC 9406 HyStart++ in the initial slow start (Reno and CUBIC).
    pub hystart: bool,
    /// RFC 3465's L, segments credited per ACK in slow start (`None`: all, as Linux).
    pub abc_limit_segments: Option<usize>,
    /// A cap of the sender's own on data in flight, in full segments (`None`: only the
    /// peer's window and the congestion window limit it). The seeds leave the bare PC's
    /// sending open beyond "no congestion control" (docs/leanweb.md).
    pub send_window_segments: Option<usize>,
    /// Pacing of the sender's own (`None`: off): data segments leave at most at this rate,
    /// counting each as its payload plus 40 bytes of IP and TCP header.
    pub pacing_rate_bps: Option<u64>,
    pub time_wait: Duration,
    /// Consecutive retransmission timeouts after which the connection is aborted.
    pub max_timeouts: u32,
    /// Which data segments carry PSH.
    pub push: Push,
}

/// Where the sender sets PSH (RFC 9293 §3.9.1: a push marks the end of what the application
/// has handed over). Receivers here ignore it (Linux's header prediction masks it; GRO is
/// off on every veth), but it decides which segments a GSO super-frame can carry: the
/// kernel's `tcp_gso_segment` clears PSH and FIN on all but the last segment of one
/// (crates/leanweb/src/gso.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Push {
    /// Every segment with payload: the original `bare` stack (its traces in tests/fixtures/bare_traces.txt).
    #[default]
    EverySegment,
    /// Only the segment that carries the last byte in the send buffer, as Linux marks the
    /// last segment of a write (`tcp_mark_push`).
    EndOfData,
}

impl Push {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "every-segment" => Some(Push::EverySegment),
            "end-of-data" => Some(Push::EndOfData),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Push::EverySegment => "every-segment",
            Push::EndOfData => "end-of-data",
        }
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig::bare()
    }
}

impl TcpConfig {
    /// The studies' bare server: no cc, go-back-N, 1 s minimum RTO, nothing optional.
    pub fn bare() -> Self {
        TcpConfig {
            mtu: 1500,
            send_buffer_bytes: 256 * 1024,
            send_buffer_max_bytes: None,
            recv_buffer_bytes: 64 * 1024,
            window_scale: 2,
            rto: RtoConfig::default(),
            cc: CcKind::None,
            recovery: RecoveryKind::GoBackN,
            sack: false,
            timestamps: false,
            rack_tlp: false,
            limited_transmit: false,
            initial_window_segments: 10,
            hystart: false,
            abc_limit_segments: Some(2),
            send_window_segments: None,
            pacing_rate_bps: None,
            time_wait: Duration::from_secs(60),
            max_timeouts: 12,
            push: Push::EverySegment,
        }
    }

    /// SACK recovery + RACK-TLP + timestamps + CUBIC (RFC 9438) with HyStart++ (RFC 9406),
    /// minimum RTO 200 ms (Linux's `TCP_RTO_MIN`), a send buffer autotuned up to 4 MiB (Linux's
    /// default `tcp_wmem[2]`).
    pub fn modern() -> Self {
        let bare = TcpConfig::bare();
        TcpConfig {
            rto: RtoConfig { min: Duration::from_millis(200), ..bare.rto },
            cc: CcKind::Cubic,
            hystart: true,
            send_buffer_max_bytes: Some(4 << 20),
            recovery: RecoveryKind::Sack,
            sack: true,
            timestamps: true,
            rack_tlp: true,
            limited_transmit: true,
            push: Push::EndOfData,
            ..bare
        }
    }

    /// Combinations that cannot work, named.
    pub fn validate(&self) -> Result<(), String> {
        if self.recovery == RecoveryKind::Sack && !self.sack {
            return Err("recovery `sack` needs SACK on".into());
        }
        if self.rack_tlp && self.recovery == RecoveryKind::GoBackN {
            return Err("RACK-TLP needs recovery `newreno` or `sack` (go-back-n keeps no scoreboard)".into());
        }
        if self.initial_window_segments == 0 {
            return Err("initial window must be at least 1 segment".into());
        }
        if self.abc_limit_segments == Some(0) {
            return Err("slow start's per-ACK limit must be at least 1 segment (or none)".into());
        }
        if self.send_window_segments == Some(0) {
            return Err("send window must be at least 1 segment".into());
        }
        if self.pacing_rate_bps == Some(0) {
            return Err("pacing rate must be above 0".into());
        }
        self.rto.validate()
    }
}
