//! `dualbench anma`: N requests over C concurrent connections, each request's target (and
//! so its family) taken round-robin from the address list, so the v6:v4 counts come out
//! exactly as the list's shares (N·k/E when E divides N). A seed shuffles the order only.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use tokio::time::Instant;

use crate::addresses::Family;
use crate::fetch::fetch;
use crate::http::{host_header, request_bytes};
use crate::stats::Totals;

#[derive(Clone, Debug)]
pub struct AnmaConfig {
    pub targets: Vec<SocketAddr>,
    pub path: String,
    pub requests: u64,
    pub concurrency: usize,
    pub timeout: Duration,
    pub seed: Option<u64>,
}

/// Target index of every request: round-robin over the list, optionally shuffled.
pub fn assignment(entries: usize, requests: u64, seed: Option<u64>) -> Vec<u32> {
    let mut plan: Vec<u32> = (0..requests).map(|i| (i % entries as u64) as u32).collect();
    if let Some(seed) = seed {
        plan.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    }
    plan
}

pub struct AnmaOutcome {
    pub totals: Totals,
    pub wall: Duration,
}

pub async fn run_anma(cfg: &AnmaConfig) -> AnmaOutcome {
    let plan = Arc::new(assignment(cfg.targets.len(), cfg.requests, cfg.seed));
    let requests: Arc<Vec<Vec<u8>>> =
        Arc::new(cfg.targets.iter().map(|a| request_bytes(&host_header(a), &cfg.path, false)).collect());
    let targets = Arc::new(cfg.targets.clone());
    let next = Arc::new(AtomicUsize::new(0));
    let workers = cfg.concurrency.max(1).min(plan.len().max(1));
    let start = Instant::now();
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (plan, requests, targets, next) = (plan.clone(), requests.clone(), targets.clone(), next.clone());
        let timeout = cfg.timeout;
        handles.push(tokio::spawn(async move {
            let mut totals = Totals::default();
            let mut buf = Vec::with_capacity(16 * 1024);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&t) = plan.get(i) else { break };
                let addr = targets[t as usize];
                let started = Instant::now();
                let r = fetch(addr, &requests[t as usize], started + timeout, false, None, &mut buf).await;
                totals.record(Family::of(&addr), &r, Some(started.elapsed()));
            }
            totals
        }));
    }
    let mut totals = Totals::default();
    for h in handles {
        totals.merge(&h.await.expect("worker task panicked"));
    }
    AnmaOutcome { totals, wall: start.elapsed() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignment_counts_are_exact_and_seed_only_reorders() {
        // pattern B: 4 v6 entries, 1 v4 entry
        let plan = assignment(5, 10_000, None);
        assert_eq!(plan.iter().filter(|&&t| t == 4).count(), 2_000);
        let shuffled = assignment(5, 10_000, Some(7));
        assert_ne!(plan, shuffled);
        let mut a = plan.clone();
        let mut b = shuffled.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b);
        assert_eq!(shuffled, assignment(5, 10_000, Some(7)));
    }
}
