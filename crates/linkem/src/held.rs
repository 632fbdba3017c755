//! Packets waiting for their release time, bounded: the earliest release leaves first,
//! ties in arrival order. Generic over the held item so tests use plain ids.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

struct Held<T> {
    release_ns: u64,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Held<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.release_ns, self.seq) == (other.release_ns, other.seq)
    }
}
impl<T> Eq for Held<T> {}
impl<T> PartialOrd for Held<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Held<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.release_ns, self.seq).cmp(&(other.release_ns, other.seq))
    }
}

pub struct HeldQueue<T> {
    heap: BinaryHeap<Reverse<Held<T>>>,
    max_held: usize,
    next_seq: u64,
}

impl<T> HeldQueue<T> {
    pub fn new(max_held: usize) -> Self {
        HeldQueue {
            heap: BinaryHeap::new(),
            max_held,
            next_seq: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Hold `item` until `release_ns`; gives it back when the queue is full.
    pub fn push(&mut self, release_ns: u64, item: T) -> Result<(), T> {
        if self.heap.len() >= self.max_held {
            return Err(item);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse(Held {
            release_ns,
            seq,
            item,
        }));
        Ok(())
    }

    pub fn next_release_ns(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(h)| h.release_ns)
    }

    /// The next item whose release time is at or before `now_ns`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<T> {
        if self.next_release_ns()? <= now_ns {
            self.heap.pop().map(|Reverse(h)| h.item)
        } else {
            None
        }
    }

    /// Everything still held, earliest first (for a flush at exit).
    pub fn drain_all(&mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.heap.len());
        while let Some(Reverse(h)) = self.heap.pop() {
            out.push(h.item);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::{Decision, LinkConfig, Scheduler};

    const MS: u64 = 1_000_000;

    #[test]
    fn releases_in_time_order_and_only_when_due() {
        let mut q = HeldQueue::new(10);
        q.push(30, "c").unwrap();
        q.push(10, "a").unwrap();
        q.push(20, "b").unwrap();
        q.push(20, "b2").unwrap();
        assert_eq!(q.next_release_ns(), Some(10));
        assert_eq!(q.pop_due(9), None);
        assert_eq!(q.pop_due(25), Some("a"));
        assert_eq!(q.pop_due(25), Some("b"));
        assert_eq!(q.pop_due(25), Some("b2"));
        assert_eq!(q.pop_due(25), None);
        assert_eq!(q.drain_all(), vec!["c"]);
        assert!(q.is_empty());
    }

    #[test]
    fn cap_refuses_beyond_max_held() {
        let mut q = HeldQueue::new(2);
        assert!(q.push(1, 1).is_ok());
        assert!(q.push(2, 2).is_ok());
        assert_eq!(q.push(3, 3), Err(3));
        assert_eq!(q.len(), 2);
        q.pop_due(5);
        assert!(q.push(3, 3).is_ok());
    }

    /// The whole element on a virtual clock: packets arrive every 120 µs (100 Mbit/s of
    /// 1500-byte frames), the clock jumps to each event, and every packet must leave
    /// exactly `delay` after it came, in arrival order, with at most delay/gap held.
    #[test]
    fn virtual_clock_link_delivers_in_order_after_delay() {
        let gap_ns = 120_000;
        let config = LinkConfig {
            delay_ns: 20 * MS,
            jitter_ns: 2 * MS,
            ..Default::default()
        };
        let mut scheduler = Scheduler::new(config, 77).unwrap();
        let mut held = HeldQueue::new(1000);
        let mut delivered: Vec<(u64, u64)> = Vec::new(); // (id, leave_ns)
        let mut arrivals = Vec::new();
        let mut max_len = 0;
        let packets = 5000u64;
        let mut next_arrival = 0u64;
        let mut id = 0u64;
        loop {
            let next_release = held.next_release_ns().unwrap_or(u64::MAX);
            if id < packets && next_arrival <= next_release {
                let now = next_arrival;
                match scheduler.decide(now) {
                    Decision::Deliver { release_ns, .. } => held.push(release_ns, id).unwrap(),
                    Decision::Drop(_) => unreachable!("no loss configured"),
                }
                arrivals.push(now);
                max_len = max_len.max(held.len());
                id += 1;
                next_arrival += gap_ns;
            } else if next_release != u64::MAX {
                while let Some(pid) = held.pop_due(next_release) {
                    delivered.push((pid, next_release));
                }
            } else {
                break;
            }
        }
        assert_eq!(delivered.len() as u64, packets);
        for (i, (pid, leave)) in delivered.iter().enumerate() {
            assert_eq!(*pid, i as u64, "out of order");
            let delay = leave - arrivals[i];
            assert!((18 * MS..=22 * MS).contains(&delay), "delay {delay}");
        }
        assert!(max_len <= (22 * MS / gap_ns) as usize + 2, "held {max_len}");
    }
}
