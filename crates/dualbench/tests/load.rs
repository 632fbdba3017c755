//! `dualbench load`: open loop keeps its rate against a server that stalls (no coordinated
//! omission); closed loop is paced by the server; keep-alive reuses connections.

mod common;

use std::time::Duration;

use common::{start, Behaviour};
use dualbench::http::Url;
use dualbench::load::{run_load, Bound, Drive, LoadConfig};

fn config(addr: std::net::SocketAddr, drive: Drive, bound: Bound, timeout_ms: u64) -> LoadConfig {
    LoadConfig {
        urls: vec![Url { addr, path: "/f".into() }],
        drive,
        bound,
        keepalive: false,
        timeout: Duration::from_millis(timeout_ms),
        threads: 2,
        print_seconds: false,
        max_connections: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_rate_is_honoured_against_a_stalled_server() {
    let srv = start("127.0.0.1:0", Behaviour::Stall).await;
    let out = run_load(&config(srv.addr, Drive::Rate(100.0), Bound::Seconds(Duration::from_millis(1500)), 300)).await;
    assert_eq!(out.started, 150, "rate x seconds fetches started");
    let all = out.totals.overall();
    assert_eq!((all.requests, all.timeout, all.normal), (150, 150, 0));
    // they started on schedule: the first second saw ~100 starts, none completed on time
    let first = &out.per_second[0];
    assert!((95..=105).contains(&first.started), "{first:?}");
    assert!(out.max_start_lag < Duration::from_millis(100), "{:?}", out.max_start_lag);
    assert!(out.wall < Duration::from_millis(2500), "{:?}", out.wall);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_latency_counts_from_the_scheduled_time_while_closed_loop_is_paced() {
    let srv = start("[::1]:0", Behaviour::Slow(Duration::from_millis(200), 1000)).await;
    let open = run_load(&config(srv.addr, Drive::Rate(40.0), Bound::Fetches(40), 2000)).await;
    let o = open.totals.overall();
    assert_eq!((o.requests, o.normal), (40, 40));
    assert!(o.latency.summary(1e6).p50 >= 195.0, "{:?}", o.latency.summary(1e6));
    let closed = run_load(&config(srv.addr, Drive::Parallel(2), Bound::Seconds(Duration::from_millis(1000)), 2000)).await;
    // two workers, 200 ms per fetch: ~10 fetches in 1 s, not 40
    let c = closed.totals.overall();
    assert!((8..=12).contains(&c.requests), "closed loop fetches {}", c.requests);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_reuses_connections() {
    let srv = start("127.0.0.1:0", Behaviour::Serve(4096)).await;
    let mut cfg = config(srv.addr, Drive::Parallel(4), Bound::Fetches(400), 2000);
    cfg.keepalive = true;
    let out = run_load(&cfg).await;
    let all = out.totals.overall();
    assert_eq!((all.requests, all.normal), (400, 400));
    assert!(all.connect.count() <= 8, "handshakes {}", all.connect.count());
    cfg.keepalive = false;
    let fresh = run_load(&cfg).await.totals.overall();
    assert_eq!((fresh.normal, fresh.connect.count()), (400, 400));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_cap_skips_fetches_due_while_the_cap_is_full_and_keeps_the_schedule() {
    // a stalled server holds every fetch until its 500 ms timeout: at 100/s, 50 would be open
    let srv = start("127.0.0.1:0", Behaviour::Stall).await;
    let mut cfg = config(srv.addr, Drive::Rate(100.0), Bound::Seconds(Duration::from_millis(1500)), 500);
    cfg.max_connections = Some(10);
    assert_eq!(cfg.sockets_needed(), 10, "the cap bounds the sockets needed");
    let out = run_load(&cfg).await;
    assert_eq!(out.started + out.skipped, 150, "every scheduled fetch is started or skipped");
    assert!(out.max_open <= 10, "at most the cap open: {}", out.max_open);
    // each 500 ms timeout frees the 10 slots once: ~10 per 500 ms started, the rest skipped
    assert!((20..=45).contains(&out.started), "started {}", out.started);
    assert_eq!(out.totals.overall().requests, out.started);
    // the per-second lines split the schedule the same way: ~100 due in the first second
    let first = &out.per_second[0];
    assert!((95..=105).contains(&(first.started + first.skipped)), "{first:?}");
    assert!(first.skipped >= 60, "{first:?}");
    // skipping never delays the fetches that do start
    assert!(out.max_start_lag < Duration::from_millis(100), "{:?}", out.max_start_lag);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cap_above_the_need_changes_nothing() {
    let srv = start("127.0.0.1:0", Behaviour::Serve(4096)).await;
    let mut cfg = config(srv.addr, Drive::Rate(50.0), Bound::Fetches(50), 2000);
    cfg.max_connections = Some(1000);
    let out = run_load(&cfg).await;
    assert_eq!((out.started, out.skipped), (50, 0));
    assert_eq!(out.totals.overall().normal, 50);
}
