//! The network layer: one receive path for IPv4 and IPv6. Each version's header is parsed
//! into the same `IpHeader` (smoltcp's Packet/Repr), then one dispatch serves both: ICMP
//! echo, neighbour discovery (to the interface), TCP (to the demux).
use std::net::IpAddr;

use leantcp::{Instant, Segment};
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, Icmpv4Packet, Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet,
    Ipv6Repr, IPV6_HEADER_LEN,
};

use super::interface::{icmpv6_packet, Destination, HOP_LIMIT};
use super::{Application, Stack};

/// IPv4 identification of TCP segments (all are sent with DF, so no receiver reads it).
/// `PerConnection` numbers them as Linux does for DF packets (a counter per socket from a
/// random start, +1 per packet) — which is also how the kernel's GSO numbers the segments
/// it cuts from one super-frame (id, id+1, …), so only then can a super-frame carry more
/// than one IPv4 segment (crates/leanweb/src/gso.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ipv4Id {
    /// Always 0 (smoltcp's default): the original `bare` stack's wire.
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

/// What the dispatch needs of an IPv4 or IPv6 header.
struct IpHeader {
    src: IpAddr,
    dst: IpAddr,
    /// IPv4's protocol or IPv6's next header.
    protocol: IpProtocol,
    hop_limit: u8,
}

/// The header and payload of a checked IPv4 or IPv6 packet; none if malformed.
fn parse(payload: &[u8], v6: bool) -> Option<(IpHeader, &[u8])> {
    if v6 {
        let packet = Ipv6Packet::new_checked(payload).ok()?;
        let ip = Ipv6Repr::parse(&packet).ok()?;
        let header = IpHeader {
            src: IpAddr::V6(ip.src_addr),
            dst: IpAddr::V6(ip.dst_addr),
            protocol: ip.next_header,
            hop_limit: ip.hop_limit,
        };
        Some((header, &payload[IPV6_HEADER_LEN..IPV6_HEADER_LEN + ip.payload_len]))
    } else {
        let packet = Ipv4Packet::new_checked(payload).ok()?;
        let ip = Ipv4Repr::parse(&packet, &ChecksumCapabilities::default()).ok()?;
        let header = IpHeader {
            src: IpAddr::V4(ip.src_addr),
            dst: IpAddr::V4(ip.dst_addr),
            protocol: ip.next_header,
            hop_limit: ip.hop_limit,
        };
        let body_start = packet.header_len() as usize;
        Some((header, &payload[body_start..body_start + ip.payload_len]))
    }
}

/// An echo reply to `request` from `src` (our address) to `dst`, as an IP packet.
fn echo_reply(src: IpAddr, dst: IpAddr, ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
    let caps = ChecksumCapabilities::default();
    match (src, dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            let reply = Icmpv4Repr::EchoReply { ident, seq_no, data };
            let payload_len = reply.buffer_len();
            let ip = Ipv4Repr {
                src_addr: src,
                dst_addr: dst,
                next_header: IpProtocol::Icmp,
                payload_len,
                hop_limit: HOP_LIMIT,
            };
            let mut buf = vec![0u8; ip.buffer_len() + reply.buffer_len()];
            ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), &caps);
            reply.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[ip.buffer_len()..]), &caps);
            buf
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            icmpv6_packet(src, dst, &Icmpv6Repr::EchoReply { ident, seq_no, data }, HOP_LIMIT)
        }
        _ => unreachable!("a reply's addresses are of the request's family"),
    }
}

impl<A: Application> Stack<A> {
    /// An IPv4 or IPv6 packet from the frame sent by `src_mac`; false if malformed.
    pub(super) fn handle_ip(&mut self, src_mac: EthernetAddress, payload: &[u8], v6: bool, now: Instant) -> bool {
        let Some((ip, body)) = parse(payload, v6) else { return false };
        let Some(destination) = self.interface.destination(ip.dst) else {
            self.counters.not_for_us += 1;
            return true;
        };
        self.interface.learn(ip.src, src_mac);
        let unicast = destination == Destination::Unicast;
        match ip.protocol {
            IpProtocol::Icmp if !v6 => self.handle_icmp(&ip, body, unicast, src_mac),
            IpProtocol::Icmpv6 if v6 => self.handle_icmp(&ip, body, unicast, src_mac),
            IpProtocol::Tcp if unicast => match Segment::parse_tcp(body, ip.src, ip.dst) {
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

    /// ICMP (v4) or ICMPv6: echo requests to our unicast addresses are answered, neighbour
    /// discovery goes to the interface. False if malformed.
    fn handle_icmp(&mut self, ip: &IpHeader, body: &[u8], unicast: bool, src_mac: EthernetAddress) -> bool {
        let caps = ChecksumCapabilities::default();
        let (ident, seq_no, data) = match (ip.src, ip.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => {
                let Ok(packet) = Icmpv4Packet::new_checked(body) else { return false };
                let Ok(icmp) = Icmpv4Repr::parse(&packet, &caps) else { return false };
                match icmp {
                    Icmpv4Repr::EchoRequest { ident, seq_no, data } if unicast => (ident, seq_no, data),
                    _ => return true,
                }
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let Ok(packet) = Icmpv6Packet::new_checked(body) else { return false };
                let Ok(icmp) = Icmpv6Repr::parse(&src, &dst, &packet, &caps) else { return false };
                match icmp {
                    Icmpv6Repr::EchoRequest { ident, seq_no, data } if unicast => (ident, seq_no, data),
                    Icmpv6Repr::Ndisc(ndisc) => {
                        return self.interface.handle_ndisc(src, ip.hop_limit, src_mac, ndisc, &mut self.counters)
                    }
                    _ => return true,
                }
            }
            _ => return false,
        };
        let reply = echo_reply(ip.dst, ip.src, ident, seq_no, data);
        self.counters.echo_replies += 1;
        self.interface.send_ip(ip.src, &reply, &mut self.counters);
        true
    }
}
