//! linkem: a user-space link emulator for kernels without netem.
//!
//! The kernel queues each forwarded packet to an NFQUEUE; linkem decides its fate with the
//! pure [`scheduler`], holds it in a bounded [`held`] queue and issues the verdict when its
//! release time comes. Rate and queueing stay with the kernel's qdiscs (HTB/TBF).
#![forbid(unsafe_code)]

pub mod held;
pub mod scheduler;
pub mod stats;
