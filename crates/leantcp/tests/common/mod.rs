//! The simulator set-up the integration tests share: a client `a` (active open) and a
//! server `b` (listening) on the in-memory network of `leantcp::sim`, and small helpers.
#![allow(dead_code)] // each test file uses its own part of it
use std::net::SocketAddr;
use std::time::Duration;

use leantcp::sim::{Endpoint, LinkConfig, Sim};
use leantcp::{Connection, Event, Seq, State, TcpConfig};

/// The client's ISN; the server's is `SERVER_ISS`.
pub const CLIENT_ISS: Seq = Seq(1000);
pub const SERVER_ISS: Seq = Seq(0xffff_ff00);

/// (client, server) addresses of the family asked for.
pub fn addrs(v6: bool) -> (SocketAddr, SocketAddr) {
    if v6 {
        ("[fd00::2]:40000".parse().unwrap(), "[fd00::1]:80".parse().unwrap())
    } else {
        ("10.0.0.2:40000".parse().unwrap(), "10.0.0.1:80".parse().unwrap())
    }
}

/// Payload bytes that show any reordering or corruption.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// `a` connects with `client`, `b` listens with `server`; nothing has run yet.
pub fn setup(client: TcpConfig, server: TcpConfig, a_to_b: LinkConfig, b_to_a: LinkConfig, v6: bool) -> Sim {
    let (a, b) = addrs(v6);
    let mut sim = Sim::new(a_to_b, b_to_a);
    sim.a.conn = Some(Connection::connect(a, b, client, CLIENT_ISS));
    sim.b.listen = Some((server, SERVER_ISS));
    sim
}

/// `setup`, run until both ends are established (within 5 virtual seconds).
pub fn connected(client: TcpConfig, server: TcpConfig, a_to_b: LinkConfig, b_to_a: LinkConfig, v6: bool) -> Sim {
    let mut sim = setup(client, server, a_to_b, b_to_a, v6);
    assert!(sim.run_until(Duration::from_secs(5), established), "handshake");
    sim
}

pub fn events(conn: &mut Connection) -> Vec<Event> {
    std::iter::from_fn(|| conn.poll_event()).collect()
}

pub fn state(end: &Endpoint) -> State {
    end.conn.as_ref().map_or(State::Closed, |c| c.state())
}

pub fn established(sim: &Sim) -> bool {
    state(&sim.a) == State::Established && state(&sim.b) == State::Established
}
