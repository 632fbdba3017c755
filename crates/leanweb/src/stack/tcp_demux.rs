//! The transport layer's demux: a segment goes to its connection, or to the listener, which
//! makes connections from SYNs (a half-open entry, or a SYN cookie when the table is full —
//! RFC 4987 §3.6) and answers strays with a RST. It owns the connection table and the cookies.
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::time::Duration;

use leantcp::conn::reset_for;
use leantcp::{Connection, CookieError, Instant, Segment, Seq, State, SynCookies, TcpConfig};

use super::events;
use super::http_session::Exchange;
use super::interface::Interface;
use super::{Counters, StackConfig};
use crate::log::EventLog;

/// `auto`: only while the half-open table is full (and check cookie ACKs while any issued
/// cookie can still be valid); `always`: every SYN; `never`: a full table drops SYNs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SynCookieMode {
    #[default]
    Auto,
    Always,
    Never,
}

impl SynCookieMode {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "auto" => Some(SynCookieMode::Auto),
            "always" => Some(SynCookieMode::Always),
            "never" => Some(SynCookieMode::Never),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SynCookieMode::Auto => "auto",
            SynCookieMode::Always => "always",
            SynCookieMode::Never => "never",
        }
    }
}

/// One connection: its TCP state and the HTTP exchange on it (body type `B`).
pub(super) struct Session<B> {
    pub(super) id: u64,
    pub(super) conn: Connection,
    pub(super) http: Exchange<B>,
    pub(super) last_rx: Instant,
    /// IPv4 identification of this connection's next segment (`Ipv4Id::PerConnection`).
    pub(super) next_ipv4_id: u16,
}

/// (local, remote)
pub(super) type Key = (SocketAddr, SocketAddr);

/// What the demux sends and logs through: the interface below it, the counters and the log.
pub(super) struct Output<'a> {
    pub(super) interface: &'a mut Interface,
    pub(super) counters: &'a mut Counters,
    pub(super) log: &'a mut EventLog,
}

impl Output<'_> {
    /// A segment of no connection (RST, cookie SYN-ACK): IPv4 identification 0.
    fn send_segment(&mut self, seg: &Segment) {
        self.interface.send_segment(seg, None, None, self.counters);
    }

    /// Answers `seg` with a RST where RFC 793 allows one, and counts it.
    fn reset(&mut self, seg: &Segment) {
        if let Some(rst) = reset_for(seg) {
            self.counters.resets_sent += 1;
            self.send_segment(&rst);
        }
    }
}

pub(super) struct TcpDemux<B> {
    port: u16,
    tcp: TcpConfig,
    max_connections: usize,
    max_half_open: usize,
    mode: SynCookieMode,
    /// Boxed: `poll` takes each session out of the map and puts it back, once per turn; a
    /// box moves a pointer, not the connection's whole state (a memcpy per session per turn).
    pub(super) sessions: HashMap<Key, Box<Session<B>>>,
    iss_key: u64,
    next_id: u64,
    pub(super) cookies: SynCookies,
    /// When the last cookie was sent: in `auto` mode, ACKs are checked as cookies only
    /// while one can still be valid (as Linux's `tcp_synq_no_recent_overflow`).
    last_cookie_sent: Option<Instant>,
}

/// A cookie key from the ISN key, for stacks built without [`super::Stack::set_cookie_key`].
fn derived_cookie_key(iss_key: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    for (i, half) in key.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        ("syn-cookie", i, iss_key).hash(&mut h);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    key
}

impl<B> TcpDemux<B> {
    pub(super) fn new(config: &StackConfig, iss_key: u64) -> Self {
        TcpDemux {
            port: config.port,
            tcp: config.tcp,
            max_connections: config.max_connections,
            max_half_open: config.max_half_open,
            mode: config.syn_cookies,
            sessions: HashMap::new(),
            iss_key,
            next_id: 1,
            cookies: SynCookies::with_key(derived_cookie_key(iss_key)),
            last_cookie_sent: None,
        }
    }

    pub(super) fn set_cookie_key(&mut self, key: [u8; 16]) {
        self.cookies = SynCookies::new(key, self.cookies.tick());
    }

    pub(super) fn set_cookie_tick(&mut self, tick: Duration) {
        self.cookies = self.cookies.with_tick(tick);
    }

    fn iss_for(&self, seg: &Segment, now: Instant) -> Seq {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (self.iss_key, seg.src, seg.dst).hash(&mut hasher);
        // RFC 6528: a keyed hash plus a clock ticking every 4 µs.
        Seq((hasher.finish() as u32).wrapping_add((now.as_micros() / 4) as u32))
    }

    /// Where a connection's IPv4 identification starts (Linux: random per socket).
    fn first_ipv4_id(&self, key: &Key) -> u16 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        ("ipv4-id", self.iss_key, key).hash(&mut hasher);
        hasher.finish() as u16
    }

    /// The TCP settings of a connection the listener makes (IPv6's minimum MTU at least).
    fn listener_tcp(&self) -> TcpConfig {
        let mut tcp = self.tcp;
        tcp.mtu = tcp.mtu.max(1280);
        tcp
    }

    /// Whether an ACK reaching the listener without a connection may carry a cookie.
    fn checks_cookies(&self, now: Instant) -> bool {
        match self.mode {
            SynCookieMode::Always => true,
            SynCookieMode::Never => false,
            // A cookie lives at most two ticks; after that every such ACK is a stray (RST).
            SynCookieMode::Auto => {
                let lifetime = self.cookies.tick().saturating_mul(2);
                matches!(self.last_cookie_sent, Some(t) if now.saturating_since(t) <= lifetime)
            }
        }
    }

    /// A received segment: to its connection, or to the listener.
    pub(super) fn handle_segment(&mut self, seg: Segment, now: Instant, out: &mut Output<'_>) {
        let key = (seg.dst, seg.src);
        if let Some(session) = self.sessions.get_mut(&key) {
            if !(session.conn.state() == State::TimeWait && seg.syn && seg.ack.is_none()) {
                session.conn.handle_segment(&seg, now);
                session.last_rx = now;
                return;
            }
            // A new SYN on a TIME-WAIT pair starts a new connection (RFC 9293 §3.10.7.4).
            if let Some(old) = self.sessions.remove(&key) {
                events::log_close(out.log, old.id, &old.conn, now);
            }
        }
        let is_syn = seg.syn && seg.ack.is_none() && !seg.rst && !seg.fin;
        let to_listener = seg.dst.port() == self.port;
        if to_listener && !is_syn && self.checks_cookies(now) && seg.ack.is_some() && !seg.syn && !seg.rst {
            return self.accept_cookie(seg, now, out);
        }
        if !is_syn || !to_listener {
            out.reset(&seg);
            return;
        }
        let half_open = self.sessions.values().filter(|s| s.conn.state() == State::SynReceived).count();
        let table_full = half_open >= self.max_half_open;
        let use_cookie = match self.mode {
            SynCookieMode::Always => true,
            SynCookieMode::Auto => table_full,
            SynCookieMode::Never => false,
        };
        if table_full && !use_cookie {
            out.counters.syn_dropped_half_open_cap += 1;
            return; // SYN flood: drop silently, the client retries
        }
        if use_cookie && self.sessions.len() < self.max_connections {
            return self.send_cookie(&seg, now, out);
        }
        if self.sessions.len() >= self.max_connections {
            out.counters.syn_refused_connection_cap += 1;
            out.reset(&seg);
            return;
        }
        let Some(conn) = Connection::accept(&seg, self.listener_tcp(), self.iss_for(&seg, now)) else { return };
        let peer = events::Peer { mss: seg.mss, window_scale: seg.window_scale, syn_cookie: false };
        self.open(key, conn, peer, now, out);
    }

    /// Adds a new connection to the table and logs its `open`.
    fn open(&mut self, key: Key, conn: Connection, peer: events::Peer, now: Instant, out: &mut Output<'_>) {
        let id = self.next_id;
        self.next_id += 1;
        out.counters.connections_accepted += 1;
        events::log_open(out.log, id, key, peer, now);
        let next_ipv4_id = self.first_ipv4_id(&key);
        let session = Session { id, conn, http: Exchange::new(now), last_rx: now, next_ipv4_id };
        self.sessions.insert(key, Box::new(session));
    }

    /// Answers a SYN with a cookie SYN-ACK; nothing about the SYN is kept (RFC 4987 §3.6).
    fn send_cookie(&mut self, syn: &Segment, now: Instant, out: &mut Output<'_>) {
        let tcp = self.listener_tcp();
        let options = SynCookies::options_for(syn, tcp.sack, tcp.timestamps);
        let iss = self.cookies.make(syn, &options, now);
        if let Some(syn_ack) = Connection::cookie_syn_ack(syn, &options, tcp, iss, now) {
            out.counters.syn_cookies_sent += 1;
            self.last_cookie_sent = Some(now);
            out.send_segment(&syn_ack);
        }
    }

    /// An ACK for no connection while cookies are in use: a valid cookie makes the
    /// connection; anything else is dropped and counted.
    fn accept_cookie(&mut self, seg: Segment, now: Instant, out: &mut Output<'_>) {
        let options = match self.cookies.check(&seg, now) {
            Ok(options) => options,
            Err(CookieError::Stale) => {
                out.counters.syn_cookies_stale += 1;
                return;
            }
            Err(CookieError::Invalid) => {
                out.counters.syn_cookies_invalid += 1;
                return;
            }
        };
        if self.sessions.len() >= self.max_connections {
            out.counters.syn_cookies_refused_connection_cap += 1;
            out.reset(&seg);
            return;
        }
        let iss = Seq(seg.ack.map_or(0, |a| a.0.wrapping_sub(1)));
        let Some(conn) = Connection::accept_cookie(&seg, &options, self.listener_tcp(), iss, now) else {
            out.counters.syn_cookies_invalid += 1;
            return;
        };
        out.counters.syn_cookies_validated += 1;
        let peer = events::Peer { mss: Some(options.mss), window_scale: options.window_scale, syn_cookie: true };
        self.open((seg.dst, seg.src), conn, peer, now, out);
    }
}
