//! A deterministic in-memory network for tests: two endpoints, a virtual clock, and one
//! link per direction with rate, delay, a drop-tail queue and seeded random loss.
//! Segments cross the links as real IP bytes, so the wire code is exercised too.
use core::time::Duration;
use std::collections::VecDeque;

use crate::conn::{reset_for, Connection, TcpConfig};
use crate::segment::Segment;
use crate::seq::Seq;
use crate::syncookie::SynCookies;
use crate::time::Instant;

/// xorshift64*: small, seeded, reproducible.
#[derive(Debug, Clone)]
pub struct SeededRng(u64);

impl SeededRng {
    pub fn new(seed: u64) -> Self {
        SeededRng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// 0 means infinitely fast.
    pub rate_bps: u64,
    pub delay: Duration,
    pub queue_packets: usize,
    pub loss: f64,
    pub seed: u64,
    /// Indices (0-based, counting every packet offered to the link) to drop deterministically.
    pub drop_indices: Vec<u64>,
    /// (index, extra delay): these packets arrive late, after ones sent behind them (reordering).
    pub delay_indices: Vec<(u64, Duration)>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_bps: 100_000_000,
            delay: Duration::from_millis(5),
            queue_packets: 100,
            loss: 0.0,
            seed: 1,
            drop_indices: Vec::new(),
            delay_indices: Vec::new(),
        }
    }
}

#[derive(Debug)]
pub struct Link {
    config: LinkConfig,
    rng: SeededRng,
    in_flight: VecDeque<(Instant, Vec<u8>)>,
    finish_times: VecDeque<Instant>,
    busy_until: Instant,
    pub offered: u64,
    pub dropped_loss: u64,
    pub dropped_queue: u64,
}

impl Link {
    pub fn new(config: LinkConfig) -> Self {
        Link {
            rng: SeededRng::new(config.seed),
            config,
            in_flight: VecDeque::new(),
            finish_times: VecDeque::new(),
            busy_until: Instant::ZERO,
            offered: 0,
            dropped_loss: 0,
            dropped_queue: 0,
        }
    }

    pub fn send(&mut self, now: Instant, packet: Vec<u8>) {
        let index = self.offered;
        self.offered += 1;
        if self.config.drop_indices.contains(&index)
            || (self.config.loss > 0.0 && self.rng.next_f64() < self.config.loss)
        {
            self.dropped_loss += 1;
            return;
        }
        while matches!(self.finish_times.front(), Some(t) if *t <= now) {
            self.finish_times.pop_front();
        }
        if self.finish_times.len() >= self.config.queue_packets {
            self.dropped_queue += 1;
            return;
        }
        let serialization = (packet.len() as u64 * 8 * 1_000_000_000)
            .checked_div(self.config.rate_bps)
            .map_or(Duration::ZERO, Duration::from_nanos);
        let start = self.busy_until.max(now);
        let finish = start + serialization;
        self.busy_until = finish;
        self.finish_times.push_back(finish);
        let extra = self.config.delay_indices.iter().find(|(i, _)| *i == index).map_or(Duration::ZERO, |(_, d)| *d);
        let arrival = finish + self.config.delay + extra;
        // Kept in arrival order; equal times keep their sending order.
        let at = self.in_flight.iter().rposition(|(t, _)| *t <= arrival).map_or(0, |i| i + 1);
        self.in_flight.insert(at, (arrival, packet));
    }

    pub fn next_delivery(&self) -> Option<Instant> {
        self.in_flight.front().map(|(t, _)| *t)
    }

    pub fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if matches!(self.in_flight.front(), Some((t, _)) if *t <= now) {
            self.in_flight.pop_front().map(|(_, p)| p)
        } else {
            None
        }
    }
}

/// One side of the simulated network: an optional connection plus a tiny application.
#[derive(Debug, Default)]
pub struct Endpoint {
    pub conn: Option<Connection>,
    /// Accept the first SYN that arrives (passive open) with this config and ISS.
    pub listen: Option<(TcpConfig, Seq)>,
    /// Application data still to write into the connection.
    pub to_send: VecDeque<u8>,
    /// Close once everything in `to_send` has been handed to the connection.
    pub close_after_send: bool,
    /// Read received data into `received` (off: test zero windows).
    pub reading: bool,
    pub received: Vec<u8>,
    /// Every segment this endpoint transmitted, for inspection.
    pub sent_log: Vec<Segment>,
    /// When each segment of `sent_log` was handed to the link.
    pub sent_times: Vec<Instant>,
    pub resets_sent: u64,
    /// With `listen`: answer SYNs with cookies (RFC 4987 §3.6) instead of a connection,
    /// and open the connection from a valid cookie ACK.
    pub cookies: Option<SynCookies>,
    pub cookies_sent: u64,
    pub cookies_validated: u64,
}

#[derive(Debug)]
pub struct Sim {
    pub now: Instant,
    pub a: Endpoint,
    pub b: Endpoint,
    pub a_to_b: Link,
    pub b_to_a: Link,
}

impl Sim {
    pub fn new(a_to_b: LinkConfig, b_to_a: LinkConfig) -> Self {
        Sim {
            now: Instant::ZERO,
            a: Endpoint { reading: true, ..Default::default() },
            b: Endpoint { reading: true, ..Default::default() },
            a_to_b: Link::new(a_to_b),
            b_to_a: Link::new(b_to_a),
        }
    }

    fn pump(endpoint: &mut Endpoint, link: &mut Link, now: Instant) {
        if let Some(conn) = endpoint.conn.as_mut() {
            while !endpoint.to_send.is_empty() {
                let (front, _) = endpoint.to_send.as_slices();
                let taken = conn.send(front);
                if taken == 0 {
                    break;
                }
                endpoint.to_send.drain(..taken);
            }
            if endpoint.close_after_send && endpoint.to_send.is_empty() {
                conn.close(now);
            }
            if endpoint.reading {
                let data = conn.recv(usize::MAX);
                endpoint.received.extend(data);
            }
            while let Some(seg) = conn.poll_transmit(now) {
                link.send(now, seg.to_ip_bytes(64).expect("own segments serialize"));
                endpoint.sent_log.push(seg);
                endpoint.sent_times.push(now);
            }
        }
    }

    fn deliver(endpoint: &mut Endpoint, back: &mut Link, bytes: &[u8], now: Instant) {
        let seg = Segment::parse_ip(bytes).expect("link carries valid packets");
        if endpoint.conn.as_ref().is_none_or(|c| c.is_closed()) {
            if let (Some((config, _)), Some(cookies), true) =
                (endpoint.listen, endpoint.cookies.as_ref(), endpoint.conn.is_none())
            {
                if seg.syn && seg.ack.is_none() {
                    let options = SynCookies::options_for(&seg, config.sack, config.timestamps);
                    let iss = cookies.make(&seg, &options, now);
                    if let Some(syn_ack) = Connection::cookie_syn_ack(&seg, &options, config, iss, now) {
                        endpoint.cookies_sent += 1;
                        back.send(now, syn_ack.to_ip_bytes(64).expect("own segments serialize"));
                        endpoint.sent_log.push(syn_ack);
                        endpoint.sent_times.push(now);
                    }
                    return;
                }
                if let Ok(options) = cookies.check(&seg, now) {
                    let iss = Seq(seg.ack.map_or(0, |a| a.0.wrapping_sub(1)));
                    if let Some(conn) = Connection::accept_cookie(&seg, &options, config, iss, now) {
                        endpoint.cookies_validated += 1;
                        endpoint.conn = Some(conn);
                        return;
                    }
                }
            }
            if let (Some((config, iss)), true) = (endpoint.listen, endpoint.conn.is_none()) {
                if let Some(conn) = Connection::accept(&seg, config, iss) {
                    endpoint.conn = Some(conn);
                    return;
                }
            }
            if let Some(rst) = reset_for(&seg) {
                endpoint.resets_sent += 1;
                back.send(now, rst.to_ip_bytes(64).expect("rst serializes"));
            }
            return;
        }
        if let Some(conn) = endpoint.conn.as_mut() {
            conn.handle_segment(&seg, now);
        }
    }

    /// Runs one event; false when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        Self::pump(&mut self.a, &mut self.a_to_b, self.now);
        Self::pump(&mut self.b, &mut self.b_to_a, self.now);
        let timers = [&self.a, &self.b].map(|e| e.conn.as_ref().and_then(|c| c.poll_timeout()));
        let next = [self.a_to_b.next_delivery(), self.b_to_a.next_delivery(), timers[0], timers[1]]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else { return false };
        self.now = self.now.max(next);
        while let Some(bytes) = self.a_to_b.pop_due(self.now) {
            Self::deliver(&mut self.b, &mut self.b_to_a, &bytes, self.now);
        }
        while let Some(bytes) = self.b_to_a.pop_due(self.now) {
            Self::deliver(&mut self.a, &mut self.a_to_b, &bytes, self.now);
        }
        for endpoint in [&mut self.a, &mut self.b] {
            if let Some(conn) = endpoint.conn.as_mut() {
                if matches!(conn.poll_timeout(), Some(t) if t <= self.now) {
                    conn.handle_timeout(self.now);
                }
            }
        }
        true
    }

    /// Steps until `done` holds or `limit` of virtual time passes; returns whether `done` held.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Sim) -> bool) -> bool {
        let deadline = self.now + limit;
        for _ in 0..10_000_000u64 {
            if done(self) {
                return true;
            }
            if self.now > deadline || !self.step() {
                return done(self);
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_rate_delay_and_queue() {
        let mut link = Link::new(LinkConfig {
            rate_bps: 8_000_000,
            delay: Duration::from_millis(10),
            queue_packets: 2,
            ..Default::default()
        });
        // 1000 bytes at 8 Mbit/s = 1 ms serialization.
        link.send(Instant::ZERO, vec![0; 1000]);
        link.send(Instant::ZERO, vec![0; 1000]);
        link.send(Instant::ZERO, vec![0; 1000]);
        assert_eq!(link.dropped_queue, 1, "drop-tail at 2 packets");
        assert_eq!(link.next_delivery(), Some(Instant::from_millis(11)));
        assert!(link.pop_due(Instant::from_millis(11)).is_some());
        assert!(link.pop_due(Instant::from_millis(11)).is_none());
        assert!(link.pop_due(Instant::from_millis(12)).is_some());
    }

    #[test]
    fn delayed_packet_arrives_after_later_ones() {
        let mut link = Link::new(LinkConfig {
            rate_bps: 0,
            delay_indices: vec![(0, Duration::from_millis(3))],
            ..Default::default()
        });
        link.send(Instant::ZERO, vec![0]);
        link.send(Instant::ZERO, vec![1]);
        link.send(Instant::from_millis(1), vec![2]);
        let order: Vec<u8> = std::iter::from_fn(|| link.pop_due(Instant::from_millis(100)).map(|p| p[0])).collect();
        assert_eq!(order, vec![1, 2, 0]);
    }

    #[test]
    fn seeded_loss_is_reproducible() {
        let run = |seed| {
            let mut link =
                Link::new(LinkConfig { loss: 0.3, seed, rate_bps: 0, queue_packets: 10_000, ..Default::default() });
            for _ in 0..1000 {
                link.send(Instant::ZERO, vec![0; 10]);
            }
            link.dropped_loss
        };
        assert_eq!(run(7), run(7));
        let dropped = run(7);
        assert!((250..350).contains(&dropped), "about 30 % of 1000, got {dropped}");
    }
}
