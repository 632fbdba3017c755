//! Sequence-space bookkeeping for one connection, the same rules as
//! python/src/congestlab/analysis/metrics.py (`_Direction`, `ByteRanges`, `rtt_samples_ms`):
//! 32-bit sequence numbers unwrapped relative to the first one seen, the byte ranges seen per
//! direction (a segment repeating any of them is a retransmission; one filling a hole below
//! the highest sequence is reordering, not a retransmission), and RTT samples by Karn's rule.

use std::collections::BTreeMap;

const SEQ_MOD: i64 = 1 << 32;

/// Unwraps 32-bit sequence numbers relative to the first one seen in one direction.
#[derive(Debug, Default, Clone)]
pub struct Unwrap {
    base: Option<u32>,
    last: i64,
}

impl Unwrap {
    /// Offset of `seq`: the unwrapped value closest to the last one (moves `last`).
    pub fn offset(&mut self, seq: u32) -> i64 {
        let base = *self.base.get_or_insert(seq);
        let best = self.nearest_from(seq, base);
        self.last = best;
        best
    }

    /// Offset of a number in this direction's space (an ACK of it) without moving `last`;
    /// None before the direction's first segment.
    pub fn nearest(&self, seq: u32) -> Option<i64> {
        self.base.map(|base| self.nearest_from(seq, base))
    }

    pub fn started(&self) -> bool {
        self.base.is_some()
    }

    fn nearest_from(&self, seq: u32, base: u32) -> i64 {
        let rel = i64::from(seq.wrapping_sub(base));
        let q = self.last.div_euclid(SEQ_MOD);
        // candidates in the order metrics.py tries them; the first of equally close wins
        let mut best = rel + (q - 1) * SEQ_MOD;
        let mut best_dist = (best - self.last).abs();
        for k in [q, q + 1] {
            let v = rel + k * SEQ_MOD;
            let d = (v - self.last).abs();
            if d < best_dist {
                best = v;
                best_dist = d;
            }
        }
        best
    }
}

/// Byte ranges already seen in one direction: disjoint, never touching, keyed by start.
#[derive(Debug, Default, Clone)]
pub struct ByteRanges {
    ranges: BTreeMap<i64, i64>,
}

impl ByteRanges {
    /// Records [start, end); true when any of it was seen before (a retransmission).
    pub fn add(&mut self, start: i64, end: i64) -> bool {
        // the common case: the range starting at or before `start` reaches it (in-order data
        // extends the last range) and no range starts inside (start, end]
        if let Some((&s, &e)) = self.ranges.range(..=start).next_back() {
            if e >= start && self.ranges.range(start + 1..=end).next().is_none() {
                if end > e {
                    self.ranges.insert(s, end);
                }
                return start < e && s < end;
            }
        }
        let mut overlap = false;
        let (mut lo, mut hi) = (start, end);
        // ranges that overlap or touch [start, end): start <= end and finish >= start
        let mut absorbed = Vec::new();
        for (&s, &e) in self.ranges.range(..=end).rev() {
            if e < start {
                break;
            }
            overlap |= s < end && start < e;
            lo = lo.min(s);
            hi = hi.max(e);
            absorbed.push(s);
        }
        for s in absorbed {
            self.ranges.remove(&s);
        }
        self.ranges.insert(lo, hi);
        overlap
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn to_vec(&self) -> Vec<(i64, i64)> {
        self.ranges.iter().map(|(&s, &e)| (s, e)).collect()
    }
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    start: i64,
    sent_ns: i64,
    valid: bool,
    order: u64,
}

/// Server data segment -> first client ACK at or beyond its end. Segments whose bytes were
/// retransmitted give no sample (Karn's algorithm); the others still do. Pending segments are
/// disjoint (a segment that repeats any byte is a retransmission and never pending), so they
/// are keyed by their end.
#[derive(Debug, Default, Clone)]
pub struct RttTracker {
    pending: BTreeMap<i64, Pending>,
    next_order: u64,
    scratch: Vec<Pending>,
}

impl RttTracker {
    /// A server segment with payload [start, end) sent at `ts_ns`.
    pub fn on_server_data(&mut self, start: i64, end: i64, ts_ns: i64, retransmitted: bool) {
        if retransmitted {
            for (_, p) in self.pending.range_mut(start + 1..) {
                if p.start >= end {
                    break;
                }
                p.valid = false;
            }
        } else {
            let order = self.next_order;
            self.next_order += 1;
            self.pending.insert(
                end,
                Pending {
                    start,
                    sent_ns: ts_ns,
                    valid: true,
                    order,
                },
            );
        }
    }

    /// A client ACK of `ack_off` at `ts_ns`: calls `sample(rtt_ns)` for every valid segment it
    /// covers, in the order the segments were sent.
    pub fn on_client_ack(&mut self, ack_off: i64, ts_ns: i64, mut sample: impl FnMut(i64)) {
        self.scratch.clear();
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > ack_off {
                break;
            }
            self.scratch.push(entry.remove());
        }
        if self.scratch.len() > 1 {
            self.scratch.sort_unstable_by_key(|p| p.order);
        }
        for p in &self.scratch {
            if p.valid {
                sample(ts_ns - p.sent_ns);
            }
        }
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reordered_segment_is_not_a_retransmission() {
        // the same cases as python/tests/unit/test_analysis.py
        let mut r = ByteRanges::default();
        assert!(!r.add(0, 100));
        assert!(!r.add(200, 300));
        assert!(!r.add(100, 200)); // below the highest seen, but new bytes
        assert!(r.add(150, 250));
        assert_eq!(r.to_vec(), vec![(0, 300)]);
    }

    #[test]
    fn byte_ranges_merge_and_overlap_edges() {
        let mut r = ByteRanges::default();
        assert!(!r.add(10, 20));
        assert!(!r.add(30, 40));
        assert!(!r.add(50, 60));
        assert!(!r.add(20, 30)); // touches both neighbours: merged, not an overlap
        assert_eq!(r.to_vec(), vec![(10, 40), (50, 60)]);
        assert!(r.add(0, 100)); // covers everything
        assert_eq!(r.to_vec(), vec![(0, 100)]);
        assert!(r.add(99, 101));
        assert!(!r.add(101, 102));
        assert_eq!(r.to_vec(), vec![(0, 102)]);
    }

    #[test]
    fn unwrap_across_the_32_bit_boundary() {
        let mut u = Unwrap::default();
        let base = u32::MAX - 1000;
        assert_eq!(u.offset(base), 0);
        assert_eq!(u.offset(base.wrapping_add(600)), 600);
        assert_eq!(u.offset(base.wrapping_add(2000)), 2000); // wrapped
        assert_eq!(u.offset(base.wrapping_add(1500)), 1500); // an old one, after the wrap
        assert_eq!(u.nearest(base.wrapping_add(2500)), Some(2500));
        // a number just below the base is negative, not 4 GiB ahead
        let mut v = Unwrap::default();
        v.offset(100);
        assert_eq!(v.offset(90), -10);
        // many wraps: steps under 2 GiB stay monotonic
        let mut w = Unwrap::default();
        let mut seq = 7u32;
        w.offset(seq);
        for i in 1..20i64 {
            seq = seq.wrapping_add(1 << 30);
            assert_eq!(w.offset(seq), i << 30);
        }
    }

    #[test]
    fn rtt_karn_and_cumulative_acks() {
        let mut t = RttTracker::default();
        let mut samples = Vec::new();
        t.on_server_data(0, 100, 1_000, false);
        t.on_server_data(100, 200, 2_000, false);
        t.on_server_data(200, 300, 3_000, false);
        t.on_client_ack(100, 10_000, |r| samples.push(r));
        assert_eq!(samples, vec![9_000]);
        t.on_server_data(100, 200, 20_000, true); // resent: no sample for those bytes
        t.on_client_ack(300, 30_000, |r| samples.push(r));
        assert_eq!(samples, vec![9_000, 27_000]);
        assert_eq!(t.pending(), 0);
    }

    #[test]
    fn samples_come_in_send_order_when_capture_reorders() {
        let mut t = RttTracker::default();
        let mut samples = Vec::new();
        t.on_server_data(100, 200, 1_000, false); // captured first
        t.on_server_data(0, 100, 2_000, false);
        t.on_client_ack(200, 5_000, |r| samples.push(r));
        assert_eq!(samples, vec![4_000, 3_000]);
    }

    #[test]
    fn partial_overlap_invalidates_only_touched_segments() {
        let mut t = RttTracker::default();
        let mut samples = Vec::new();
        t.on_server_data(0, 100, 0, false);
        t.on_server_data(100, 200, 0, false);
        t.on_server_data(200, 300, 0, false);
        t.on_server_data(150, 250, 50, true);
        t.on_client_ack(300, 1_000, |r| samples.push(r));
        assert_eq!(samples, vec![1_000]);
    }
}
