//! Counts and time distributions per address family. Histograms give percentiles (3
//! significant digits); sums and maxima are kept exactly, so averages are exact.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::addresses::Family;
use crate::fetch::{FetchResult, Outcome};

#[derive(Clone, Debug)]
pub struct TimeHist {
    hist: Histogram<u64>,
    sum_ns: u128,
}

impl Default for TimeHist {
    fn default() -> Self {
        // 1 ns .. 1 hour at 3 significant digits
        TimeHist { hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"), sum_ns: 0 }
    }
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub avg: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl TimeHist {
    pub fn record(&mut self, d: Duration) {
        let ns = (d.as_nanos() as u64).max(1);
        self.hist.saturating_record(ns);
        self.sum_ns += ns as u128;
    }
    pub fn merge(&mut self, other: &TimeHist) {
        self.hist.add(&other.hist).expect("same bounds");
        self.sum_ns += other.sum_ns;
    }
    pub fn count(&self) -> u64 {
        self.hist.len()
    }
    /// In the unit of `ns_per_unit` (1e3 for µs, 1e6 for ms).
    pub fn summary(&self, ns_per_unit: f64) -> Summary {
        let n = self.hist.len();
        if n == 0 {
            return Summary::default();
        }
        let q = |x: f64| self.hist.value_at_quantile(x) as f64 / ns_per_unit;
        Summary {
            count: n,
            avg: self.sum_ns as f64 / n as f64 / ns_per_unit,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: self.hist.max() as f64 / ns_per_unit,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct FamilyStats {
    pub requests: u64,
    pub normal: u64,
    pub reset: u64,
    pub timeout: u64,
    pub timeout_connecting: u64,
    pub refused: u64,
    pub other: u64,
    pub other_kinds: BTreeMap<String, u64>,
    pub connect: TimeHist,
    pub continuation: TimeHist,
    /// Fetch latency (from the scheduled start in open loop), NORMAL fetches only.
    pub latency: TimeHist,
    pub bytes_received: u64,
    pub body_bytes: u64,
}

impl FamilyStats {
    pub fn record(&mut self, r: &FetchResult, latency: Option<Duration>) {
        self.requests += 1;
        match &r.outcome {
            Outcome::Normal => self.normal += 1,
            Outcome::Reset => self.reset += 1,
            Outcome::Timeout { connecting } => {
                self.timeout += 1;
                self.timeout_connecting += *connecting as u64;
            }
            Outcome::Refused => self.refused += 1,
            Outcome::Other(kind) => {
                self.other += 1;
                *self.other_kinds.entry(kind.clone()).or_default() += 1;
            }
        }
        if let Some(c) = r.connect {
            self.connect.record(c);
        }
        if let Some(c) = r.continuation {
            self.continuation.record(c);
        }
        if let (Outcome::Normal, Some(l)) = (&r.outcome, latency) {
            self.latency.record(l);
        }
        self.bytes_received += r.bytes_received;
        self.body_bytes += r.body_bytes;
    }

    pub fn merge(&mut self, o: &FamilyStats) {
        self.requests += o.requests;
        self.normal += o.normal;
        self.reset += o.reset;
        self.timeout += o.timeout;
        self.timeout_connecting += o.timeout_connecting;
        self.refused += o.refused;
        self.other += o.other;
        for (k, v) in &o.other_kinds {
            *self.other_kinds.entry(k.clone()).or_default() += v;
        }
        self.connect.merge(&o.connect);
        self.continuation.merge(&o.continuation);
        self.latency.merge(&o.latency);
        self.bytes_received += o.bytes_received;
        self.body_bytes += o.body_bytes;
    }

    pub fn report(&self, wall: Duration) -> FamilyReport {
        let wall_s = wall.as_secs_f64().max(1e-9);
        FamilyReport {
            requests: self.requests,
            normal: self.normal,
            reset: self.reset,
            timeout: self.timeout,
            timeout_connecting: self.timeout_connecting,
            refused: self.refused,
            other: self.other,
            other_kinds: self.other_kinds.clone(),
            connect_us: self.connect.summary(1e3),
            continuation_ms: self.continuation.summary(1e6),
            latency_ms: self.latency.summary(1e6),
            bytes_received: self.bytes_received,
            body_bytes: self.body_bytes,
            throughput_mbps: self.body_bytes as f64 * 8.0 / wall_s / 1e6,
            normal_per_s: self.normal as f64 / wall_s,
        }
    }
}

/// Per family: index 0 = v6, 1 = v4 (Family::index).
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub by_family: [FamilyStats; 2],
}

impl Totals {
    pub fn record(&mut self, family: Family, r: &FetchResult, latency: Option<Duration>) {
        self.by_family[family.index()].record(r, latency);
    }
    pub fn merge(&mut self, o: &Totals) {
        for i in 0..2 {
            self.by_family[i].merge(&o.by_family[i]);
        }
    }
    pub fn overall(&self) -> FamilyStats {
        let mut all = self.by_family[0].clone();
        all.merge(&self.by_family[1]);
        all
    }
    pub fn reports(&self, wall: Duration) -> BTreeMap<String, FamilyReport> {
        let mut out = BTreeMap::new();
        out.insert("v6".to_string(), self.by_family[0].report(wall));
        out.insert("v4".to_string(), self.by_family[1].report(wall));
        out.insert("all".to_string(), self.overall().report(wall));
        out
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct FamilyReport {
    pub requests: u64,
    pub normal: u64,
    pub reset: u64,
    pub timeout: u64,
    pub timeout_connecting: u64,
    pub refused: u64,
    pub other: u64,
    pub other_kinds: BTreeMap<String, u64>,
    /// SYN -> connected, µs, every completed handshake
    pub connect_us: Summary,
    /// connected -> last body byte, ms, NORMAL fetches
    pub continuation_ms: Summary,
    /// (scheduled) start -> last body byte, ms, NORMAL fetches
    pub latency_ms: Summary,
    pub bytes_received: u64,
    pub body_bytes: u64,
    pub throughput_mbps: f64,
    pub normal_per_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_average_and_percentiles() {
        let mut h = TimeHist::default();
        for us in 1..=100u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary(1e3);
        assert_eq!(s.count, 100);
        assert!((s.avg - 50.5).abs() < 1e-9, "{s:?}");
        assert!((s.p50 - 50.0).abs() < 0.1 && (s.p99 - 99.0).abs() < 0.1 && (s.max - 100.0).abs() < 0.1, "{s:?}");
        let mut g = TimeHist::default();
        g.merge(&h);
        assert_eq!(g.summary(1e3), s);
    }
}
