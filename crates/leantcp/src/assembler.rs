//! The receiver's out-of-order queue (RFC 2018): data beyond a hole, kept until the in-order
//! stream reaches it, and the SACK blocks that report it — most recently changed first
//! (RFC 2018 §4). smoltcp's `storage/assembler.rs` keeps only the ranges over a ring buffer;
//! this one keeps the bytes with them, since leantcp's receive buffer holds only in-order data.
use std::collections::VecDeque;

use crate::seq::Seq;

/// At most this many separate blocks are kept; data that would open another is dropped
/// (state stays bounded, the sender retransmits it).
pub const MAX_BLOCKS: usize = 64;

#[derive(Debug, Clone, Default)]
pub struct Assembler {
    /// (start, bytes), sorted by start, disjoint and not adjacent.
    blocks: Vec<(Seq, Vec<u8>)>,
    /// Starts of the blocks most recently changed, newest first.
    recent: Vec<Seq>,
    /// Sequence number of a FIN that arrived beyond a hole.
    fin: Option<Seq>,
    /// How many starts `recent` remembers (the most SACK blocks an ACK carries, plus one).
    recent_len: usize,
}

impl Assembler {
    /// An empty queue that remembers the `recent_len` most recently changed blocks.
    pub fn new(recent_len: usize) -> Self {
        Assembler { recent_len, ..Assembler::default() }
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The held ranges, in sequence order.
    pub fn ranges(&self) -> impl Iterator<Item = (Seq, Seq)> + '_ {
        self.blocks.iter().map(|(s, d)| (*s, *s + d.len()))
    }

    /// Keeps `data` at `seq`, cut at `window_end`, merged with every block it overlaps or
    /// touches. False if none of it fits in the window; true also when it was dropped
    /// because `MAX_BLOCKS` separate blocks are held already.
    pub fn insert(&mut self, seq: Seq, data: &[u8], window_end: Seq) -> bool {
        let len = data.len().min(window_end.since(seq));
        if len == 0 {
            return false;
        }
        let (start, end) = (seq, seq + len);
        let touching: Vec<usize> = (0..self.blocks.len())
            .filter(|&i| {
                let (s, d) = &self.blocks[i];
                *s <= end && start <= *s + d.len()
            })
            .collect();
        if touching.is_empty() && self.blocks.len() >= MAX_BLOCKS {
            return true;
        }
        let merged_start = touching.iter().map(|&i| self.blocks[i].0).fold(start, |a, b| if b < a { b } else { a });
        let merged_end =
            touching
                .iter()
                .map(|&i| self.blocks[i].0 + self.blocks[i].1.len())
                .fold(end, |a, b| if b > a { b } else { a });
        let mut bytes = vec![0u8; merged_end.since(merged_start)];
        let at = start.since(merged_start);
        bytes[at..at + len].copy_from_slice(&data[..len]);
        for &i in touching.iter().rev() {
            let (s, d) = self.blocks.remove(i);
            let at = s.since(merged_start);
            bytes[at..at + d.len()].copy_from_slice(&d);
        }
        let index = self.blocks.iter().position(|(s, _)| *s > merged_start).unwrap_or(self.blocks.len());
        self.blocks.insert(index, (merged_start, bytes));
        self.recent.retain(|s| !(merged_start <= *s && *s <= merged_end));
        self.recent.insert(0, merged_start);
        self.recent.truncate(self.recent_len);
        true
    }

    /// Whether `start..end` is held whole.
    pub fn holds(&self, start: Seq, end: Seq) -> bool {
        self.blocks.iter().any(|(s, d)| *s <= start && end <= *s + d.len())
    }

    /// A FIN at `seq`, beyond a hole: the stream ends there once the hole is filled.
    pub fn set_fin(&mut self, seq: Seq) {
        self.fin = Some(seq);
    }

    pub fn fin(&self) -> Option<Seq> {
        self.fin
    }

    /// Moves the data the in-order stream has reached (`rcv_nxt`) into `out`, while `out`
    /// holds less than `capacity` bytes; gives the bytes moved (RCV.NXT advances by them).
    pub fn drain_into(&mut self, rcv_nxt: Seq, out: &mut VecDeque<u8>, capacity: usize) -> usize {
        let mut next = rcv_nxt;
        while self.blocks.first().is_some_and(|(s, _)| *s <= next) {
            let (start, data) = self.blocks.remove(0);
            let skip = next.since(start);
            if skip < data.len() {
                let take = (data.len() - skip).min(capacity.saturating_sub(out.len()));
                out.extend(&data[skip..skip + take]);
                next = next + take;
            }
        }
        self.recent.retain(|s| *s > next);
        next.since(rcv_nxt)
    }

    /// Forgets everything (the FIN was received in order).
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.recent.clear();
        self.fin = None;
    }

    /// RFC 2018 §4: up to `max_blocks` SACK blocks, the most recently changed first, then the
    /// others in sequence order. A FIN held beyond the hole takes sequence space: the block
    /// it ends covers it (as Linux's does).
    pub fn sack_blocks(&self, max_blocks: usize) -> Vec<(Seq, Seq)> {
        let mut blocks: Vec<(Seq, Seq)> = Vec::new();
        let recent = self
            .recent
            .iter()
            .filter_map(|start| self.blocks.iter().find(|(s, d)| *s <= *start && *start < *s + d.len()));
        for (s, d) in recent.chain(self.blocks.iter()) {
            let end = *s + d.len();
            let block = (*s, if self.fin == Some(end) { end + 1 } else { end });
            if blocks.len() < max_blocks && !blocks.contains(&block) {
                blocks.push(block);
            }
        }
        blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW_END: Seq = Seq(1_000_000);

    fn held(a: &Assembler) -> Vec<(u32, u32)> {
        a.ranges().map(|(s, e)| (s.0, e.0)).collect()
    }

    #[test]
    fn overlapping_and_touching_data_merges_into_one_block() {
        let mut a = Assembler::new(4);
        assert!(a.insert(Seq(100), &[1; 10], WINDOW_END));
        assert!(a.insert(Seq(200), &[2; 10], WINDOW_END));
        assert_eq!(held(&a), [(100, 110), (200, 210)]);
        assert!(a.insert(Seq(110), &[3; 90], WINDOW_END), "touches both");
        assert_eq!(held(&a), [(100, 210)]);
        assert!(a.insert(Seq(95), &[4; 10], WINDOW_END), "overlaps the start");
        assert_eq!(held(&a), [(95, 210)]);
        assert!(a.holds(Seq(100), Seq(210)) && !a.holds(Seq(90), Seq(100)));
    }

    #[test]
    fn later_bytes_never_overwrite_held_ones_beyond_the_new_segment() {
        let mut a = Assembler::new(4);
        a.insert(Seq(10), &[1, 2, 3, 4], WINDOW_END);
        a.insert(Seq(12), &[9, 9, 5, 6], WINDOW_END);
        let mut out = VecDeque::new();
        assert_eq!(a.drain_into(Seq(10), &mut out, 100), 6);
        // Held bytes are copied over the new segment's: the first copy of a byte wins.
        assert_eq!(out, [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn data_beyond_the_window_is_cut_or_refused() {
        let mut a = Assembler::new(4);
        assert!(!a.insert(Seq(500), &[0; 10], Seq(500)), "nothing fits");
        assert!(a.insert(Seq(495), &[0; 10], Seq(500)));
        assert_eq!(held(&a), [(495, 500)]);
    }

    #[test]
    fn drain_takes_what_the_stream_reached_within_capacity() {
        let mut a = Assembler::new(4);
        a.insert(Seq(10), &[1; 10], WINDOW_END);
        a.insert(Seq(30), &[2; 10], WINDOW_END);
        let mut out = VecDeque::new();
        assert_eq!(a.drain_into(Seq(5), &mut out, 100), 0, "a hole before the first block");
        assert_eq!(a.drain_into(Seq(15), &mut out, 3), 3, "capacity limits");
        assert_eq!(out.len(), 3);
        assert_eq!(held(&a), [(30, 40)], "the rest of a reached block is dropped (the sender resends it)");
        assert_eq!(a.drain_into(Seq(30), &mut out, 100), 10);
        assert!(a.is_empty());
    }

    #[test]
    fn sack_blocks_report_the_newest_first_then_in_order_within_the_limit() {
        let mut a = Assembler::new(4);
        for start in [100, 300, 500, 200] {
            a.insert(Seq(start), &[0; 10], WINDOW_END);
        }
        assert_eq!(a.sack_blocks(3), [(Seq(200), Seq(210)), (Seq(500), Seq(510)), (Seq(300), Seq(310))]);
        assert_eq!(a.sack_blocks(1), [(Seq(200), Seq(210))]);
        a.set_fin(Seq(510));
        assert!(a.sack_blocks(4).contains(&(Seq(500), Seq(511))), "a held FIN is covered");
        a.clear();
        assert!(a.is_empty() && a.fin().is_none() && a.sack_blocks(4).is_empty());
    }

    #[test]
    fn the_number_of_separate_blocks_is_bounded() {
        let mut a = Assembler::new(4);
        for i in 0..MAX_BLOCKS as u32 + 5 {
            a.insert(Seq(i * 100), &[0; 10], WINDOW_END);
        }
        assert_eq!(a.ranges().count(), MAX_BLOCKS);
        assert!(a.insert(Seq(5), &[0; 10], WINDOW_END), "merging into a held block still works");
        assert_eq!(a.ranges().next(), Some((Seq(0), Seq(15))));
    }
}
