//! `dualbench load`: http_load semantics. Open loop (`--rate`): fetch k starts at
//! start + k/rate whatever earlier fetches are doing, and its latency counts from that
//! scheduled time, so a slow server cannot slow the offered load (no coordinated
//! omission). Closed loop (`--parallel`): P workers each fetch back to back.
//! Always bounded: by seconds or by a fetch count, and every fetch by a timeout.
//!
//! Open loop may be capped (`max_connections`): a fetch whose scheduled time comes while
//! that many fetches are still open is *skipped* — counted, never started, never delayed —
//! so the schedule of the fetches that do start stays the configured one, and the
//! shortfall shows as `skipped` per second instead of as a slower offered rate in disguise.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::{sleep_until, Instant};

use crate::addresses::Family;
use crate::fetch::{fetch, FetchResult, Outcome};
use crate::http::{request_bytes, Url};
use crate::stats::Totals;

#[derive(Clone, Copy, Debug)]
pub enum Drive {
    Rate(f64),
    Parallel(usize),
}

#[derive(Clone, Copy, Debug)]
pub enum Bound {
    Seconds(Duration),
    Fetches(u64),
}

#[derive(Clone, Debug)]
pub struct LoadConfig {
    pub urls: Vec<Url>,
    pub drive: Drive,
    pub bound: Bound,
    pub keepalive: bool,
    pub timeout: Duration,
    /// closed loop: OS threads, each with its own event loop (like wrk -t)
    pub threads: usize,
    /// print per-second lines as they happen
    pub print_seconds: bool,
    /// open loop: at most this many fetches open at once; the rest are skipped
    pub max_connections: Option<u64>,
}

impl LoadConfig {
    /// Sockets that may be open at once: P, or rate × timeout (+ keep-alive pool), capped
    /// by the total number of fetches when that is known.
    pub fn sockets_needed(&self) -> u64 {
        let concurrent = match self.drive {
            Drive::Parallel(p) => p as u64,
            Drive::Rate(r) => (r * (self.timeout.as_secs_f64() + 1.0)).ceil() as u64,
        };
        match (self.drive, self.bound) {
            (Drive::Rate(_), Bound::Fetches(n)) => concurrent.min(n),
            (Drive::Rate(r), Bound::Seconds(s)) => concurrent.min((r * s.as_secs_f64()).ceil() as u64),
            _ => concurrent,
        }
        .min(match self.drive {
            Drive::Rate(_) => self.max_connections.unwrap_or(u64::MAX),
            Drive::Parallel(_) => u64::MAX,
        })
    }
}

/// Live counters of one thread, on a cache line of its own (no false sharing).
#[derive(Default)]
#[repr(align(128))]
struct Live {
    started: AtomicU64,
    completed: AtomicU64,
    normal: AtomicU64,
    reset: AtomicU64,
    timeout: AtomicU64,
    refused: AtomicU64,
    other: AtomicU64,
    body_bytes: AtomicU64,
    skipped: AtomicU64,
}

impl Live {
    fn finish(&self, r: &FetchResult) {
        self.completed.fetch_add(1, Relaxed);
        self.body_bytes.fetch_add(r.body_bytes, Relaxed);
        match r.outcome {
            Outcome::Normal => &self.normal,
            Outcome::Reset => &self.reset,
            Outcome::Timeout { .. } => &self.timeout,
            Outcome::Refused => &self.refused,
            Outcome::Other(_) => &self.other,
        }
        .fetch_add(1, Relaxed);
    }
    fn snapshot(&self) -> [u64; 9] {
        [&self.started, &self.completed, &self.normal, &self.reset, &self.timeout, &self.refused, &self.other,
         &self.body_bytes, &self.skipped]
            .map(|a| a.load(Relaxed))
    }
}

/// One `Live` per closed-loop thread (one for the open loop); the reporter sums them.
struct Counters {
    slots: Vec<Live>,
}

impl Counters {
    fn new(n: usize) -> Self {
        Counters { slots: (0..n.max(1)).map(|_| Live::default()).collect() }
    }
    fn slot(&self, i: usize) -> &Live {
        &self.slots[i % self.slots.len()]
    }
    fn snapshot(&self) -> [u64; 9] {
        let mut sum = [0u64; 9];
        for live in &self.slots {
            for (s, v) in sum.iter_mut().zip(live.snapshot()) {
                *s += v;
            }
        }
        sum
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SecondLine {
    pub second: u64,
    pub started: u64,
    pub completed: u64,
    pub normal: u64,
    pub reset: u64,
    pub timeout: u64,
    pub refused: u64,
    pub other: u64,
    pub body_bytes: u64,
    pub mbps: f64,
    /// open loop with a connection cap: scheduled fetches not started
    pub skipped: u64,
}

impl SecondLine {
    pub fn human(&self) -> String {
        format!(
            "{:>4}s  started {:>6}  done {:>6}  normal {:>6}  reset {:>4}  timeout {:>4}  refused {:>4}  other {:>4}  {:>9.3} Mbit/s  skipped {:>4}",
            self.second, self.started, self.completed, self.normal, self.reset, self.timeout, self.refused,
            self.other, self.mbps, self.skipped
        )
    }
}

pub struct LoadOutcome {
    pub totals: Totals,
    pub wall: Duration,
    pub started: u64,
    /// open loop with a connection cap: scheduled fetches not started
    pub skipped: u64,
    /// the most fetches open at once
    pub max_open: u64,
    pub per_second: Vec<SecondLine>,
    /// open loop: the latest a fetch started after its scheduled time (scheduler fidelity)
    pub max_start_lag: Duration,
}

type Pool = Arc<Mutex<Vec<Vec<TcpStream>>>>;

pub async fn run_load(cfg: &LoadConfig) -> LoadOutcome {
    let slots = match cfg.drive {
        Drive::Parallel(p) => cfg.threads.clamp(1, p.max(1)),
        Drive::Rate(_) => 1,
    };
    let live = Arc::new(Counters::new(slots));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let reporter = tokio::spawn(report_seconds(live.clone(), lines.clone(), start, cfg.print_seconds));
    let requests: Arc<Vec<Vec<u8>>> =
        Arc::new(cfg.urls.iter().map(|u| request_bytes(&u.host_header(), &u.path, cfg.keepalive)).collect());
    let (totals, max_start_lag, max_open) = match cfg.drive {
        Drive::Rate(rate) => open_loop(cfg, rate, requests, live.clone(), start).await,
        Drive::Parallel(p) => (closed_loop(cfg, p, requests, live.clone(), start).await, Duration::ZERO, p as u64),
    };
    let wall = start.elapsed();
    reporter.abort();
    let _ = reporter.await;
    let per_second = lines.lock().unwrap().clone();
    let snap = live.snapshot();
    LoadOutcome { totals, wall, started: snap[0], skipped: snap[8], max_open, per_second, max_start_lag }
}

async fn report_seconds(live: Arc<Counters>, lines: Arc<Mutex<Vec<SecondLine>>>, start: Instant, print: bool) {
    let mut prev = [0u64; 9];
    for second in 1u64.. {
        sleep_until(start + Duration::from_secs(second)).await;
        let now = live.snapshot();
        let d: Vec<u64> = now.iter().zip(prev.iter()).map(|(a, b)| a - b).collect();
        prev = now;
        let line = SecondLine {
            second,
            started: d[0],
            completed: d[1],
            normal: d[2],
            reset: d[3],
            timeout: d[4],
            refused: d[5],
            other: d[6],
            body_bytes: d[7],
            mbps: d[7] as f64 * 8.0 / 1e6,
            skipped: d[8],
        };
        if print {
            crate::report::say(&line.human());
        }
        lines.lock().unwrap().push(line);
    }
}

async fn open_loop(
    cfg: &LoadConfig,
    rate: f64,
    requests: Arc<Vec<Vec<u8>>>,
    counters: Arc<Counters>,
    start: Instant,
) -> (Totals, Duration, u64) {
    let fetches = match cfg.bound {
        Bound::Fetches(n) => n,
        Bound::Seconds(s) => (s.as_secs_f64() * rate).ceil() as u64,
    };
    let totals = Arc::new(Mutex::new(Totals::default()));
    let pool: Pool = Arc::new(Mutex::new((0..cfg.urls.len()).map(|_| Vec::new()).collect()));
    let mut tasks = JoinSet::new();
    let mut max_lag = Duration::ZERO;
    let open = Arc::new(AtomicU64::new(0));
    let mut max_open = 0u64;
    for k in 0..fetches {
        let scheduled = start + Duration::from_secs_f64(k as f64 / rate);
        sleep_until(scheduled).await;
        max_lag = max_lag.max(scheduled.elapsed());
        while tasks.try_join_next().is_some() {}
        let now_open = open.load(Relaxed);
        if cfg.max_connections.is_some_and(|cap| now_open >= cap) {
            counters.slot(0).skipped.fetch_add(1, Relaxed);
            continue;
        }
        open.fetch_add(1, Relaxed);
        max_open = max_open.max(now_open + 1);
        counters.slot(0).started.fetch_add(1, Relaxed);
        let u = (k % cfg.urls.len() as u64) as usize;
        let addr = cfg.urls[u].addr;
        let (requests, counters, totals, pool) = (requests.clone(), counters.clone(), totals.clone(), pool.clone());
        let (keepalive, deadline) = (cfg.keepalive, scheduled + cfg.timeout);
        let open = open.clone();
        tasks.spawn(async move {
            let reuse = if keepalive { pool.lock().unwrap()[u].pop() } else { None };
            let mut buf = Vec::with_capacity(16 * 1024);
            let mut r = fetch(addr, &requests[u], deadline, keepalive, reuse, &mut buf).await;
            counters.slot(0).finish(&r);
            totals.lock().unwrap().record(Family::of(&addr), &r, Some(scheduled.elapsed()));
            if let Some(conn) = r.reusable.take() {
                pool.lock().unwrap()[u].push(conn);
            }
            open.fetch_sub(1, Relaxed);
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let totals = totals.lock().unwrap().clone();
    (totals, max_lag, max_open)
}

/// Closed loop, shaped like wrk: `threads` OS threads, each with its own single-threaded
/// event loop running its share of the P workers, so a fetch never hops threads.
async fn closed_loop(cfg: &LoadConfig, parallel: usize, requests: Arc<Vec<Vec<u8>>>, live: Arc<Counters>, start: Instant) -> Totals {
    let issued = Arc::new(AtomicU64::new(0));
    let threads = cfg.threads.clamp(1, parallel.max(1));
    let mut joins = Vec::with_capacity(threads);
    for t in 0..threads {
        let workers: Vec<usize> = (0..parallel.max(1)).filter(|w| w % threads == t).collect();
        let (requests, live, issued, cfg) = (requests.clone(), live.clone(), issued.clone(), cfg.clone());
        joins.push(std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
            rt.block_on(async move {
                let mut set = JoinSet::new();
                for w in workers {
                    set.spawn(closed_worker(w, t, parallel, cfg.clone(), requests.clone(), live.clone(), issued.clone(), start));
                }
                let mut totals = Totals::default();
                while let Some(t) = set.join_next().await {
                    totals.merge(&t.expect("worker task panicked"));
                }
                totals
            })
        }));
    }
    let per_thread = tokio::task::spawn_blocking(move || {
        joins.into_iter().map(|j| j.join().expect("load thread panicked")).collect::<Vec<_>>()
    })
    .await
    .expect("join load threads");
    let mut totals = Totals::default();
    for t in &per_thread {
        totals.merge(t);
    }
    totals
}

#[allow(clippy::too_many_arguments)]
async fn closed_worker(
    w: usize,
    thread: usize,
    parallel: usize,
    cfg: LoadConfig,
    requests: Arc<Vec<Vec<u8>>>,
    counters: Arc<Counters>,
    issued: Arc<AtomicU64>,
    start: Instant,
) -> Totals {
    let mut totals = Totals::default();
    let mut conns: Vec<Option<TcpStream>> = (0..cfg.urls.len()).map(|_| None).collect();
    let mut buf = Vec::with_capacity(16 * 1024);
    let live = counters.slot(thread);
    let mut k = w as u64;
    loop {
        match cfg.bound {
            Bound::Fetches(n) => {
                k = issued.fetch_add(1, Relaxed);
                if k >= n {
                    break;
                }
            }
            Bound::Seconds(s) => {
                if start.elapsed() >= s {
                    break;
                }
                k += parallel as u64;
            }
        }
        let u = (k % cfg.urls.len() as u64) as usize;
        let addr = cfg.urls[u].addr;
        live.started.fetch_add(1, Relaxed);
        let t0 = Instant::now();
        let mut r = fetch(addr, &requests[u], t0 + cfg.timeout, cfg.keepalive, conns[u].take(), &mut buf).await;
        live.finish(&r);
        totals.record(Family::of(&addr), &r, Some(t0.elapsed()));
        conns[u] = r.reusable.take();
    }
    totals
}
