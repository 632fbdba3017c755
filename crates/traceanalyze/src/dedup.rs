//! Capture duplicates: the same packet recorded twice. A frame whose captured bytes are those
//! of a frame read before it, captured at most `WINDOW_NS` earlier, is one (`editcap -w`'s rule:
//! captured length and bytes, a time window; editcap compares digests, this compares the bytes).
//! The bytes include the IPv4 ID, so a packet sent again by its host (a new ID) is not one;
//! IPv6 has no ID, and there the window alone tells them apart.
//!
//! Why 10 µs (docs/trace-analysis.md, "Capture duplicates"): a capture file written or merged
//! twice holds the copy at the same timestamp, a packet recorded at two points of one host
//! microseconds later. A host sends identical bytes again only on a timer (milliseconds at
//! least) or on a packet from its peer, which the capture then holds between the two: the
//! closest identical pair in the project's stored runs is 34 µs apart (a SYN-ACK sent again
//! 5 µs after the client's resent SYN).

use std::collections::VecDeque;

/// A frame identical to one captured at most this long before it is a capture duplicate.
pub const WINDOW_NS: i64 = 10_000;

/// At most this many earlier frames are kept for comparison, so that a capture with
/// thousands of frames inside one window (timestamps all alike: a damaged file) stays
/// linear. editcap keeps up to 1,000,000; a 10 Gbit/s link carries ~150 frames in 10 µs.
const MAX_RECENT: usize = 1024;

/// The frames of the last `WINDOW_NS`, in the order read.
#[derive(Debug, Default)]
pub struct CaptureDuplicates {
    recent: VecDeque<(i64, Vec<u8>)>,
}

impl CaptureDuplicates {
    /// Whether `data` captured at `ts_ns` repeats a frame read before it within the window.
    /// Every frame is remembered, duplicates too (as editcap does): a third copy within the
    /// window of the second is one as well.
    pub fn check(&mut self, ts_ns: i64, data: &[u8]) -> bool {
        let mut spare = None;
        while let Some(&(first_ns, _)) = self.recent.front() {
            if ts_ns.saturating_sub(first_ns) <= WINDOW_NS && self.recent.len() < MAX_RECENT {
                break;
            }
            spare = self.recent.pop_front().map(|(_, buf)| buf);
        }
        // a frame stamped later than this one (a capture out of time order) is not compared
        let duplicate = self.recent.iter().rev().any(|(seen_ns, seen)| {
            (0..=WINDOW_NS).contains(&ts_ns.saturating_sub(*seen_ns)) && seen.as_slice() == data
        });
        let mut buf = spare.unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        self.recent.push_back((ts_ns, buf));
        duplicate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_within_the_window_only() {
        let mut d = CaptureDuplicates::default();
        assert!(!d.check(1_000, b"abc"));
        assert!(d.check(1_000, b"abc")); // written twice: same timestamp
        assert!(!d.check(1_000, b"abd")); // other bytes
        assert!(!d.check(1_000, b"ab")); // a prefix is not the same frame
        assert!(d.check(1_000 + WINDOW_NS, b"abd")); // the window's edge is inside
        assert!(!d.check(1_000 + 2 * WINDOW_NS + 1, b"abc")); // the last "abc" is too old
    }

    #[test]
    fn copies_chain_and_earlier_stamps_are_not_compared() {
        let mut d = CaptureDuplicates::default();
        assert!(!d.check(0, b"x"));
        assert!(d.check(WINDOW_NS, b"x"));
        assert!(d.check(2 * WINDOW_NS, b"x")); // within the window of the second copy
        let mut d = CaptureDuplicates::default();
        assert!(!d.check(5_000, b"y"));
        assert!(!d.check(4_000, b"y")); // stamped before the first: out of time order
    }

    #[test]
    fn memory_is_bounded_when_every_frame_has_one_timestamp() {
        let mut d = CaptureDuplicates::default();
        for i in 0..5_000u32 {
            assert!(!d.check(7, &i.to_le_bytes()));
        }
        assert_eq!(d.recent.len(), MAX_RECENT);
        assert!(d.check(7, &4_999u32.to_le_bytes()));
        assert!(!d.check(7, &0u32.to_le_bytes())); // beyond the frames kept
    }
}
