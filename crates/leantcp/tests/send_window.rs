//! The sender's own window cap (`TcpConfig::send_window_segments`): never more than N
//! full segments in flight, on a clean path and across go-back-N after a loss.
use std::net::SocketAddr;
use std::time::Duration;

use leantcp::sim::{LinkConfig, Sim};
use leantcp::{Connection, Seq, State, TcpConfig};

const MSS_V4: usize = 1460;

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// The most bytes the server had in flight while sending `len` bytes to the client,
/// the virtual time the transfer took, and the server's retransmissions.
fn transfer(server: TcpConfig, b_to_a: LinkConfig, len: usize) -> (usize, Duration, u64) {
    let client: SocketAddr = "10.0.0.2:40000".parse().unwrap();
    let server_addr: SocketAddr = "10.0.0.1:80".parse().unwrap();
    let mut sim = Sim::new(LinkConfig::default(), b_to_a);
    sim.a.conn = Some(Connection::connect(client, server_addr, TcpConfig::default(), Seq(1000)));
    sim.b.listen = Some((server, Seq(0xffff_ff00)));
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
    (max_in_flight, sim.now.saturating_since(start), retransmissions)
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
