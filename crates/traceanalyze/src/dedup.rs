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

/// A frame identical to one captured at most this long before it is a capture duplicate.
pub const WINDOW_NS: i64 = 10_000;

/// At most this many earlier frames, of at most this many bytes in all, are kept for the
/// comparison, so that a capture with thousands of frames inside one window (timestamps all
/// alike: a damaged file) stays linear and small. editcap keeps up to 1,000,000 frames; a
/// 10 Gbit/s link carries ~150 frames in 10 µs.
const MAX_RECENT: usize = 1024; // a power of two: ring positions are masked
const MAX_RECENT_BYTES: usize = 4 << 20;
/// A slot keeps its buffer for the next frame up to this size (a whole Ethernet frame): the
/// ring holds at most 2 MB when its frames have left the window.
const KEEP_BUFFER_BYTES: usize = 2048;

#[derive(Debug, Default, Clone)]
struct Recent {
    ts_ns: i64,
    data: Vec<u8>,
}

/// The frames of the last `WINDOW_NS`, in the order read: a ring of `MAX_RECENT` slots whose
/// buffers are reused (no allocation per frame).
#[derive(Debug)]
pub struct CaptureDuplicates {
    slots: Vec<Recent>,
    first: usize,
    len: usize,
    /// Bytes of the frames in the ring.
    bytes: usize,
}

impl Default for CaptureDuplicates {
    fn default() -> Self {
        CaptureDuplicates {
            slots: vec![Recent::default(); MAX_RECENT],
            first: 0,
            len: 0,
            bytes: 0,
        }
    }
}

impl CaptureDuplicates {
    /// Whether `data` captured at `ts_ns` repeats a frame read before it within the window.
    /// Every frame is remembered, duplicates too (as editcap does): a third copy within the
    /// window of the second is one as well.
    pub fn check(&mut self, ts_ns: i64, data: &[u8]) -> bool {
        let mask = MAX_RECENT - 1;
        while self.len > 0
            && (ts_ns.saturating_sub(self.slots[self.first].ts_ns) > WINDOW_NS
                || self.len == MAX_RECENT
                || self.bytes + data.len() > MAX_RECENT_BYTES)
        {
            let oldest = &mut self.slots[self.first];
            self.bytes -= oldest.data.len();
            if oldest.data.capacity() > KEEP_BUFFER_BYTES {
                oldest.data = Vec::new();
            }
            self.first = (self.first + 1) & mask;
            self.len -= 1;
        }
        // a frame stamped later than this one (a capture out of time order) is not compared
        let duplicate = (0..self.len).any(|i| {
            let seen = &self.slots[(self.first + i) & mask];
            (0..=WINDOW_NS).contains(&ts_ns.saturating_sub(seen.ts_ns)) && seen.data == data
        });
        let slot = &mut self.slots[(self.first + self.len) & mask];
        slot.ts_ns = ts_ns;
        slot.data.clear();
        slot.data.extend_from_slice(data);
        self.len += 1;
        self.bytes += data.len();
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
        assert_eq!(d.len, MAX_RECENT);
        assert!(d.check(7, &4_999u32.to_le_bytes()));
        assert!(!d.check(7, &0u32.to_le_bytes())); // beyond the frames kept
        let big = vec![1u8; 300_000];
        for _ in 0..50 {
            d.check(7, &big);
        }
        assert!(d.bytes <= MAX_RECENT_BYTES && d.len == MAX_RECENT_BYTES / big.len());
        let kept: usize = d.slots.iter().map(|s| s.data.capacity()).sum();
        assert!(kept <= MAX_RECENT_BYTES + MAX_RECENT * KEEP_BUFFER_BYTES);
    }
}
