//! Virtual time: the stack never reads a clock, callers pass `now`.
use core::time::Duration;

/// A point in time, in microseconds since an arbitrary epoch chosen by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant {
    micros: u64,
}

impl Instant {
    pub const ZERO: Instant = Instant { micros: 0 };

    pub const fn from_micros(micros: u64) -> Self {
        Instant { micros }
    }

    pub const fn from_millis(millis: u64) -> Self {
        Instant { micros: millis * 1000 }
    }

    pub const fn as_micros(self) -> u64 {
        self.micros
    }

    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.micros.saturating_sub(earlier.micros))
    }
}

impl core::ops::Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant { micros: self.micros.saturating_add(rhs.as_micros().min(u64::MAX as u128) as u64) }
    }
}
