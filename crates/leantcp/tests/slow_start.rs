//! Slow start and the send buffer in the deterministic simulator: RFC 9406 HyStart++ leaves
//! the initial slow start on a delay increase before a drop-tail queue overflows (standard
//! slow start overflows it), through Conservative Slow Start into congestion avoidance; and
//! send-buffer autotuning grows the buffer with the window (as Linux's tcp_sndbuf_expand),
//! up to its ceiling. The server (`b`) sends a bulk transfer to a Linux-like client (`a`).
use std::time::Duration;

use leantcp::cc::CcKind;
use leantcp::sim::{LinkConfig, Sim};
use leantcp::{Event, State, TcpConfig};

mod common;
use common::*;

/// A receiver with a window large enough never to be the limit (8 MiB).
fn client() -> TcpConfig {
    TcpConfig { recv_buffer_bytes: 8 << 20, window_scale: 8, ..TcpConfig::modern() }
}

/// 20 Mbit/s with 10 ms each way (BDP ≈ 35 segments) and a 300-packet drop-tail queue.
fn bottleneck() -> LinkConfig {
    LinkConfig { rate_bps: 20_000_000, delay: Duration::from_millis(10), queue_packets: 300, ..LinkConfig::default() }
}

struct Outcome {
    sim: Sim,
    events: Vec<Event>,
    max_in_flight: usize,
    max_send_buffer: usize,
    duration: Duration,
}

fn transfer(server: TcpConfig, b_to_a: LinkConfig, len: usize) -> Outcome {
    let mut sim = setup(client(), server, LinkConfig::default(), b_to_a, false);
    let established = |s: &Sim| s.b.conn.as_ref().is_some_and(|c| c.state() == State::Established);
    assert!(sim.run_until(Duration::from_secs(5), established), "handshake");
    let start = sim.now;
    sim.b.to_send.extend(pattern(len));
    let (mut max_in_flight, mut max_send_buffer) = (0, 0);
    let done = sim.run_until(Duration::from_secs(120), |s| {
        let conn = s.b.conn.as_ref().unwrap();
        max_in_flight = max_in_flight.max(conn.bytes_in_flight());
        max_send_buffer = max_send_buffer.max(conn.send_buffer_bytes());
        s.a.received.len() == len
    });
    assert!(done, "transfer of {len} bytes did not finish: {}", sim.a.received.len());
    assert_eq!(sim.a.received, pattern(len), "byte-identical");
    let duration = sim.now.saturating_since(start);
    let conn = sim.b.conn.as_mut().unwrap();
    let events = std::iter::from_fn(|| conn.poll_event()).collect();
    Outcome { sim, events, max_in_flight, max_send_buffer, duration }
}

fn phases(events: &[Event]) -> Vec<(&'static str, usize)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::CcPhase { phase, cwnd_bytes, .. } => Some((*phase, *cwnd_bytes)),
            _ => None,
        })
        .collect()
}

fn modern(hystart: bool) -> TcpConfig {
    TcpConfig { hystart, ..TcpConfig::modern() }
}

#[test]
fn hystart_leaves_slow_start_before_the_queue_overflows() {
    let len = 4 << 20;
    let standard = transfer(modern(false), bottleneck(), len);
    let standard_retx = standard.sim.b.conn.as_ref().unwrap().stats().retransmissions;
    assert!(
        standard.sim.b_to_a.dropped_queue > 50,
        "standard slow start overflows the queue: {} drops",
        standard.sim.b_to_a.dropped_queue
    );
    assert!(standard_retx > 50, "and repairs them: {standard_retx}");
    assert!(phases(&standard.events).iter().all(|(p, _)| *p != "css"), "no CSS without HyStart++");

    let hystart = transfer(modern(true), bottleneck(), len);
    let stats = hystart.sim.b.conn.as_ref().unwrap().stats();
    assert_eq!(hystart.sim.b_to_a.dropped_queue, 0, "HyStart++ left slow start in time");
    assert_eq!((stats.retransmissions, stats.recoveries), (0, 0));
    let seen = phases(&hystart.events);
    let names: Vec<&str> = seen.iter().map(|(p, _)| *p).collect();
    assert_eq!(names, ["css", "avoidance"], "slow start -> CSS on the delay increase -> avoidance after CSS_ROUNDS");
    // The delay rose by ≥ 4 ms (RFC 9406's floor) = ≥ 7 queued segments above the ~35-segment
    // pipe; CSS then grew the window by less than slow start would have, far below pipe + queue.
    let (css_cwnd, avoidance_cwnd) = (seen[0].1 / 1448, seen[1].1 / 1448);
    assert!((35..=120).contains(&css_cwnd), "CSS began at {css_cwnd} segments");
    assert!(avoidance_cwnd > css_cwnd && avoidance_cwnd < 335, "avoidance began at {avoidance_cwnd} segments");
    assert!(
        hystart.max_in_flight < standard.max_in_flight / 2,
        "{} vs {}",
        hystart.max_in_flight,
        standard.max_in_flight
    );
    assert!(hystart.duration < standard.duration * 2, "{:?} vs {:?}", hystart.duration, standard.duration);
}

#[test]
fn hystart_applies_only_to_the_initial_slow_start_and_not_to_compound() {
    // Compound keeps bpf/ctcp.bpf.c's slow start: the flag changes nothing.
    let compound = |hystart| TcpConfig { cc: CcKind::Compound, hystart, ..TcpConfig::modern() };
    let off = transfer(compound(false), bottleneck(), 2 << 20);
    let on = transfer(compound(true), bottleneck(), 2 << 20);
    assert_eq!(off.sim.b.sent_log.len(), on.sim.b.sent_log.len());
    assert_eq!(off.duration, on.duration);
    // Reno uses it as CUBIC does.
    let reno = transfer(TcpConfig { cc: CcKind::Reno, ..modern(true) }, bottleneck(), 2 << 20);
    assert_eq!(reno.sim.b_to_a.dropped_queue, 0);
    assert!(phases(&reno.events).iter().any(|(p, _)| *p == "css"));
}

/// 100 Mbit/s, 20 ms each way: a BDP of ~345 segments (500 KB), above a 64 KiB buffer.
fn long_fat() -> LinkConfig {
    LinkConfig { rate_bps: 100_000_000, delay: Duration::from_millis(20), queue_packets: 1000, ..LinkConfig::default() }
}

#[test]
fn send_buffer_autotuning_grows_with_the_window_up_to_its_ceiling() {
    let small = |max| TcpConfig { send_buffer_bytes: 64 * 1024, send_buffer_max_bytes: max, ..TcpConfig::modern() };
    let len = 8 << 20;
    let fixed = transfer(small(None), long_fat(), len);
    assert_eq!(fixed.max_send_buffer, 64 * 1024, "no autotuning: the buffer stays");
    let tuned = transfer(small(Some(1 << 20)), long_fat(), len);
    assert_eq!(tuned.max_send_buffer, 1 << 20, "two windows of a ~500 KB pipe reach the 1 MiB ceiling");
    assert!(
        fixed.max_in_flight <= 64 * 1024 && tuned.max_in_flight > 256 * 1024,
        "{} / {}",
        fixed.max_in_flight,
        tuned.max_in_flight
    );
    // The fixed buffer caps the flight at 64 KiB per 40 ms round trip (~13 Mbit/s); tuned fills the link.
    assert!(tuned.duration * 3 < fixed.duration, "{:?} vs {:?}", tuned.duration, fixed.duration);
    let bare = transfer(TcpConfig { send_buffer_bytes: 64 * 1024, ..TcpConfig::bare() }, long_fat(), 256 * 1024);
    assert_eq!(bare.max_send_buffer, 64 * 1024, "bare keeps a fixed buffer");
}
