//! The sender's own limits beside the peer's window: a cap on segments in flight
//! (`TcpConfig::send_window_segments`: never more than N full segments, on a clean path and
//! across go-back-N after a loss) and pacing (`TcpConfig::pacing_rate_bps`).
use std::time::Duration;

use leantcp::sim::{LinkConfig, Sim};
use leantcp::{State, TcpConfig};

mod common;
use common::*;

const MSS_V4: usize = 1460;

/// The most bytes the server had in flight while sending `len` bytes to the client,
/// the virtual time the transfer took, and the server's retransmissions.
fn transfer(server: TcpConfig, b_to_a: LinkConfig, len: usize) -> (usize, Duration, u64) {
    let (max, time, retransmissions, _) = transfer_sim(server, b_to_a, len);
    (max, time, retransmissions)
}

fn transfer_sim(server: TcpConfig, b_to_a: LinkConfig, len: usize) -> (usize, Duration, u64, Sim) {
    let mut sim = setup(TcpConfig::default(), server, LinkConfig::default(), b_to_a, false);
    let established = |s: &Sim| s.b.conn.as_ref().is_some_and(|c| c.state() == State::Established);
    assert!(sim.run_until(Duration::from_secs(5), established));
    let start = sim.now;
    sim.b.to_send.extend(pattern(len));
    let mut max_in_flight = 0;
    let done = sim.run_until(Duration::from_secs(600), |s| {
        let conn = s.b.conn.as_ref().unwrap();
        max_in_flight = max_in_flight.max(conn.bytes_in_flight());
        s.a.received.len() == len
    });
    assert!(done, "transfer of {len} bytes did not finish: got {}", sim.a.received.len());
    assert_eq!(sim.a.received, pattern(len), "byte-identical");
    let retransmissions = sim.b.conn.as_ref().unwrap().stats().retransmissions;
    (max_in_flight, sim.now.saturating_since(start), retransmissions, sim)
}

fn capped(segments: usize) -> TcpConfig {
    TcpConfig { send_window_segments: Some(segments), ..TcpConfig::bare() }
}

#[test]
fn cap_is_honoured_and_reached_on_a_clean_path() {
    let (uncapped, uncapped_time, _) = transfer(TcpConfig::bare(), LinkConfig::default(), 200 * 1024);
    assert!(uncapped > 16 * MSS_V4, "without a cap the bare sender fills the client's 64 KiB: {uncapped}");
    for segments in [1, 4, 8, 16] {
        let (max, time, retransmissions) = transfer(capped(segments), LinkConfig::default(), 200 * 1024);
        assert_eq!(max, segments * MSS_V4, "cap {segments}: at most and at last exactly N full segments");
        assert_eq!(retransmissions, 0);
        if segments <= 4 {
            // 10 ms RTT: N segments per round trip is slower than the uncapped burst
            assert!(time > uncapped_time, "cap {segments}: {time:?} vs uncapped {uncapped_time:?}");
        }
    }
}

#[test]
fn cap_holds_across_go_back_n_after_a_loss() {
    // server -> client packet #12 (data, mid-transfer) is lost: timeout, then go-back-N
    let lossy = LinkConfig { drop_indices: vec![12], ..LinkConfig::default() };
    let (max, _, retransmissions) = transfer(capped(8), lossy, 100 * 1024);
    assert!(retransmissions >= 1);
    assert!(max <= 8 * MSS_V4, "in flight {max} above 8 segments");
}

#[test]
fn a_cap_of_zero_is_rejected() {
    let err = capped(0).validate().unwrap_err();
    assert!(err.contains("send window"), "{err}");
    assert!(capped(1).validate().is_ok());
}

fn paced(rate_bps: u64) -> TcpConfig {
    TcpConfig { pacing_rate_bps: Some(rate_bps), ..TcpConfig::bare() }
}

/// Gaps between the server's consecutive data segments, in microseconds.
fn data_gaps_us(sim: &Sim) -> Vec<u64> {
    let times: Vec<_> =
        sim.b.sent_log.iter().zip(&sim.b.sent_times).filter(|(s, _)| !s.payload.is_empty()).map(|(_, t)| *t).collect();
    times.windows(2).map(|w| w[1].saturating_since(w[0]).as_micros() as u64).collect()
}

#[test]
fn pacing_spaces_data_segments_at_the_rate() {
    // 10 Mbit/s: a full segment (1460 + 40 bytes) every 1.2 ms, on a 100 Mbit/s link
    let (_, paced_time, retransmissions, sim) = transfer_sim(paced(10_000_000), LinkConfig::default(), 100 * 1024);
    assert_eq!(retransmissions, 0);
    let gaps = data_gaps_us(&sim);
    assert!(gaps.len() > 60, "{} data segments", gaps.len() + 1);
    assert!(gaps.iter().all(|&g| g >= 1_199), "a gap below 1.2 ms: {:?}", gaps.iter().min());
    // 100 KiB at 10 Mbit/s takes at least 84 ms; unpaced it goes out in one burst
    assert!(paced_time >= Duration::from_millis(84), "{paced_time:?}");
    let (_, burst_time, _, burst) = transfer_sim(TcpConfig::bare(), LinkConfig::default(), 100 * 1024);
    assert!(burst_time < paced_time, "{burst_time:?} vs {paced_time:?}");
    assert!(data_gaps_us(&burst).iter().any(|&g| g < 1_000), "unpaced segments leave back to back");
    assert!(paced(0).validate().unwrap_err().contains("pacing"));
}
