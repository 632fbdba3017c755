//! The lean stack: one receive path for Ethernet frames carrying ARP, IPv4 and IPv6
//! (ICMP/ICMPv6 echo, neighbour discovery, TCP), with HTTP intertwined per connection.
//! Sans-IO like leantcp: frames in, frames out, `now` passed in — so it can be fuzzed.
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use leantcp::conn::reset_for;
use leantcp::{CookieError, Connection, Event, Instant, Segment, Seq, State, SynCookies, TcpConfig, Transmission};
use serde_json::json;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr,
    Icmpv4Packet, Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet,
    Ipv6Repr, NdiscNeighborFlags, NdiscRepr, RawHardwareAddress,
};

use crate::http::{self, HttpError, Method, Parse, WallClock};
use crate::log::EventLog;
use crate::neighbors::Neighbors;
use segment_lines::{AckLine, RttSampleLine, TxLine};

const HOP_LIMIT: u8 = 64;
const NDP_HOP_LIMIT: u8 = 255;
const FILE_CHUNK_BYTES: usize = 64 * 1024;

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

/// IPv4 identification of TCP segments (all are sent with DF, so no receiver reads it).
/// `PerConnection` numbers them as Linux does for DF packets (a counter per socket from a
/// random start, +1 per packet) — which is also how the kernel's GSO numbers the segments
/// it cuts from one super-frame (id, id+1, …), so only then can a super-frame carry more
/// than one IPv4 segment (crates/leanweb/src/gso.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ipv4Id {
    /// Always 0 (smoltcp's default): the stack as issue 12 found it.
    #[default]
    Zero,
    PerConnection,
}

impl Ipv4Id {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "zero" => Some(Ipv4Id::Zero),
            "per-connection" => Some(Ipv4Id::PerConnection),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Ipv4Id::Zero => "zero",
            Ipv4Id::PerConnection => "per-connection",
        }
    }
}

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

struct Response {
    head: Vec<u8>,
    head_sent: usize,
    file: Option<File>,
    remaining: u64,
    close_after: bool,
}

struct Session {
    id: u64,
    conn: Connection,
    request_buf: Vec<u8>,
    response: Option<Response>,
    closing: bool,
    /// Since when we wait for (the rest of) a request.
    waiting_since: Instant,
    last_rx: Instant,
    /// IPv4 identification of this connection's next segment (`Ipv4Id::PerConnection`).
    next_ipv4_id: u16,
}

type Key = (SocketAddr, SocketAddr);

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

pub struct Stack {
    config: StackConfig,
    link_local6: Ipv6Addr,
    neighbors: Neighbors,
    /// Boxed: `poll` takes each session out of the map and puts it back, once per turn; a
    /// box moves a pointer, not the connection's whole state (a memcpy per session per turn).
    sessions: HashMap<Key, Box<Session>>,
    out: Vec<OutFrame>,
    /// The segment `send_segment` is emitting, attached to its frame.
    pending_tx: Option<TxRecord>,
    /// File bytes on their way into a connection's send buffer (`feed_response`).
    file_chunk: Vec<u8>,
    pub log: EventLog,
    pub counters: Counters,
    iss_key: u64,
    next_id: u64,
    cookies: SynCookies,
    /// When the last cookie was sent: in `auto` mode, ACKs are checked as cookies only
    /// while one can still be valid (as Linux's `tcp_synq_no_recent_overflow`).
    last_cookie_sent: Option<Instant>,
    /// The wall clock for responses' `Date`, when the binary gives one (`set_wall_clock`).
    wall_clock: Option<WallClock>,
}

fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00 | o[13] as u16, u16::from_be_bytes([o[14], o[15]]))
}

fn multicast_mac(addr: Ipv6Addr) -> EthernetAddress {
    let o = addr.octets();
    EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

fn link_local_from_mac(mac: EthernetAddress) -> Ipv6Addr {
    let m = mac.0;
    Ipv6Addr::from([0xfe, 0x80, 0, 0, 0, 0, 0, 0, m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
}

fn same_prefix(a: IpAddr, b: IpAddr, prefix4: u8, prefix6: u8) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = if prefix4 == 0 { 0 } else { u32::MAX << (32 - prefix4.min(32) as u32) };
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mask = if prefix6 == 0 { 0 } else { u128::MAX << (128 - prefix6.min(128) as u32) };
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

/// A cookie key from the ISN key, for stacks built without [`Stack::set_cookie_key`].
fn derived_cookie_key(iss_key: u64) -> [u8; 16] {
    use std::hash::{Hash, Hasher};
    let mut key = [0u8; 16];
    for (i, half) in key.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        ("syn-cookie", i, iss_key).hash(&mut h);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    key
}

fn family(addr: &SocketAddr) -> &'static str {
    if addr.is_ipv4() {
        "ipv4"
    } else {
        "ipv6"
    }
}

impl Stack {
    pub fn new(config: StackConfig, log: EventLog, iss_key: u64) -> Self {
        Stack {
            link_local6: link_local_from_mac(config.mac),
            config,
            neighbors: Neighbors::default(),
            sessions: HashMap::new(),
            out: Vec::new(),
            pending_tx: None,
            file_chunk: Vec::new(),
            log,
            counters: Counters::default(),
            iss_key,
            next_id: 1,
            cookies: SynCookies::with_key(derived_cookie_key(iss_key)),
            last_cookie_sent: None,
            wall_clock: None,
        }
    }

    /// The UNIX time at a stack instant, for the `Date` of responses made from then on.
    pub fn set_wall_clock(&mut self, clock: WallClock) {
        self.wall_clock = Some(clock);
    }

    /// The SYN-cookie secret; leanweb sets one read from the OS at start.
    pub fn set_cookie_key(&mut self, key: [u8; 16]) {
        self.cookies = SynCookies::new(key, self.cookies.tick());
    }

    /// The cookie counter's period (tests shorten it to see cookies expire).
    pub fn set_cookie_tick(&mut self, tick: Duration) {
        self.cookies = self.cookies.with_tick(tick);
    }

    pub fn link_local6(&self) -> Ipv6Addr {
        self.link_local6
    }

    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Frames produced since the last call.
    pub fn take_output(&mut self) -> Vec<Vec<u8>> {
        self.take_frames().into_iter().map(|f| f.bytes).collect()
    }

    /// Frames produced since the last call, with the segments they carry.
    pub fn take_frames(&mut self) -> Vec<OutFrame> {
        std::mem::take(&mut self.out)
    }

    /// Logs a segment when its frame was written to the device (`tx`), or when the write
    /// failed (`tx_dropped`: the connection counts it as sent, the wire never saw it).
    pub fn log_transmission(&mut self, t_us: u64, tx: &TxRecord, written: bool) {
        if self.log.enabled() {
            let line = TxLine::new(tx.conn, &tx.transmission, written, t_us, self.log.unix_us(t_us));
            self.log.write_line(&line);
        }
    }

    fn emit_frame(&mut self, dst: EthernetAddress, ethertype: EthernetProtocol, payload: &[u8]) {
        let repr = EthernetRepr { src_addr: self.config.mac, dst_addr: dst, ethertype };
        let mut buf = vec![0u8; repr.buffer_len() + payload.len()];
        let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
        repr.emit(&mut frame);
        frame.payload_mut().copy_from_slice(payload);
        self.out.push(OutFrame { bytes: buf, tx: self.pending_tx.take() });
        self.counters.frames_out += 1;
    }

    /// Sends a TCP segment, its IP packet written straight into the frame (one buffer per
    /// segment: this runs once per segment); `ipv4_id` replaces the IPv4 identification.
    fn send_segment_with_id(&mut self, seg: &Segment, ipv4_id: Option<u16>) {
        let dst = seg.dst.ip();
        let Some(mac) = self.next_hop_mac(dst) else { return };
        let repr = EthernetRepr { src_addr: self.config.mac, dst_addr: mac, ethertype: if dst.is_ipv4() { EthernetProtocol::Ipv4 } else { EthernetProtocol::Ipv6 } };
        let mut buf = vec![0u8; repr.buffer_len() + seg.ip_len()];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        if seg.emit_ip(&mut buf[repr.buffer_len()..], HOP_LIMIT).is_err() {
            return;
        }
        if let (Some(id), true) = (ipv4_id, dst.is_ipv4()) {
            let mut ip = Ipv4Packet::new_unchecked(&mut buf[repr.buffer_len()..]);
            ip.set_ident(id);
            ip.fill_checksum();
        }
        self.out.push(OutFrame { bytes: buf, tx: self.pending_tx.take() });
        self.counters.frames_out += 1;
    }

    /// The MAC of `dst`'s next hop; unknown: solicits it and gives none (the packet is
    /// dropped, TCP retransmits; the cache is nearly always warm from the request's frame).
    fn next_hop_mac(&mut self, dst: IpAddr) -> Option<EthernetAddress> {
        let on_link = same_prefix(dst, self.local_ip_for(dst), self.config.prefix4, self.config.prefix6)
            || matches!(dst, IpAddr::V6(a) if a.segments()[0] & 0xffc0 == 0xfe80);
        let gateway = match dst {
            IpAddr::V4(_) => self.config.gateway4.map(IpAddr::V4),
            IpAddr::V6(_) => self.config.gateway6.map(IpAddr::V6),
        };
        let next_hop = if on_link { dst } else { gateway.unwrap_or(dst) };
        let mac = self.neighbors.lookup(&next_hop).or_else(|| self.neighbors.lookup(&dst));
        if mac.is_none() {
            self.counters.unresolved_next_hop += 1;
            self.solicit(next_hop);
        }
        mac
    }

    /// Sends an IP packet, resolving the next hop; solicits and drops if it is unknown
    /// (TCP retransmits; the cache is nearly always warm from the request's own frame).
    fn send_ip(&mut self, dst: IpAddr, packet: &[u8]) {
        let ethertype = if dst.is_ipv4() { EthernetProtocol::Ipv4 } else { EthernetProtocol::Ipv6 };
        if let Some(mac) = self.next_hop_mac(dst) {
            self.emit_frame(mac, ethertype, packet);
        }
    }

    fn local_ip_for(&self, dst: IpAddr) -> IpAddr {
        match dst {
            IpAddr::V4(_) => IpAddr::V4(self.config.addr4),
            IpAddr::V6(_) => IpAddr::V6(self.config.addr6),
        }
    }

    /// Gratuitous ARP and unsolicited neighbour advertisements for our addresses, so peers
    /// that cached another MAC for them (a previous leanweb on the same addresses) update
    /// at once instead of after their neighbour entry goes stale.
    pub fn announce(&mut self) {
        let arp = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: self.config.mac,
            source_protocol_addr: self.config.addr4,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: self.config.addr4,
        };
        let mut buf = vec![0u8; arp.buffer_len()];
        arp.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
        self.emit_frame(EthernetAddress::BROADCAST, EthernetProtocol::Arp, &buf);
        let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        for target in [self.config.addr6, self.link_local6] {
            let advert = NdiscRepr::NeighborAdvert {
                flags: NdiscNeighborFlags::OVERRIDE,
                target_addr: target,
                lladdr: Some(RawHardwareAddress::from(self.config.mac)),
            };
            let packet = self.icmpv6_packet(target, all_nodes, &Icmpv6Repr::Ndisc(advert), NDP_HOP_LIMIT);
            self.emit_frame(multicast_mac(all_nodes), EthernetProtocol::Ipv6, &packet);
        }
    }

    fn solicit(&mut self, target: IpAddr) {
        match target {
            IpAddr::V4(target) => {
                let arp = ArpRepr::EthernetIpv4 {
                    operation: ArpOperation::Request,
                    source_hardware_addr: self.config.mac,
                    source_protocol_addr: self.config.addr4,
                    target_hardware_addr: EthernetAddress([0; 6]),
                    target_protocol_addr: target,
                };
                let mut buf = vec![0u8; arp.buffer_len()];
                arp.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
                self.emit_frame(EthernetAddress::BROADCAST, EthernetProtocol::Arp, &buf);
            }
            IpAddr::V6(target) => {
                let ndisc = NdiscRepr::NeighborSolicit { target_addr: target, lladdr: Some(RawHardwareAddress::from(self.config.mac)) };
                let dst = solicited_node(target);
                let src = if same_prefix(IpAddr::V6(target), IpAddr::V6(self.config.addr6), 0, self.config.prefix6) { self.config.addr6 } else { self.link_local6 };
                let packet = self.icmpv6_packet(src, dst, &Icmpv6Repr::Ndisc(ndisc), NDP_HOP_LIMIT);
                self.emit_frame(multicast_mac(dst), EthernetProtocol::Ipv6, &packet);
            }
        }
    }

    fn icmpv6_packet(&self, src: Ipv6Addr, dst: Ipv6Addr, icmp: &Icmpv6Repr, hop_limit: u8) -> Vec<u8> {
        let ip = Ipv6Repr { src_addr: src, dst_addr: dst, next_header: IpProtocol::Icmpv6, payload_len: icmp.buffer_len(), hop_limit };
        let mut buf = vec![0u8; ip.buffer_len() + icmp.buffer_len()];
        ip.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
        let mut packet = Icmpv6Packet::new_unchecked(&mut buf[ip.buffer_len()..]);
        icmp.emit(&src, &dst, &mut packet, &ChecksumCapabilities::default());
        buf
    }

    /// The single receive path: one Ethernet frame from the TAP device.
    pub fn handle_frame(&mut self, bytes: &[u8], now: Instant) {
        self.counters.frames_in += 1;
        let Ok(frame) = EthernetFrame::new_checked(bytes) else {
            self.counters.malformed += 1;
            return;
        };
        let dst = frame.dst_addr();
        if dst != self.config.mac && !dst.is_broadcast() && !dst.is_multicast() {
            self.counters.not_for_us += 1;
            return;
        }
        let src_mac = frame.src_addr();
        let ok = match frame.ethertype() {
            EthernetProtocol::Arp => self.handle_arp(frame.payload()),
            EthernetProtocol::Ipv4 => self.handle_ipv4(src_mac, frame.payload(), now),
            EthernetProtocol::Ipv6 => self.handle_ipv6(src_mac, frame.payload(), now),
            _ => {
                self.counters.not_for_us += 1;
                true
            }
        };
        if !ok {
            self.counters.malformed += 1;
        }
    }

    fn handle_arp(&mut self, payload: &[u8]) -> bool {
        let Ok(packet) = ArpPacket::new_checked(payload) else { return false };
        let Ok(ArpRepr::EthernetIpv4 { operation, source_hardware_addr, source_protocol_addr, target_protocol_addr, .. }) = ArpRepr::parse(&packet) else {
            return false;
        };
        if target_protocol_addr != self.config.addr4 {
            self.counters.not_for_us += 1;
            return true;
        }
        self.neighbors.learn(IpAddr::V4(source_protocol_addr), source_hardware_addr);
        if operation == ArpOperation::Request {
            let reply = ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Reply,
                source_hardware_addr: self.config.mac,
                source_protocol_addr: self.config.addr4,
                target_hardware_addr: source_hardware_addr,
                target_protocol_addr: source_protocol_addr,
            };
            let mut buf = vec![0u8; reply.buffer_len()];
            reply.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
            if source_hardware_addr.is_unicast() {
                self.emit_frame(source_hardware_addr, EthernetProtocol::Arp, &buf);
                self.counters.arp_replies += 1;
            }
        }
        true
    }

    fn handle_ipv4(&mut self, src_mac: EthernetAddress, payload: &[u8], now: Instant) -> bool {
        let caps = ChecksumCapabilities::default();
        let Ok(packet) = Ipv4Packet::new_checked(payload) else { return false };
        let Ok(ip) = Ipv4Repr::parse(&packet, &caps) else { return false };
        if ip.dst_addr != self.config.addr4 {
            self.counters.not_for_us += 1;
            return true;
        }
        self.neighbors.learn(IpAddr::V4(ip.src_addr), src_mac);
        match ip.next_header {
            IpProtocol::Icmp => {
                let Ok(icmp_packet) = Icmpv4Packet::new_checked(packet.payload()) else { return false };
                let Ok(icmp) = Icmpv4Repr::parse(&icmp_packet, &caps) else { return false };
                if let Icmpv4Repr::EchoRequest { ident, seq_no, data } = icmp {
                    let reply = Icmpv4Repr::EchoReply { ident, seq_no, data };
                    let ip_out = Ipv4Repr { src_addr: self.config.addr4, dst_addr: ip.src_addr, next_header: IpProtocol::Icmp, payload_len: reply.buffer_len(), hop_limit: HOP_LIMIT };
                    let mut buf = vec![0u8; ip_out.buffer_len() + reply.buffer_len()];
                    ip_out.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), &caps);
                    reply.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[ip_out.buffer_len()..]), &caps);
                    self.counters.echo_replies += 1;
                    self.send_ip(IpAddr::V4(ip.src_addr), &buf);
                }
                true
            }
            IpProtocol::Tcp => match Segment::parse_tcp(packet.payload(), IpAddr::V4(ip.src_addr), IpAddr::V4(ip.dst_addr)) {
                Ok(seg) => {
                    self.handle_segment(seg, now);
                    true
                }
                Err(_) => false,
            },
            _ => {
                self.counters.not_for_us += 1;
                true
            }
        }
    }

    fn is_our_v6(&self, addr: Ipv6Addr) -> bool {
        addr == self.config.addr6 || addr == self.link_local6
    }

    fn handle_ipv6(&mut self, src_mac: EthernetAddress, payload: &[u8], now: Instant) -> bool {
        let caps = ChecksumCapabilities::default();
        let Ok(packet) = Ipv6Packet::new_checked(payload) else { return false };
        let Ok(ip) = Ipv6Repr::parse(&packet) else { return false };
        let dst = ip.dst_addr;
        let for_us = self.is_our_v6(dst)
            || dst == solicited_node(self.config.addr6)
            || dst == solicited_node(self.link_local6)
            || dst == Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        if !for_us {
            self.counters.not_for_us += 1;
            return true;
        }
        let unicast_to_us = self.is_our_v6(dst);
        if !ip.src_addr.is_unspecified() && !ip.src_addr.is_multicast() {
            self.neighbors.learn(IpAddr::V6(ip.src_addr), src_mac);
        }
        match ip.next_header {
            IpProtocol::Icmpv6 => {
                let Ok(icmp_packet) = Icmpv6Packet::new_checked(packet.payload()) else { return false };
                let Ok(icmp) = Icmpv6Repr::parse(&ip.src_addr, &ip.dst_addr, &icmp_packet, &caps) else { return false };
                match icmp {
                    Icmpv6Repr::EchoRequest { ident, seq_no, data } if unicast_to_us => {
                        let reply = Icmpv6Repr::EchoReply { ident, seq_no, data };
                        let out = self.icmpv6_packet(dst, ip.src_addr, &reply, HOP_LIMIT);
                        self.counters.echo_replies += 1;
                        self.send_ip(IpAddr::V6(ip.src_addr), &out);
                    }
                    Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr, lladdr }) if self.is_our_v6(target_addr) => {
                        if ip.hop_limit != NDP_HOP_LIMIT {
                            return false;
                        }
                        let solicitor_mac = lladdr.and_then(|l| (l.len() == 6).then(|| EthernetAddress::from_bytes(l.as_bytes())));
                        let (reply_dst, dst_mac, flags) = if ip.src_addr.is_unspecified() {
                            // Duplicate address detection by someone else: defend our address.
                            let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
                            (all, multicast_mac(all), NdiscNeighborFlags::OVERRIDE)
                        } else {
                            let mac = solicitor_mac.unwrap_or(src_mac);
                            self.neighbors.learn(IpAddr::V6(ip.src_addr), mac);
                            (ip.src_addr, mac, NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE)
                        };
                        let advert = NdiscRepr::NeighborAdvert { flags, target_addr, lladdr: Some(RawHardwareAddress::from(self.config.mac)) };
                        let out = self.icmpv6_packet(target_addr, reply_dst, &Icmpv6Repr::Ndisc(advert), NDP_HOP_LIMIT);
                        self.emit_frame(dst_mac, EthernetProtocol::Ipv6, &out);
                        self.counters.neighbor_adverts += 1;
                    }
                    Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { target_addr, lladdr: Some(lladdr), .. }) if lladdr.len() == 6 => {
                        self.neighbors.learn(IpAddr::V6(target_addr), EthernetAddress::from_bytes(lladdr.as_bytes()));
                    }
                    _ => {}
                }
                true
            }
            IpProtocol::Tcp if unicast_to_us => {
                match Segment::parse_tcp(packet.payload(), IpAddr::V6(ip.src_addr), IpAddr::V6(dst)) {
                    Ok(seg) => {
                        self.handle_segment(seg, now);
                        true
                    }
                    Err(_) => false,
                }
            }
            _ => {
                self.counters.not_for_us += 1;
                true
            }
        }
    }

    fn iss_for(&self, seg: &Segment, now: Instant) -> Seq {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (self.iss_key, seg.src, seg.dst).hash(&mut hasher);
        // RFC 6528: a keyed hash plus a clock ticking every 4 µs.
        Seq((hasher.finish() as u32).wrapping_add((now.as_micros() / 4) as u32))
    }

    /// A segment of no connection (RST, cookie SYN-ACK): IPv4 identification 0.
    fn send_segment(&mut self, seg: &Segment) {
        self.send_segment_with_id(seg, None);
    }

    /// Where a connection's IPv4 identification starts (Linux: random per socket).
    fn first_ipv4_id(&self, key: &Key) -> u16 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        ("ipv4-id", self.iss_key, key).hash(&mut hasher);
        hasher.finish() as u16
    }

    fn handle_segment(&mut self, seg: Segment, now: Instant) {
        let key = (seg.dst, seg.src);
        if let Some(session) = self.sessions.get_mut(&key) {
            if !(session.conn.state() == State::TimeWait && seg.syn && seg.ack.is_none()) {
                session.conn.handle_segment(&seg, now);
                session.last_rx = now;
                return;
            }
            // A new SYN on a TIME-WAIT pair starts a new connection (RFC 9293 §3.10.7.4).
            if let Some(old) = self.sessions.remove(&key) {
                self.log_close(&old, now);
            }
        }
        let is_syn = seg.syn && seg.ack.is_none() && !seg.rst && !seg.fin;
        let to_listener = seg.dst.port() == self.config.port;
        if to_listener && !is_syn && self.checks_cookies(now) && seg.ack.is_some() && !seg.syn && !seg.rst {
            return self.accept_cookie(seg, now);
        }
        if !is_syn || !to_listener {
            self.reset(&seg);
            return;
        }
        let half_open = self.sessions.values().filter(|s| s.conn.state() == State::SynReceived).count();
        let table_full = half_open >= self.config.max_half_open;
        let use_cookie = match self.config.syn_cookies {
            SynCookieMode::Always => true,
            SynCookieMode::Auto => table_full,
            SynCookieMode::Never => false,
        };
        if table_full && !use_cookie {
            self.counters.syn_dropped_half_open_cap += 1;
            return; // SYN flood: drop silently, the client retries
        }
        if use_cookie && self.sessions.len() < self.config.max_connections {
            return self.send_cookie(&seg, now);
        }
        if self.sessions.len() >= self.config.max_connections {
            self.counters.syn_refused_connection_cap += 1;
            self.reset(&seg);
            return;
        }
        let tcp = self.listener_tcp();
        let Some(conn) = Connection::accept(&seg, tcp, self.iss_for(&seg, now)) else { return };
        let id = self.next_id;
        self.next_id += 1;
        self.counters.connections_accepted += 1;
        self.log.write(now.as_micros(), "open", json!({"conn": id, "peer": seg.src.to_string(), "local": seg.dst.to_string(), "family": family(&seg.src), "peer_mss": seg.mss, "peer_window_scale": seg.window_scale}));
        let next_ipv4_id = self.first_ipv4_id(&key);
        self.sessions.insert(key, Box::new(Session { id, conn, request_buf: Vec::new(), response: None, closing: false, waiting_since: now, last_rx: now, next_ipv4_id }));
    }

    /// The TCP settings of a connection the listener makes (IPv6's minimum MTU at least).
    fn listener_tcp(&self) -> TcpConfig {
        let mut tcp = self.config.tcp;
        tcp.mtu = tcp.mtu.max(1280);
        tcp
    }

    /// Answers `seg` with a RST where RFC 793 allows one, and counts it.
    fn reset(&mut self, seg: &Segment) {
        if let Some(rst) = reset_for(seg) {
            self.counters.resets_sent += 1;
            self.send_segment(&rst);
        }
    }

    /// Whether an ACK reaching the listener without a connection may carry a cookie.
    fn checks_cookies(&self, now: Instant) -> bool {
        match self.config.syn_cookies {
            SynCookieMode::Always => true,
            SynCookieMode::Never => false,
            // A cookie lives at most two ticks; after that every such ACK is a stray (RST).
            SynCookieMode::Auto => matches!(self.last_cookie_sent, Some(t) if now.saturating_since(t) <= self.cookies.tick().saturating_mul(2)),
        }
    }

    /// Answers a SYN with a cookie SYN-ACK; nothing about the SYN is kept (RFC 4987 §3.6).
    fn send_cookie(&mut self, syn: &Segment, now: Instant) {
        let tcp = self.listener_tcp();
        let options = SynCookies::options_for(syn, tcp.sack, tcp.timestamps);
        let iss = self.cookies.make(syn, &options, now);
        if let Some(syn_ack) = Connection::cookie_syn_ack(syn, &options, tcp, iss, now) {
            self.counters.syn_cookies_sent += 1;
            self.last_cookie_sent = Some(now);
            self.send_segment(&syn_ack);
        }
    }

    /// An ACK for no connection while cookies are in use: a valid cookie makes the
    /// connection; anything else is dropped and counted.
    fn accept_cookie(&mut self, seg: Segment, now: Instant) {
        let options = match self.cookies.check(&seg, now) {
            Ok(options) => options,
            Err(CookieError::Stale) => {
                self.counters.syn_cookies_stale += 1;
                return;
            }
            Err(CookieError::Invalid) => {
                self.counters.syn_cookies_invalid += 1;
                return;
            }
        };
        if self.sessions.len() >= self.config.max_connections {
            self.counters.syn_cookies_refused_connection_cap += 1;
            self.reset(&seg);
            return;
        }
        let tcp = self.listener_tcp();
        let iss = Seq(seg.ack.map_or(0, |a| a.0.wrapping_sub(1)));
        let Some(conn) = Connection::accept_cookie(&seg, &options, tcp, iss, now) else {
            self.counters.syn_cookies_invalid += 1;
            return;
        };
        self.counters.syn_cookies_validated += 1;
        let id = self.next_id;
        self.next_id += 1;
        self.counters.connections_accepted += 1;
        self.log.write(now.as_micros(), "open", json!({"conn": id, "peer": seg.src.to_string(), "local": seg.dst.to_string(), "family": family(&seg.src), "peer_mss": options.mss, "peer_window_scale": options.window_scale, "syn_cookie": true}));
        let key = (seg.dst, seg.src);
        let next_ipv4_id = self.first_ipv4_id(&key);
        self.sessions.insert(key, Box::new(Session { id, conn, request_buf: Vec::new(), response: None, closing: false, waiting_since: now, last_rx: now, next_ipv4_id }));
    }

    fn log_close(&mut self, session: &Session, now: Instant) {
        let s = session.conn.stats();
        self.log.write(
            now.as_micros(),
            "close",
            json!({"conn": session.id, "peer": session.conn.remote().to_string(), "state": session.conn.state().name(),
                   "bytes_sent": s.bytes_sent, "bytes_acked": s.bytes_acked, "bytes_retransmitted": s.bytes_retransmitted,
                   "bytes_received": s.bytes_received, "segments_sent": s.segments_sent, "segments_received": s.segments_received,
                   "retransmissions": s.retransmissions, "timeouts": s.timeouts, "rtt_samples": s.rtt_samples,
                   "duplicate_acks": s.duplicate_acks, "events_dropped": s.events_dropped,
                   "timestamp_rtt_samples": s.timestamp_rtt_samples, "recoveries": s.recoveries,
                   "tail_loss_probes": s.tail_loss_probes, "rack_marked_lost": s.rack_marked_lost,
                   "out_of_order_segments": s.out_of_order_segments, "sack": session.conn.sack_in_use(),
                   "timestamps": session.conn.timestamps_in_use(), "recovery": session.conn.recovery_name(),
                   "send_buffer_bytes": session.conn.send_buffer_bytes()}),
        );
    }

    /// Application work and transmission for every connection; call after input and timers.
    pub fn poll(&mut self, now: Instant) {
        let keys: Vec<Key> = self.sessions.keys().copied().collect();
        for key in keys {
            let Some(mut session) = self.sessions.remove(&key) else { continue };
            self.serve(&mut session, now);
            while let Some(seg) = session.conn.poll_transmit(now) {
                let transmission = session.conn.last_transmission();
                self.pending_tx = transmission.map(|transmission| TxRecord { conn: session.id, transmission });
                let ipv4_id = match self.config.ipv4_id {
                    Ipv4Id::Zero => None,
                    Ipv4Id::PerConnection => {
                        session.next_ipv4_id = session.next_ipv4_id.wrapping_add(1);
                        Some(session.next_ipv4_id.wrapping_sub(1))
                    }
                };
                self.send_segment_with_id(&seg, ipv4_id);
                self.pending_tx = None; // unsent (next hop unknown): nothing to log
            }
            self.log_events(&mut session, now);
            if session.conn.is_closed() {
                self.log_close(&session, now);
            } else {
                self.sessions.insert(key, session);
            }
        }
    }

    fn log_events(&mut self, session: &mut Session, now: Instant) {
        if !self.log.enabled() {
            while session.conn.poll_event().is_some() {}
            return;
        }
        let t = now.as_micros();
        let id = session.id;
        while let Some(event) = session.conn.poll_event() {
            match event {
                Event::RttSample { rtt_us, srtt_us, rttvar_us, rto_us } => {
                    let line = RttSampleLine { conn: id, event: "rtt_sample", rto_us, rtt_us, rttvar_us, srtt_us, t_us: t, unix_us: self.log.unix_us(t) };
                    self.log.write_line(&line)
                }
                Event::Timeout { rto_us, backoff_shift, outstanding_bytes } => self.log.write(t, "timeout", json!({"conn": id, "rto_us": rto_us, "backoff_shift": backoff_shift, "outstanding_bytes": outstanding_bytes})),
                // Logged as `tx` when the frame is written, not when the segment is made.
                Event::Retransmit { .. } => {}
                Event::NewAck { ack, at, cwnd_bytes } => {
                    let line = AckLine { ack, at_us: at.as_micros(), conn: id, cwnd_bytes, event: "ack", t_us: t, unix_us: self.log.unix_us(t) };
                    self.log.write_line(&line)
                }
                Event::Recovery { entered, cwnd_bytes, ssthresh_bytes } => self.log.write(t, "recovery", json!({"conn": id, "entered": entered, "cwnd_bytes": cwnd_bytes, "ssthresh_bytes": ssthresh_bytes})),
                Event::CcPhase { phase, cwnd_bytes, ssthresh_bytes } => self.log.write(t, "cc_phase", json!({"conn": id, "phase": phase, "cwnd_bytes": cwnd_bytes, "ssthresh_bytes": ssthresh_bytes})),
                Event::TailLossProbe { seq, retransmission } => self.log.write(t, "tail_loss_probe", json!({"conn": id, "seq": seq, "retransmission": retransmission})),
                Event::ZeroWindowProbe { seq } => self.log.write(t, "zero_window_probe", json!({"conn": id, "seq": seq})),
                Event::StateChanged { from, to } => self.log.write(t, "state", json!({"conn": id, "from": from.name(), "to": to.name()})),
                Event::ResetReceived => self.log.write(t, "reset_received", json!({"conn": id})),
                Event::Aborted { reason } => self.log.write(t, "aborted", json!({"conn": id, "reason": reason})),
            }
        }
    }

    fn serve(&mut self, s: &mut Session, now: Instant) {
        for _ in 0..64 {
            if s.closing {
                break;
            }
            Self::fill_request_buf(s, now);
            if s.response.is_none() && !self.start_response(s, now) {
                break;
            }
            if !Self::feed_response(s, &mut self.file_chunk, now) {
                break;
            }
            if let Some(r) = &s.response {
                if r.head_sent == r.head.len() && r.remaining == 0 {
                    let close_after = r.close_after;
                    s.response = None;
                    s.waiting_since = now;
                    if close_after {
                        s.conn.close(now);
                        s.closing = true;
                    }
                    continue;
                }
            }
            break;
        }
        if !s.closing && s.response.is_none() && s.request_buf.is_empty() && s.conn.peer_finished() {
            s.conn.close(now);
            s.closing = true;
        }
    }

    /// Moves received bytes into the request buffer, never more than one maximal head (the
    /// parser answers 414/431 beyond it); the rest waits in the TCP receive buffer, so
    /// pipelined requests are flow-controlled, never cut.
    fn fill_request_buf(s: &mut Session, now: Instant) {
        let room = (http::MAX_HEAD_BYTES + 1).saturating_sub(s.request_buf.len());
        let incoming = s.conn.recv(room);
        if !incoming.is_empty() {
            if s.request_buf.is_empty() && s.response.is_none() {
                s.waiting_since = now;
            }
            s.request_buf.extend_from_slice(&incoming);
        }
    }

    /// Parses the next request if one is complete; false if there is nothing to answer yet.
    fn start_response(&mut self, s: &mut Session, now: Instant) -> bool {
        if !matches!(s.conn.state(), State::Established | State::CloseWait) {
            return false;
        }
        let date = self.wall_clock.map(|clock| clock.date_at(now));
        let date = date.as_deref();
        let (response, log_fields) = match http::parse_request(&s.request_buf) {
            Parse::Incomplete => return false,
            Parse::Error(error) => {
                s.request_buf.clear();
                let head = http::error_response(error, false, date);
                (Response { head, head_sent: 0, file: None, remaining: 0, close_after: true }, json!({"status": error.status().0}))
            }
            Parse::Complete { request, consumed } => {
                s.request_buf.drain(..consumed);
                let head_only = request.method == Method::Head;
                let opened = http::resolve(&self.config.root, &request.path).and_then(|path| {
                    let file = File::open(&path).map_err(|_| HttpError::NotFound)?;
                    let len = file.metadata().map_err(|_| HttpError::NotFound)?.len();
                    Ok((path, file, len))
                });
                let method = if head_only { "HEAD" } else { "GET" };
                match opened {
                    Ok((path, file, len)) => {
                        let head = http::response_head((200, "OK"), len, http::content_type(&path), request.keep_alive, date, "");
                        let (file, remaining) = if head_only { (None, 0) } else { (Some(file), len) };
                        (Response { head, head_sent: 0, file, remaining, close_after: !request.keep_alive }, json!({"status": 200, "method": method, "path": request.path, "bytes": len}))
                    }
                    Err(error) => {
                        let head = http::error_response(error, head_only, date);
                        (Response { head, head_sent: 0, file: None, remaining: 0, close_after: true }, json!({"status": error.status().0, "method": method, "path": request.path}))
                    }
                }
            }
        };
        self.counters.requests += 1;
        let mut fields = log_fields;
        fields["conn"] = s.id.into();
        self.log.write(now.as_micros(), "request", fields);
        s.response = Some(response);
        true
    }

    /// Moves response bytes into the connection's send buffer; false if it made no progress.
    fn feed_response(s: &mut Session, chunk: &mut Vec<u8>, now: Instant) -> bool {
        let Some(r) = s.response.as_mut() else { return false };
        let mut progressed = false;
        if r.head_sent < r.head.len() {
            let n = s.conn.send(&r.head[r.head_sent..]);
            r.head_sent += n;
            progressed |= n > 0;
            if r.head_sent < r.head.len() {
                return progressed;
            }
        }
        while r.remaining > 0 {
            let room = s.conn.send_capacity().min(FILE_CHUNK_BYTES).min(r.remaining as usize);
            if room == 0 {
                break;
            }
            // The stack's one buffer, grown once, not 64 KiB allocated and freed per call.
            if chunk.len() < room {
                chunk.resize(room, 0);
            }
            let Some(file) = r.file.as_mut() else { break };
            match file.read(&mut chunk[..room]) {
                Ok(0) | Err(_) => {
                    // The file shrank or failed under us: the promised length cannot be kept.
                    r.remaining = 0;
                    s.conn.abort(now);
                    return true;
                }
                Ok(n) => {
                    let taken = s.conn.send(&chunk[..n]);
                    debug_assert_eq!(taken, n);
                    r.remaining -= n as u64;
                    progressed = true;
                }
            }
        }
        progressed || (r.head_sent == r.head.len() && r.remaining == 0)
    }

    /// At exit: logs the pending events and a `close` record (with the state it was in) for
    /// every connection still open, so the log's per-connection totals are complete.
    pub fn log_open_connections(&mut self, now: Instant) {
        let mut sessions: Vec<Box<Session>> = self.sessions.drain().map(|(_, s)| s).collect();
        sessions.sort_by_key(|s| s.id);
        for mut session in sessions {
            self.log_events(&mut session, now);
            self.log_close(&session, now);
        }
    }

    /// Earliest protocol timer of any connection.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.sessions.values().filter_map(|s| s.conn.poll_timeout()).min()
    }

    /// Fires due protocol timers and the slowloris/idle limits.
    pub fn handle_timeouts(&mut self, now: Instant) {
        let header_timeout = self.config.header_timeout;
        let idle_timeout = self.config.idle_timeout;
        let mut closed = 0;
        for s in self.sessions.values_mut() {
            if matches!(s.conn.poll_timeout(), Some(t) if t <= now) {
                s.conn.handle_timeout(now);
            }
            let waited = now.saturating_since(s.waiting_since);
            let silent = now.saturating_since(s.last_rx);
            let stuck_in_handshake = s.conn.state() == State::SynReceived && silent > header_timeout;
            if s.response.is_none() && !s.closing {
                if !s.request_buf.is_empty() && waited > header_timeout || stuck_in_handshake {
                    s.conn.abort(now);
                    closed += 1;
                } else if s.request_buf.is_empty() && waited > idle_timeout {
                    s.conn.close(now);
                    s.closing = true;
                    closed += 1;
                }
            } else if silent > idle_timeout.saturating_mul(2) && s.conn.state() != State::TimeWait {
                // Peer vanished mid-response or while we close: free the state.
                s.conn.abort(now);
                closed += 1;
            }
        }
        self.counters.slow_or_idle_closed += closed;
    }
}

mod segment_lines;
#[cfg(test)]
pub(crate) mod test_fixture;
#[cfg(test)]
mod tests;
