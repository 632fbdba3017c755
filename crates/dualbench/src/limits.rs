//! The open-file limit: thousands of sockets need more than the usual soft limit of 1024.

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct NofileStatus {
    pub soft_before: u64,
    pub soft: u64,
    pub hard: u64,
    pub needed: u64,
    pub enough: bool,
}

/// Raise the soft limit to the hard one (and the hard one to `needed` when allowed, i.e.
/// as root up to fs.nr_open). Never lowers anything.
pub fn raise_nofile(needed: u64) -> NofileStatus {
    let (soft_before, hard_before) = getrlimit(Resource::RLIMIT_NOFILE).unwrap_or((1024, 1024));
    if hard_before < needed {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, needed, needed);
    }
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap_or((soft_before, hard_before));
    if soft_before < hard {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap_or((soft_before, hard_before));
    NofileStatus { soft_before, soft, hard, needed, enough: soft >= needed }
}

/// Sockets a run may hold at once, plus room for the runtime and stdio.
pub fn sockets_needed(concurrent: u64) -> u64 {
    concurrent.saturating_add(64)
}

pub fn warn_if_short(status: &NofileStatus) {
    if !status.enough {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "dualbench: warning: open-file limit is {} (hard {}), below the {} this run may need; \
             fetches past it fail and are counted as 'emfile' (raise `ulimit -Hn` or run as root)",
            status.soft, status.hard, status.needed
        );
    }
}
