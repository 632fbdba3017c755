//! The sender's record of every segment in flight: its sequence range, when it was last
//! sent, whether the peer SACKed it (RFC 2018), whether it is deemed lost and whether a
//! retransmission of it is in flight. RFC 6675's IsLost and SetPipe are computed here;
//! NewReno (without SACK) and RACK (RFC 8985) mark losses on the same board, so one
//! retransmission path serves every policy (the role of gVisor's `SACKScoreboard` plus its
//! writeList, in one queue).
use std::collections::VecDeque;

use crate::seq::Seq;
use crate::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentSegment {
    pub start: Seq,
    pub end: Seq,
    /// Time of the latest transmission (RFC 8985's Segment.xmit_ts).
    pub sent_at: Instant,
    /// 1 for a segment sent once.
    pub transmissions: u32,
    pub sacked: bool,
    /// Deemed lost (RFC 6675 IsLost, NewReno's first unacknowledged segment, RACK, RTO).
    pub lost: bool,
    /// A retransmission sent after the segment was last deemed lost is in the network.
    pub retx_in_flight: bool,
}

impl SentSegment {
    pub fn len(&self) -> usize {
        self.end.since(self.start)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waiting to be retransmitted.
    pub fn needs_retransmission(&self) -> bool {
        self.lost && !self.sacked && !self.retx_in_flight
    }
}

/// A segment the peer has just acknowledged cumulatively or selectively (input of RACK).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub end: Seq,
    pub sent_at: Instant,
    pub retransmitted: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Scoreboard {
    segments: VecDeque<SentSegment>,
}

impl Scoreboard {
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    pub fn len(&self) -> usize {
        self.segments.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &SentSegment> {
        self.segments.iter()
    }

    pub fn last(&self) -> Option<&SentSegment> {
        self.segments.back()
    }

    /// Sequence space `start..end` left at `now` (new data, or a retransmission of
    /// recorded segments).
    pub fn on_sent(&mut self, start: Seq, end: Seq, now: Instant) {
        let high = self.segments.back().map(|s| s.end);
        let first_new = match high {
            Some(high) if start < high => {
                for seg in self.segments.iter_mut().filter(|s| s.start < end && start < s.end) {
                    seg.transmissions += 1;
                    seg.sent_at = now;
                    seg.retx_in_flight = true;
                }
                high
            }
            _ => start,
        };
        if end > first_new {
            let seg = SentSegment {
                start: first_new,
                end,
                sent_at: now,
                transmissions: 1,
                sacked: false,
                lost: false,
                retx_in_flight: false,
            };
            self.segments.push_back(seg);
        }
    }

    /// SND.UNA moved to `ack`: drops what it covers; the newly delivered go to `out`.
    pub fn on_cumulative_ack(&mut self, ack: Seq, out: &mut Vec<Delivered>) {
        while let Some(front) = self.segments.front().copied() {
            if front.end > ack {
                if front.start < ack {
                    self.segments[0].start = ack; // partly acknowledged
                }
                break;
            }
            self.segments.pop_front();
            if !front.sacked {
                out.push(Delivered { end: front.end, sent_at: front.sent_at, retransmitted: front.transmissions > 1 });
            }
        }
    }

    /// Applies SACK blocks (already checked to lie within SND.UNA..SND.MAX); a segment
    /// counts as SACKed when a block covers it whole. Returns the newly SACKed bytes.
    pub fn on_sack(&mut self, blocks: &[(Seq, Seq)], out: &mut Vec<Delivered>) -> usize {
        let mut newly = 0;
        for &(left, right) in blocks {
            for seg in self.segments.iter_mut().filter(|s| !s.sacked && left <= s.start && s.end <= right) {
                seg.sacked = true;
                seg.retx_in_flight = false;
                newly += seg.len();
                out.push(Delivered { end: seg.end, sent_at: seg.sent_at, retransmitted: seg.transmissions > 1 });
            }
        }
        newly
    }

    pub fn sacked_segments(&self) -> usize {
        self.segments.iter().filter(|s| s.sacked).count()
    }

    pub fn sacked_bytes(&self) -> usize {
        self.segments.iter().filter(|s| s.sacked).map(|s| s.len()).sum()
    }

    /// RFC 6675 §4 IsLost for every segment: lost when `dupthresh` SACKed segments, or
    /// more than (dupthresh − 1)·MSS SACKed bytes, lie above it. Returns how many were newly marked.
    pub fn mark_lost_by_sack(&mut self, dupthresh: usize, mss: usize) -> usize {
        let (mut sacked_above, mut sacked_bytes_above, mut marked) = (0usize, 0usize, 0usize);
        for seg in self.segments.iter_mut().rev() {
            if seg.sacked {
                sacked_above += 1;
                sacked_bytes_above += seg.len();
            } else if !seg.lost && (sacked_above >= dupthresh || sacked_bytes_above > (dupthresh - 1) * mss) {
                seg.lost = true;
                seg.retx_in_flight = false;
                marked += 1;
            }
        }
        marked
    }

    /// Marks the first unacknowledged segment lost (fast retransmit, NewReno partial ACK).
    pub fn mark_first_lost(&mut self) -> bool {
        match self.segments.front_mut() {
            Some(seg) if !seg.sacked => {
                seg.lost = true;
                seg.retx_in_flight = false;
                true
            }
            _ => false,
        }
    }

    /// Marks segment `index` (in sequence order) lost, also when a retransmission of it
    /// was in flight (RACK: the retransmission itself is lost).
    pub fn mark_lost_at(&mut self, index: usize) {
        if let Some(seg) = self.segments.get_mut(index) {
            seg.lost = true;
            seg.retx_in_flight = false;
        }
    }

    /// Retransmission timeout (RFC 6675 §5.1, RFC 5681 §3.1): everything not SACKed is
    /// lost, and earlier retransmissions are no longer counted as in flight.
    pub fn mark_all_lost(&mut self) {
        for seg in self.segments.iter_mut().filter(|s| !s.sacked) {
            seg.lost = true;
            seg.retx_in_flight = false;
        }
    }

    pub fn has_lost(&self) -> bool {
        self.segments.iter().any(|s| s.needs_retransmission())
    }

    /// The first segment waiting for retransmission (RFC 6675 NextSeg rule 1).
    pub fn next_lost(&self) -> Option<(Seq, Seq)> {
        self.segments.iter().find(|s| s.needs_retransmission()).map(|s| (s.start, s.end))
    }

    /// RFC 6675 §4 SetPipe: bytes deemed in the network — every segment not SACKed and
    /// not lost, plus every retransmission in flight.
    pub fn pipe(&self) -> usize {
        self.segments
            .iter()
            .filter(|s| !s.sacked)
            .map(|s| if s.lost { 0 } else { s.len() } + if s.retx_in_flight { s.len() } else { 0 })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 100;

    /// Ten 100-byte segments 0..1000 sent at t = 0..9 ms.
    fn board() -> Scoreboard {
        let mut sb = Scoreboard::default();
        for i in 0..10u32 {
            sb.on_sent(Seq(i * 100), Seq(i * 100 + 100), Instant::from_millis(i as u64));
        }
        sb
    }

    #[test]
    fn sack_marks_is_lost_and_pipe_follows_rfc_6675() {
        let mut sb = board();
        assert_eq!(sb.pipe(), 1000);
        let mut delivered = Vec::new();
        // Segment 0 lost; 1 and 2 SACKed: not yet 3 segments above segment 0.
        assert_eq!(sb.on_sack(&[(Seq(100), Seq(300))], &mut delivered), 200);
        assert_eq!(sb.mark_lost_by_sack(3, MSS), 0, "2 SACKed segments (200 bytes) above is not enough");
        assert_eq!(sb.pipe(), 800);
        // A third SACKed segment: segment 0 is lost (3 segments, 300 bytes > 2·MSS above it).
        sb.on_sack(&[(Seq(100), Seq(400))], &mut delivered);
        assert_eq!(delivered.len(), 3);
        assert_eq!(sb.mark_lost_by_sack(3, MSS), 1);
        assert_eq!(sb.next_lost(), Some((Seq(0), Seq(100))));
        // pipe: 10 segments − 3 SACKed − 1 lost = 6.
        assert_eq!(sb.pipe(), 600);
        // Retransmitting it puts it back into the pipe, and it is no longer "next".
        sb.on_sent(Seq(0), Seq(100), Instant::from_millis(50));
        assert_eq!(sb.pipe(), 700);
        assert_eq!(sb.next_lost(), None);
        // The cumulative ACK past the SACKed run delivers only the not-yet-SACKed segment.
        delivered.clear();
        sb.on_cumulative_ack(Seq(400), &mut delivered);
        assert_eq!(
            delivered,
            vec![Delivered { end: Seq(100), sent_at: Instant::from_millis(50), retransmitted: true }]
        );
        assert_eq!(sb.len(), 6);
        assert_eq!(sb.pipe(), 600);
    }

    #[test]
    fn byte_rule_of_is_lost_and_partial_blocks() {
        let mut sb = Scoreboard::default();
        sb.on_sent(Seq(0), Seq(100), Instant::ZERO);
        sb.on_sent(Seq(100), Seq(400), Instant::ZERO); // one 300-byte segment
        let mut d = Vec::new();
        assert_eq!(sb.on_sack(&[(Seq(100), Seq(399))], &mut d), 0, "a block must cover a segment whole");
        sb.on_sack(&[(Seq(100), Seq(400))], &mut d);
        assert_eq!(sb.mark_lost_by_sack(3, MSS), 1, "300 SACKed bytes > 2·MSS above segment 0");
    }

    #[test]
    fn timeout_marks_everything_unsacked_lost_and_empties_the_pipe() {
        let mut sb = board();
        let mut d = Vec::new();
        sb.on_sack(&[(Seq(500), Seq(600))], &mut d);
        sb.mark_first_lost();
        sb.on_sent(Seq(0), Seq(100), Instant::from_millis(20));
        sb.mark_all_lost();
        assert_eq!(sb.pipe(), 0);
        let lost: Vec<_> = std::iter::from_fn(|| {
            let next = sb.next_lost()?;
            sb.on_sent(next.0, next.1, Instant::from_millis(30));
            Some(next.0 .0)
        })
        .collect();
        assert_eq!(lost, vec![0, 100, 200, 300, 400, 600, 700, 800, 900], "all but the SACKed one, in order");
        assert_eq!(sb.pipe(), 900);
    }

    #[test]
    fn partial_cumulative_ack_trims_the_front() {
        let mut sb = board();
        let mut d = Vec::new();
        sb.on_cumulative_ack(Seq(150), &mut d);
        assert_eq!(d.len(), 1);
        assert_eq!(sb.iter().next().map(|s| (s.start, s.end)), Some((Seq(150), Seq(200))));
        assert_eq!(sb.pipe(), 850);
    }
}
