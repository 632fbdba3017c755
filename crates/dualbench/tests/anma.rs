//! `dualbench anma` against tiny servers on 127.0.0.1 and ::1: exact per-family counts for
//! the slides' patterns A-E, and each closed status (RESET, TIMEOUT, refused).

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{refused_addr, start, Behaviour};
use dualbench::anma::{run_anma, AnmaConfig};

fn config(targets: Vec<SocketAddr>, requests: u64, concurrency: usize, timeout: Duration) -> AnmaConfig {
    AnmaConfig { targets, path: "/4KiB.bin".into(), requests, concurrency, timeout, seed: Some(42) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patterns_a_to_e_come_out_exactly() {
    let v6 = start("[::1]:0", Behaviour::Serve(4096)).await;
    let v4 = start("127.0.0.1:0", Behaviour::Serve(4096)).await;
    let requests = 200u64;
    // (pattern, v6 entries, v4 entries)
    for (pattern, n6, n4) in [("A", 1, 1), ("B", 4, 1), ("C", 1, 4), ("D", 1, 0), ("E", 0, 1)] {
        let mut targets = vec![v6.addr; n6];
        targets.extend(vec![v4.addr; n4]);
        let out = run_anma(&config(targets, requests, 20, Duration::from_secs(5))).await;
        let [s6, s4] = &out.totals.by_family;
        let expect6 = requests * n6 as u64 / (n6 + n4) as u64;
        assert_eq!((s6.requests, s4.requests), (expect6, requests - expect6), "pattern {pattern}");
        assert_eq!((s6.normal, s4.normal), (expect6, requests - expect6), "pattern {pattern}: all NORMAL");
        assert_eq!(s6.body_bytes + s4.body_bytes, requests * 4096, "pattern {pattern}");
        assert_eq!(s6.connect.count() + s4.connect.count(), requests, "one handshake per request");
        assert_eq!(s6.continuation.count() + s4.continuation.count(), requests);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_reset_is_counted_as_reset() {
    let srv = start("127.0.0.1:0", Behaviour::Reset).await;
    let out = run_anma(&config(vec![srv.addr], 30, 5, Duration::from_secs(5))).await;
    let s4 = &out.totals.by_family[1];
    assert_eq!((s4.requests, s4.reset, s4.normal), (30, 30, 0), "{:?}", s4.other_kinds);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_server_times_out_after_the_set_timeout() {
    let srv = start("[::1]:0", Behaviour::Stall).await;
    let t0 = Instant::now();
    let out = run_anma(&config(vec![srv.addr], 4, 4, Duration::from_millis(300))).await;
    let wall = t0.elapsed();
    let s6 = &out.totals.by_family[0];
    assert_eq!((s6.timeout, s6.timeout_connecting, s6.normal), (4, 0, 0));
    assert!(wall >= Duration::from_millis(300) && wall < Duration::from_millis(1000), "{wall:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_port_is_counted_not_a_crash() {
    let good = start("127.0.0.1:0", Behaviour::Serve(100)).await;
    let targets = vec![refused_addr("[::1]:0"), good.addr];
    let out = run_anma(&config(targets, 10, 3, Duration::from_secs(2))).await;
    let [s6, s4] = &out.totals.by_family;
    assert_eq!((s6.requests, s6.refused), (5, 5));
    assert_eq!((s4.requests, s4.normal), (5, 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_body_is_other_not_normal() {
    // a server that promises 4096 bytes, sends 10 and closes
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        for _ in 0..3 {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n0123456789").await;
        }
    });
    let out = run_anma(&config(vec![addr], 3, 1, Duration::from_secs(2))).await;
    let s4 = &out.totals.by_family[1];
    assert_eq!((s4.normal, s4.other, s4.other_kinds.get("short_body").copied()), (0, 3, Some(3)));
    server.await.unwrap();
}
