//! The lean stack: Ethernet frames in, Ethernet frames out, `now` passed in — sans-IO like
//! leantcp, so it can be fuzzed. It is built in layers (docs/leanweb.md has the map):
//! - `interface`: Ethernet, ARP, NDP and the next hop's MAC; owns the frames produced;
//! - `ip`: one receive path for IPv4 and IPv6 (ICMP echo, NDP to the interface, TCP on);
//! - `tcp_demux`: segments to connections, the listener with its SYN cookies;
//! - `http_session`: HTTP/1.1 per connection, answered by an [`Application`]
//!   (crates/leanweb/src/app.rs; the only layer that touches files);
//! - `events`: the event log's lines about connections.
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use leantcp::{Instant, TcpConfig, Transmission};
use smoltcp::wire::{EthernetAddress, EthernetProtocol};

pub use crate::app::{Application, StaticFiles};
use crate::http::WallClock;
use crate::log::EventLog;
use http_session::{Limits, Serving};
use interface::Interface;
pub use ip::Ipv4Id;
use segment_lines::TxLine;
pub use tcp_demux::SynCookieMode;
use tcp_demux::{Key, Output, TcpDemux};

#[derive(Debug, Clone)]
pub struct StackConfig {
    pub mac: EthernetAddress,
    pub addr4: Ipv4Addr,
    pub prefix4: u8,
    pub addr6: Ipv6Addr,
    pub prefix6: u8,
    pub gateway4: Option<Ipv4Addr>,
    pub gateway6: Option<Ipv6Addr>,
    pub port: u16,
    /// Canonical document root.
    pub root: PathBuf,
    pub tcp: TcpConfig,
    pub max_connections: usize,
    pub max_half_open: usize,
    /// A started request head must be complete within this (slowloris).
    pub header_timeout: Duration,
    /// An idle keep-alive connection is closed after this.
    pub idle_timeout: Duration,
    /// When to answer SYNs with cookies instead of half-open entries (RFC 4987 §3.6).
    pub syn_cookies: SynCookieMode,
    /// The IPv4 identification of a connection's segments.
    pub ipv4_id: Ipv4Id,
}

/// Counters of the frame path; malformed input is counted and dropped, never fatal.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
pub struct Counters {
    pub frames_in: u64,
    pub frames_out: u64,
    pub malformed: u64,
    pub not_for_us: u64,
    pub arp_replies: u64,
    pub neighbor_adverts: u64,
    pub echo_replies: u64,
    pub syn_dropped_half_open_cap: u64,
    pub syn_refused_connection_cap: u64,
    pub resets_sent: u64,
    pub unresolved_next_hop: u64,
    pub connections_accepted: u64,
    pub requests: u64,
    pub slow_or_idle_closed: u64,
    /// SYN-ACKs sent with a cookie instead of a half-open entry.
    pub syn_cookies_sent: u64,
    /// ACKs whose cookie was valid: connections made from them.
    pub syn_cookies_validated: u64,
    /// ACKs to the listener with a forged, guessed or tampered cookie: dropped.
    pub syn_cookies_invalid: u64,
    /// ACKs with a cookie older than two ticks: dropped.
    pub syn_cookies_stale: u64,
    /// Valid cookie ACKs refused because the connection cap was reached (RST).
    pub syn_cookies_refused_connection_cap: u64,
}

/// A frame for the TAP device; `tx` is the TCP segment it carries, logged once the frame
/// is written (crates/leanweb/src/main.rs), so the log says what went on the wire.
pub struct OutFrame {
    pub bytes: Vec<u8>,
    pub tx: Option<TxRecord>,
}

#[derive(Debug, Clone, Copy)]
pub struct TxRecord {
    pub conn: u64,
    pub transmission: Transmission,
}

pub struct Stack<A: Application = StaticFiles> {
    interface: Interface,
    tcp: TcpDemux<A::Body>,
    app: A,
    limits: Limits,
    ipv4_id: Ipv4Id,
    /// Body bytes on their way into a connection's send buffer (http_session.rs).
    chunk: Vec<u8>,
    /// The wall clock for responses' `Date`, when the binary gives one (`set_wall_clock`).
    wall_clock: Option<WallClock>,
    pub log: EventLog,
    pub counters: Counters,
}

impl Stack<StaticFiles> {
    /// A stack serving the files under `config.root`.
    pub fn new(config: StackConfig, log: EventLog, iss_key: u64) -> Self {
        let app = StaticFiles::new(config.root.clone());
        Stack::with_app(config, app, log, iss_key)
    }
}

impl<A: Application> Stack<A> {
    /// A stack answering requests from `app` (`config.root` unused).
    pub fn with_app(config: StackConfig, app: A, log: EventLog, iss_key: u64) -> Self {
        Stack {
            interface: Interface::new(&config),
            tcp: TcpDemux::new(&config, iss_key),
            app,
            limits: Limits { header_timeout: config.header_timeout, idle_timeout: config.idle_timeout },
            ipv4_id: config.ipv4_id,
            chunk: Vec::new(),
            wall_clock: None,
            log,
            counters: Counters::default(),
        }
    }

    /// The UNIX time at a stack instant, for the `Date` of responses made from then on.
    pub fn set_wall_clock(&mut self, clock: WallClock) {
        self.wall_clock = Some(clock);
    }

    /// The SYN-cookie secret; leanweb sets one read from the OS at start.
    pub fn set_cookie_key(&mut self, key: [u8; 16]) {
        self.tcp.set_cookie_key(key);
    }

    /// The cookie counter's period (tests shorten it to see cookies expire).
    pub fn set_cookie_tick(&mut self, tick: Duration) {
        self.tcp.set_cookie_tick(tick);
    }

    pub fn link_local6(&self) -> Ipv6Addr {
        self.interface.link_local6
    }

    pub fn session_count(&self) -> usize {
        self.tcp.sessions.len()
    }

    /// Frames produced since the last call.
    pub fn take_output(&mut self) -> Vec<Vec<u8>> {
        self.take_frames().into_iter().map(|f| f.bytes).collect()
    }

    /// Frames produced since the last call, with the segments they carry.
    pub fn take_frames(&mut self) -> Vec<OutFrame> {
        std::mem::take(&mut self.interface.out)
    }

    /// Logs a segment when its frame was written to the device (`tx`), or when the write
    /// failed (`tx_dropped`: the connection counts it as sent, the wire never saw it).
    pub fn log_transmission(&mut self, t_us: u64, tx: &TxRecord, written: bool) {
        if self.log.enabled() {
            let line = TxLine::new(tx.conn, &tx.transmission, written, t_us, self.log.unix_us(t_us));
            self.log.write_line(&line);
        }
    }

    /// Gratuitous ARP and unsolicited neighbour advertisements for our addresses.
    pub fn announce(&mut self) {
        self.interface.announce(&mut self.counters);
    }

    /// The single receive path: one Ethernet frame from the TAP device.
    pub fn handle_frame(&mut self, bytes: &[u8], now: Instant) {
        self.counters.frames_in += 1;
        let Some((src_mac, ethertype, payload)) = self.interface.receive(bytes, &mut self.counters) else { return };
        let ok = match ethertype {
            EthernetProtocol::Arp => self.interface.handle_arp(payload, &mut self.counters),
            EthernetProtocol::Ipv4 => self.handle_ip(src_mac, payload, false, now),
            EthernetProtocol::Ipv6 => self.handle_ip(src_mac, payload, true, now),
            _ => {
                self.counters.not_for_us += 1;
                true
            }
        };
        if !ok {
            self.counters.malformed += 1;
        }
    }

    /// A TCP segment for us, from the IP layer.
    fn handle_segment(&mut self, seg: leantcp::Segment, now: Instant) {
        let mut out = Output { interface: &mut self.interface, counters: &mut self.counters, log: &mut self.log };
        self.tcp.handle_segment(seg, now, &mut out);
    }

    /// Application work and transmission for every connection; call after input and timers.
    pub fn poll(&mut self, now: Instant) {
        let keys: Vec<Key> = self.tcp.sessions.keys().copied().collect();
        for key in keys {
            let Some(mut session) = self.tcp.sessions.remove(&key) else { continue };
            let mut serving = Serving {
                app: &mut self.app,
                chunk: &mut self.chunk,
                wall_clock: self.wall_clock,
                counters: &mut self.counters,
                log: &mut self.log,
            };
            session.http.serve(session.id, &mut session.conn, &mut serving, now);
            while let Some(seg) = session.conn.poll_transmit(now) {
                let tx =
                    session.conn.last_transmission().map(|transmission| TxRecord { conn: session.id, transmission });
                let ipv4_id = match self.ipv4_id {
                    Ipv4Id::Zero => None,
                    Ipv4Id::PerConnection => {
                        session.next_ipv4_id = session.next_ipv4_id.wrapping_add(1);
                        Some(session.next_ipv4_id.wrapping_sub(1))
                    }
                };
                // unsent (next hop unknown): no frame, so nothing to log
                self.interface.send_segment(&seg, ipv4_id, tx, &mut self.counters);
            }
            events::log_events(&mut self.log, session.id, &mut session.conn, now);
            if session.conn.is_closed() {
                events::log_close(&mut self.log, session.id, &session.conn, now);
            } else {
                self.tcp.sessions.insert(key, session);
            }
        }
    }

    /// At exit: logs the pending events and a `close` record (with the state it was in) for
    /// every connection still open, so the log's per-connection totals are complete.
    pub fn log_open_connections(&mut self, now: Instant) {
        let mut sessions: Vec<_> = self.tcp.sessions.drain().map(|(_, s)| s).collect();
        sessions.sort_by_key(|s| s.id);
        for mut session in sessions {
            events::log_events(&mut self.log, session.id, &mut session.conn, now);
            events::log_close(&mut self.log, session.id, &session.conn, now);
        }
    }

    /// Earliest protocol timer of any connection.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.tcp.sessions.values().filter_map(|s| s.conn.poll_timeout()).min()
    }

    /// Fires due protocol timers and the slowloris/idle limits.
    pub fn handle_timeouts(&mut self, now: Instant) {
        let mut closed = 0;
        for s in self.tcp.sessions.values_mut() {
            if matches!(s.conn.poll_timeout(), Some(t) if t <= now) {
                s.conn.handle_timeout(now);
            }
            if s.http.enforce_limits(&mut s.conn, self.limits, s.last_rx, now) {
                closed += 1;
            }
        }
        self.counters.slow_or_idle_closed += closed;
    }
}

mod events;
mod http_session;
mod interface;
mod ip;
mod segment_lines;
mod tcp_demux;
#[cfg(test)]
pub(crate) mod test_fixture;
#[cfg(test)]
mod tests;
