//! TCP sequence numbers: 32-bit, compared modulo 2^32 (RFC 9293 §3.4).
use core::cmp::Ordering;
use core::ops::Add;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seq(pub u32);

/// `seq + n`: n bytes further on, modulo 2^32.
impl Add<usize> for Seq {
    type Output = Seq;

    fn add(self, n: usize) -> Seq {
        Seq(self.0.wrapping_add(n as u32))
    }
}

impl Seq {
    /// Distance from `earlier` to `self` (self - earlier); negative if `self` is before.
    pub fn diff(self, earlier: Seq) -> i64 {
        self.0.wrapping_sub(earlier.0) as i32 as i64
    }

    /// Non-negative distance, zero when `self` is before `earlier`.
    pub fn since(self, earlier: Seq) -> usize {
        self.diff(earlier).max(0) as usize
    }
}

impl PartialOrd for Seq {
    fn partial_cmp(&self, other: &Seq) -> Option<Ordering> {
        Some(self.diff(*other).cmp(&0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_around() {
        let a = Seq(u32::MAX - 1);
        let b = a + 4;
        assert_eq!(b, Seq(2));
        assert!(b > a);
        assert_eq!(b.diff(a), 4);
        assert_eq!(a.since(b), 0);
    }
}
