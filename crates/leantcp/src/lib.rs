//! leantcp: a sans-IO TCP for IPv4 and IPv6, modelled on the studies' "bare PC" stack.
//!
//! No clock, no sockets, no OS: every input carries `now` ([`Instant`]); outputs are
//! polled ([`Connection::poll_transmit`], [`Connection::poll_timeout`]). Timers are data.
//! The same code runs in the deterministic in-memory network ([`sim`]) and in `leanweb`.
//!
//! Reading list: RFC 9293 (TCP), RFC 6298 (RTO), RFC 7323 (window scale, timestamps),
//! RFC 6691 (MSS), RFC 5961 (challenge ACKs), RFC 1122 §4.2.2.17 (zero-window probes),
//! RFC 5681 / RFC 6928 (congestion control, initial window), RFC 6582 (NewReno),
//! RFC 3042 (limited transmit), RFC 2018 / RFC 6675 (SACK, SACK recovery), RFC 8985 (RACK-TLP),
//! RFC 4987 §3.6 (SYN cookies).
#![forbid(unsafe_code)]

pub mod assembler;
pub mod cc;
pub mod config;
pub mod conn;
pub mod event;
pub mod recovery;
pub mod rto;
pub mod segment;
pub mod seq;
pub mod sim;
pub mod syncookie;
pub mod time;
pub mod timer;

pub use config::{Profile, Push, TcpConfig};
pub use conn::Connection;
pub use event::{ConnectionStats, Event, RetransmitKind, State, Transmission};
pub use rto::{RtoConfig, RtoEstimator, SamplingStrategy, Weight};
pub use segment::{Segment, WireError};
pub use seq::Seq;
pub use syncookie::{CookieError, CookieOptions, SynCookies};
pub use time::Instant;
