//! traceanalyze: per-connection TCP analysis of a server-side capture in one streaming pass.
//!
//! Reads a pcap or pcapng once (`pcap-parser`), leaves out frames recorded twice (dedup.rs),
//! decodes headers with `etherparse`, keeps state per connection only, and writes a typed NDJSON summary (per connection, per port,
//! read statistics), RTT samples and per-flow series as CSV files. The definitions are those
//! of python/src/congestlab/analysis/metrics.py; docs/trace-analysis.md is the format.
#![forbid(unsafe_code)]

pub mod analyze;
pub mod capture;
pub mod decode;
pub mod dedup;
pub mod error;
pub mod flow;
pub mod output;
pub mod segment_trace;
pub mod seq;

pub use analyze::{analyze, Config, Outcome, Sinks};
pub use error::TraceError;
