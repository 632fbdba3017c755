//! A connection's timers as data: one enum, one table of deadlines (the shape of
//! quinn-proto's `connection/timer.rs`). The connection arms and stops entries; the owner
//! only ever sees the earliest deadline ([`TimerTable::next_timeout`]).
use crate::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// RFC 6298: retransmission timeout.
    Retransmission,
    /// RFC 9293 §3.8.6.1: zero-window probe. Stands in for the retransmission timer while
    /// the peer's window is zero (the two are never armed together).
    Persist,
    /// RFC 9293 §3.6: TIME-WAIT length.
    TimeWait,
    /// RFC 8985 §6.2 step 5: RACK reordering window expiry.
    RackReorder,
    /// RFC 8985 §7.2: tail loss probe timeout (PTO).
    TailLossProbe,
    /// The sender's own pacing (`TcpConfig::pacing_rate_bps`): the next data segment is due.
    Pacing,
}

impl Timer {
    pub const VALUES: [Timer; 6] = [
        Timer::Retransmission,
        Timer::Persist,
        Timer::TimeWait,
        Timer::RackReorder,
        Timer::TailLossProbe,
        Timer::Pacing,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Timer::Retransmission => "retransmission",
            Timer::Persist => "persist",
            Timer::TimeWait => "time-wait",
            Timer::RackReorder => "rack-reorder",
            Timer::TailLossProbe => "tail-loss-probe",
            Timer::Pacing => "pacing",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerTable {
    deadlines: [Option<Instant>; Timer::VALUES.len()],
}

impl TimerTable {
    pub fn set(&mut self, timer: Timer, at: Instant) {
        self.deadlines[timer as usize] = Some(at);
    }

    pub fn get(&self, timer: Timer) -> Option<Instant> {
        self.deadlines[timer as usize]
    }

    pub fn stop(&mut self, timer: Timer) {
        self.deadlines[timer as usize] = None;
    }

    pub fn is_armed(&self, timer: Timer) -> bool {
        self.deadlines[timer as usize].is_some()
    }

    pub fn is_expired(&self, timer: Timer, now: Instant) -> bool {
        matches!(self.deadlines[timer as usize], Some(t) if t <= now)
    }

    pub fn stop_all(&mut self) {
        self.deadlines = [None; Timer::VALUES.len()];
    }

    /// The earliest armed deadline.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_deadline_wins_and_stopping_removes_it() {
        let mut table = TimerTable::default();
        assert_eq!(table.next_timeout(), None);
        table.set(Timer::TimeWait, Instant::from_millis(30));
        table.set(Timer::TailLossProbe, Instant::from_millis(10));
        table.set(Timer::Retransmission, Instant::from_millis(20));
        assert_eq!(table.next_timeout(), Some(Instant::from_millis(10)));
        assert!(table.is_expired(Timer::TailLossProbe, Instant::from_millis(10)));
        assert!(!table.is_expired(Timer::Retransmission, Instant::from_millis(10)));
        table.stop(Timer::TailLossProbe);
        assert_eq!(table.next_timeout(), Some(Instant::from_millis(20)));
        for timer in Timer::VALUES {
            assert_eq!(Timer::VALUES[timer as usize], timer, "table index of {}", timer.name());
        }
        table.stop_all();
        assert_eq!(table.next_timeout(), None);
    }
}
