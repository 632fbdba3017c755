//! The link layer: Ethernet frames in and out, ARP and NDP, and the next hop's MAC. It owns
//! our MAC and addresses, the neighbour cache and the frames produced for the TAP device.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use leantcp::Segment;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, Icmpv6Packet,
    Icmpv6Repr, IpProtocol, Ipv4Packet, Ipv6Packet, Ipv6Repr, NdiscNeighborFlags, NdiscRepr, RawHardwareAddress,
};

use super::{Counters, OutFrame, StackConfig, TxRecord};
use crate::neighbors::Neighbors;

pub(super) const HOP_LIMIT: u8 = 64;
const NDP_HOP_LIMIT: u8 = 255;
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

pub(super) struct Interface {
    mac: EthernetAddress,
    pub(super) addr4: Ipv4Addr,
    prefix4: u8,
    pub(super) addr6: Ipv6Addr,
    prefix6: u8,
    gateway4: Option<Ipv4Addr>,
    gateway6: Option<Ipv6Addr>,
    pub(super) link_local6: Ipv6Addr,
    neighbors: Neighbors,
    pub(super) out: Vec<OutFrame>,
}

/// Where an IP packet's destination puts it for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Destination {
    /// One of our addresses.
    Unicast,
    /// A multicast group we listen to (all nodes, our solicited-node groups).
    Group,
}

pub(super) fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00 | o[13] as u16, u16::from_be_bytes([o[14], o[15]]))
}

pub(super) fn multicast_mac(addr: Ipv6Addr) -> EthernetAddress {
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

fn ethertype_of(dst: IpAddr) -> EthernetProtocol {
    if dst.is_ipv4() {
        EthernetProtocol::Ipv4
    } else {
        EthernetProtocol::Ipv6
    }
}

/// An ICMPv6 message in its IPv6 packet.
pub(super) fn icmpv6_packet(src: Ipv6Addr, dst: Ipv6Addr, icmp: &Icmpv6Repr, hop_limit: u8) -> Vec<u8> {
    let payload_len = icmp.buffer_len();
    let ip = Ipv6Repr { src_addr: src, dst_addr: dst, next_header: IpProtocol::Icmpv6, payload_len, hop_limit };
    let mut buf = vec![0u8; ip.buffer_len() + icmp.buffer_len()];
    ip.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
    let mut packet = Icmpv6Packet::new_unchecked(&mut buf[ip.buffer_len()..]);
    icmp.emit(&src, &dst, &mut packet, &ChecksumCapabilities::default());
    buf
}

impl Interface {
    pub(super) fn new(config: &StackConfig) -> Self {
        Interface {
            mac: config.mac,
            addr4: config.addr4,
            prefix4: config.prefix4,
            addr6: config.addr6,
            prefix6: config.prefix6,
            gateway4: config.gateway4,
            gateway6: config.gateway6,
            link_local6: link_local_from_mac(config.mac),
            neighbors: Neighbors::default(),
            out: Vec::new(),
        }
    }

    /// The Ethernet frame's payload and sender if the frame is for us (our MAC, broadcast or
    /// multicast); malformed and foreign frames are counted and give none.
    pub(super) fn receive<'a>(
        &self,
        bytes: &'a [u8],
        counters: &mut Counters,
    ) -> Option<(EthernetAddress, EthernetProtocol, &'a [u8])> {
        let Ok(frame) = EthernetFrame::new_checked(bytes) else {
            counters.malformed += 1;
            return None;
        };
        let dst = frame.dst_addr();
        if dst != self.mac && !dst.is_broadcast() && !dst.is_multicast() {
            counters.not_for_us += 1;
            return None;
        }
        let header_len = bytes.len() - frame.payload().len();
        Some((frame.src_addr(), frame.ethertype(), &bytes[header_len..]))
    }

    /// Whether an IP packet to `dst` is ours to read.
    pub(super) fn destination(&self, dst: IpAddr) -> Option<Destination> {
        match dst {
            IpAddr::V4(dst) => (dst == self.addr4).then_some(Destination::Unicast),
            IpAddr::V6(dst) if self.is_our_v6(dst) => Some(Destination::Unicast),
            IpAddr::V6(dst) => {
                let group =
                    dst == solicited_node(self.addr6) || dst == solicited_node(self.link_local6) || dst == ALL_NODES;
                group.then_some(Destination::Group)
            }
        }
    }

    fn is_our_v6(&self, addr: Ipv6Addr) -> bool {
        addr == self.addr6 || addr == self.link_local6
    }

    /// Our address of `dst`'s family.
    pub(super) fn local_ip_for(&self, dst: IpAddr) -> IpAddr {
        match dst {
            IpAddr::V4(_) => IpAddr::V4(self.addr4),
            IpAddr::V6(_) => IpAddr::V6(self.addr6),
        }
    }

    /// A reply goes back to the MAC its request came from (as the bare stack did).
    pub(super) fn learn(&mut self, ip: IpAddr, mac: EthernetAddress) {
        self.neighbors.learn(ip, mac);
    }

    fn emit_frame(
        &mut self,
        dst: EthernetAddress,
        ethertype: EthernetProtocol,
        payload: &[u8],
        counters: &mut Counters,
    ) {
        let repr = EthernetRepr { src_addr: self.mac, dst_addr: dst, ethertype };
        let mut buf = vec![0u8; repr.buffer_len() + payload.len()];
        let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
        repr.emit(&mut frame);
        frame.payload_mut().copy_from_slice(payload);
        self.out.push(OutFrame { bytes: buf, tx: None });
        counters.frames_out += 1;
    }

    /// Sends a TCP segment, its IP packet written straight into the frame (one buffer per
    /// segment: this runs once per segment); `ipv4_id` replaces the IPv4 identification and
    /// `tx` is the record the frame carries to the log (crates/leanweb/src/main.rs).
    pub(super) fn send_segment(
        &mut self,
        seg: &Segment,
        ipv4_id: Option<u16>,
        tx: Option<TxRecord>,
        counters: &mut Counters,
    ) {
        let dst = seg.dst.ip();
        let Some(mac) = self.next_hop_mac(dst, counters) else { return };
        let repr = EthernetRepr { src_addr: self.mac, dst_addr: mac, ethertype: ethertype_of(dst) };
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
        self.out.push(OutFrame { bytes: buf, tx });
        counters.frames_out += 1;
    }

    /// Sends an IP packet, resolving the next hop; solicits and drops if it is unknown
    /// (TCP retransmits; the cache is nearly always warm from the request's own frame).
    pub(super) fn send_ip(&mut self, dst: IpAddr, packet: &[u8], counters: &mut Counters) {
        if let Some(mac) = self.next_hop_mac(dst, counters) {
            self.emit_frame(mac, ethertype_of(dst), packet, counters);
        }
    }

    /// The MAC of `dst`'s next hop; unknown: solicits it and gives none (the packet is
    /// dropped, TCP retransmits; the cache is nearly always warm from the request's frame).
    fn next_hop_mac(&mut self, dst: IpAddr, counters: &mut Counters) -> Option<EthernetAddress> {
        let on_link = same_prefix(dst, self.local_ip_for(dst), self.prefix4, self.prefix6)
            || matches!(dst, IpAddr::V6(a) if a.segments()[0] & 0xffc0 == 0xfe80);
        let gateway = match dst {
            IpAddr::V4(_) => self.gateway4.map(IpAddr::V4),
            IpAddr::V6(_) => self.gateway6.map(IpAddr::V6),
        };
        let next_hop = if on_link { dst } else { gateway.unwrap_or(dst) };
        let mac = self.neighbors.lookup(&next_hop).or_else(|| self.neighbors.lookup(&dst));
        if mac.is_none() {
            counters.unresolved_next_hop += 1;
            self.solicit(next_hop, counters);
        }
        mac
    }

    fn arp_frame(&mut self, arp: ArpRepr, dst: EthernetAddress, counters: &mut Counters) {
        let mut buf = vec![0u8; arp.buffer_len()];
        arp.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
        self.emit_frame(dst, EthernetProtocol::Arp, &buf, counters);
    }

    fn ndisc_frame(
        &mut self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        dst_mac: EthernetAddress,
        ndisc: NdiscRepr,
        counters: &mut Counters,
    ) {
        let packet = icmpv6_packet(src, dst, &Icmpv6Repr::Ndisc(ndisc), NDP_HOP_LIMIT);
        self.emit_frame(dst_mac, EthernetProtocol::Ipv6, &packet, counters);
    }

    /// Gratuitous ARP and unsolicited neighbour advertisements for our addresses, so peers
    /// that cached another MAC for them (a previous leanweb on the same addresses) update
    /// at once instead of after their neighbour entry goes stale.
    pub(super) fn announce(&mut self, counters: &mut Counters) {
        let arp = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: self.mac,
            source_protocol_addr: self.addr4,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: self.addr4,
        };
        self.arp_frame(arp, EthernetAddress::BROADCAST, counters);
        for target in [self.addr6, self.link_local6] {
            let advert = NdiscRepr::NeighborAdvert {
                flags: NdiscNeighborFlags::OVERRIDE,
                target_addr: target,
                lladdr: Some(RawHardwareAddress::from(self.mac)),
            };
            self.ndisc_frame(target, ALL_NODES, multicast_mac(ALL_NODES), advert, counters);
        }
    }

    fn solicit(&mut self, target: IpAddr, counters: &mut Counters) {
        match target {
            IpAddr::V4(target) => {
                let arp = ArpRepr::EthernetIpv4 {
                    operation: ArpOperation::Request,
                    source_hardware_addr: self.mac,
                    source_protocol_addr: self.addr4,
                    target_hardware_addr: EthernetAddress([0; 6]),
                    target_protocol_addr: target,
                };
                self.arp_frame(arp, EthernetAddress::BROADCAST, counters);
            }
            IpAddr::V6(target) => {
                let lladdr = Some(RawHardwareAddress::from(self.mac));
                let ndisc = NdiscRepr::NeighborSolicit { target_addr: target, lladdr };
                let dst = solicited_node(target);
                let on_link = same_prefix(IpAddr::V6(target), IpAddr::V6(self.addr6), 0, self.prefix6);
                let src = if on_link { self.addr6 } else { self.link_local6 };
                self.ndisc_frame(src, dst, multicast_mac(dst), ndisc, counters);
            }
        }
    }

    /// An ARP packet: learn the sender, answer requests for our IPv4 address. False if malformed.
    pub(super) fn handle_arp(&mut self, payload: &[u8], counters: &mut Counters) -> bool {
        let Ok(packet) = ArpPacket::new_checked(payload) else { return false };
        let Ok(ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_protocol_addr,
            ..
        }) = ArpRepr::parse(&packet)
        else {
            return false;
        };
        if target_protocol_addr != self.addr4 {
            counters.not_for_us += 1;
            return true;
        }
        self.neighbors.learn(IpAddr::V4(source_protocol_addr), source_hardware_addr);
        if operation == ArpOperation::Request && source_hardware_addr.is_unicast() {
            let reply = ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Reply,
                source_hardware_addr: self.mac,
                source_protocol_addr: self.addr4,
                target_hardware_addr: source_hardware_addr,
                target_protocol_addr: source_protocol_addr,
            };
            self.arp_frame(reply, source_hardware_addr, counters);
            counters.arp_replies += 1;
        }
        true
    }

    /// A neighbour discovery message (RFC 4861) from `src` (IPv6, `src_mac` on the frame):
    /// solicitations for our addresses are answered, advertisements learnt. False if malformed.
    pub(super) fn handle_ndisc(
        &mut self,
        src: Ipv6Addr,
        hop_limit: u8,
        src_mac: EthernetAddress,
        ndisc: NdiscRepr,
        counters: &mut Counters,
    ) -> bool {
        match ndisc {
            NdiscRepr::NeighborSolicit { target_addr, lladdr } if self.is_our_v6(target_addr) => {
                if hop_limit != NDP_HOP_LIMIT {
                    return false;
                }
                let solicitor_mac =
                    lladdr.and_then(|l| (l.len() == 6).then(|| EthernetAddress::from_bytes(l.as_bytes())));
                let (reply_dst, dst_mac, flags) = if src.is_unspecified() {
                    // Duplicate address detection by someone else: defend our address.
                    (ALL_NODES, multicast_mac(ALL_NODES), NdiscNeighborFlags::OVERRIDE)
                } else {
                    let mac = solicitor_mac.unwrap_or(src_mac);
                    self.neighbors.learn(IpAddr::V6(src), mac);
                    (src, mac, NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE)
                };
                let lladdr = Some(RawHardwareAddress::from(self.mac));
                let advert = NdiscRepr::NeighborAdvert { flags, target_addr, lladdr };
                self.ndisc_frame(target_addr, reply_dst, dst_mac, advert, counters);
                counters.neighbor_adverts += 1;
            }
            NdiscRepr::NeighborAdvert { target_addr, lladdr: Some(lladdr), .. } if lladdr.len() == 6 => {
                self.neighbors.learn(IpAddr::V6(target_addr), EthernetAddress::from_bytes(lladdr.as_bytes()));
            }
            _ => {}
        }
        true
    }
}
