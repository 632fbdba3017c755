//! leansim: leanweb's server (its [`leanweb::stack::Stack`]) in leantcp's in-memory network,
//! behind one bottleneck with competing flows, in virtual time — the simulation half of
//! `congestlab simulate` (docs/simulation.md). A run writes the pcap a capture at the
//! server would hold, so the emulation's analysis measures both the same way.
#![forbid(unsafe_code)]
pub mod network;
pub mod pcap;
pub mod scenario;

pub use network::{Network, Outcome, SimError};
pub use scenario::Scenario;
