//! The analyzer's one error type: what stops an analysis (as opposed to a malformed frame,
//! which is counted and skipped, or a cut capture, which ends it early with a warning).

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Open { path: String, source: io::Error },
    #[error("not a pcap/pcapng file ({0})")]
    NotAPcap(String),
    #[error("reading the capture: {0}")]
    Read(io::Error),
    #[error("writing {what}: {source}")]
    Write {
        what: &'static str,
        source: io::Error,
    },
}

impl TraceError {
    pub(crate) fn write(what: &'static str) -> impl FnOnce(io::Error) -> TraceError {
        move |source| TraceError::Write { what, source }
    }
}
