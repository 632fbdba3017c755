//! GSO super-frames for the TAP device (`--gso on`, IFF_VNET_HDR): consecutive data segments
//! of one connection, produced in one turn, go to the kernel as one frame with a
//! `virtio_net_hdr` (gso_type TCPV4/TCPV6, gso_size = their payload, NEEDS_CSUM with the
//! pseudo-header sum), and the kernel's software GSO cuts it into segments where it leaves
//! the bridge for the veth (GSO/TSO are off on every veth). One `write` then carries up to
//! 64 KiB instead of one segment (docs/notes/leantcp-sending-speed.md §5).
//!
//! The kernel rebuilds every segment from the first one's headers (net/ipv4/tcp_offload.c
//! `tcp_gso_segment`, net/ipv4/af_inet.c `inet_gso_segment`, net/ipv6/ip6_offload.c): it
//! copies them, sets the sequence number (+ gso_size per segment), the IP length, the IPv4
//! identification (id, id+1, …), clears PSH and FIN on all but the last segment and CWR on
//! all but the first, and fills the checksums. So a run of frames is merged only if that
//! gives back exactly the frames leanweb built: every other header byte equal (addresses,
//! ports, ack, window, options — timestamps and SACK blocks included), sequence numbers and
//! IPv4 identifications consecutive, every segment but the last full-sized without PSH or
//! FIN. `kernel_segments` is that rule as code; the tests and the fuzz target check
//! `kernel_segments(super-frame) == the frames` for what the stack produces.
use std::ops::Range;

use smoltcp::wire::{EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, Ipv6Packet, TcpPacket};

use crate::stack::OutFrame;

/// `struct virtio_net_hdr` (include/uapi/linux/virtio_net.h), the size TUNSETVNETHDRSZ sets.
pub const VNET_HDR_LEN: usize = 10;
const F_NEEDS_CSUM: u8 = 1;
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const ETH_HDR_LEN: usize = 14;
/// Where the checksum sits in the TCP header.
const TCP_CHECKSUM_AT: usize = 16;
/// The TCP flags byte in the TCP header.
const TCP_FLAGS_AT: usize = 13;
const FIN: u8 = 0x01;
const PSH: u8 = 0x08;
const CWR: u8 = 0x80;
/// IPv4 total length and IPv6 payload length are 16 bits.
const MAX_IP_LEN: usize = 65535;

/// One write to the TAP device: `frames` (indices into the turn's frames) as a plain frame
/// (`head` is `None`, the header all zero) or as one super-frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapWrite {
    pub frames: Range<usize>,
    pub vnet: [u8; VNET_HDR_LEN],
    /// A super-frame's Ethernet, IP and TCP headers; each frame's payload follows.
    pub head: Option<Vec<u8>>,
    /// Length of the headers of each frame of a super-frame (all equal).
    header_len: usize,
}

impl TapWrite {
    /// The bytes of this write in order (the vnet header first), for `writev`.
    pub fn parts<'a>(&'a self, frames: &'a [OutFrame], out: &mut Vec<&'a [u8]>) {
        out.clear();
        out.push(&self.vnet);
        match &self.head {
            None => out.extend(frames[self.frames.clone()].iter().map(|f| &f.bytes[..])),
            Some(head) => {
                out.push(head);
                out.extend(frames[self.frames.clone()].iter().map(|f| &f.bytes[self.header_len..]));
            }
        }
    }

    /// What the kernel reads from this write.
    pub fn to_bytes(&self, frames: &[OutFrame]) -> Vec<u8> {
        let mut parts = Vec::new();
        self.parts(frames, &mut parts);
        parts.concat()
    }
}

/// A TCP data segment in a frame the stack built: where its parts are.
#[derive(Debug, Clone, Copy)]
struct DataSegment {
    v6: bool,
    tcp_at: usize,
    header_len: usize,
    payload_len: usize,
    seq: u32,
    flags: u8,
    ipv4_id: u16,
}

fn data_segment(bytes: &[u8]) -> Option<DataSegment> {
    let eth = EthernetFrame::new_checked(bytes).ok()?;
    let (v6, ip_header_len, ipv4_id, tcp_bytes) = match eth.ethertype() {
        EthernetProtocol::Ipv4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
            // No options (the kernel copies them to every segment, but we never send any),
            // not a fragment, and no bytes after the packet.
            let plain = ip.header_len() == 20 && ip.dont_frag() && !ip.more_frags() && ip.frag_offset() == 0;
            if !plain || ip.next_header() != IpProtocol::Tcp || ip.total_len() as usize != eth.payload().len() {
                return None;
            }
            (false, 20, ip.ident(), &eth.payload()[20..])
        }
        EthernetProtocol::Ipv6 => {
            let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
            if ip.next_header() != IpProtocol::Tcp || ip.total_len() != eth.payload().len() {
                return None;
            }
            (true, 40, 0, &eth.payload()[40..])
        }
        _ => return None,
    };
    let tcp = TcpPacket::new_checked(tcp_bytes).ok()?;
    let plain_ack = tcp.ack() && !tcp.syn() && !tcp.rst() && !tcp.urg() && !tcp.ece() && !tcp.cwr();
    let tcp_header_len = tcp.header_len() as usize;
    let payload_len = tcp_bytes.len().checked_sub(tcp_header_len)?;
    if !plain_ack || payload_len == 0 {
        return None;
    }
    let tcp_at = ETH_HDR_LEN + ip_header_len;
    Some(DataSegment {
        v6,
        tcp_at,
        header_len: tcp_at + tcp_header_len,
        payload_len,
        seq: tcp.seq_number().0 as u32,
        flags: bytes[tcp_at + TCP_FLAGS_AT],
        ipv4_id,
    })
}

/// Header bytes the kernel writes per segment; all others must be equal across a run.
fn per_segment_bytes(first: &DataSegment) -> [Range<usize>; 5] {
    let ip = ETH_HDR_LEN;
    let t = first.tcp_at;
    let lengths = if first.v6 { ip + 4..ip + 6 } else { ip + 2..ip + 6 }; // IPv4: total length, identification
    let ip_checksum = if first.v6 { ip..ip } else { ip + 10..ip + 12 };
    [
        lengths,
        ip_checksum,
        t + 4..t + 8,
        t + TCP_FLAGS_AT..t + TCP_FLAGS_AT + 1,
        t + TCP_CHECKSUM_AT..t + TCP_CHECKSUM_AT + 2,
    ]
}

fn same_headers_but(a: &[u8], b: &[u8], len: usize, skip: &[Range<usize>; 5]) -> bool {
    let mut at = 0;
    let mut ranges: Vec<&Range<usize>> = skip.iter().collect();
    ranges.sort_by_key(|r| r.start);
    for r in ranges {
        if a[at..r.start] != b[at..r.start] {
            return false;
        }
        at = at.max(r.end);
    }
    a[at..len] == b[at..len]
}

/// Whether `next` can follow the run `first`..`last` (`count` segments) in one super-frame.
fn continues(
    first: &DataSegment,
    first_bytes: &[u8],
    last: &DataSegment,
    count: usize,
    next: &DataSegment,
    next_bytes: &[u8],
    ip_len: usize,
) -> bool {
    let gso_size = first.payload_len;
    last.payload_len == gso_size
        && last.flags & (PSH | FIN) == 0
        && next.v6 == first.v6
        && next.header_len == first.header_len
        && next.payload_len <= gso_size
        && next.seq == first.seq.wrapping_add((count * gso_size) as u32)
        && (first.v6 || next.ipv4_id == first.ipv4_id.wrapping_add(count as u16))
        && next.flags & !(PSH | FIN) == first.flags
        && ip_len + next.payload_len <= MAX_IP_LEN
        && same_headers_but(first_bytes, next_bytes, first.header_len, &per_segment_bytes(first))
}

/// RFC 1071 sum of the TCP pseudo-header (addresses, protocol, TCP length), folded and not
/// complemented: what a CHECKSUM_PARTIAL skb carries in its checksum field.
fn pseudo_header_sum(src: &[u8], dst: &[u8], tcp_len: u32) -> u16 {
    let mut sum: u32 = 0;
    for pair in src.chunks(2).chain(dst.chunks(2)) {
        sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    sum += u32::from(u8::from(IpProtocol::Tcp)) + (tcp_len >> 16) + (tcp_len & 0xffff);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The super-frame's headers: the first frame's, with the run's lengths, the last frame's
/// flags and the partial checksum; and its vnet header.
fn super_frame(
    first: &DataSegment,
    first_bytes: &[u8],
    last_flags: u8,
    payload_total: usize,
    gso_size: usize,
) -> (Vec<u8>, [u8; VNET_HDR_LEN]) {
    let mut head = first_bytes[..first.header_len].to_vec();
    let tcp_len = first.header_len - first.tcp_at + payload_total;
    let (src, dst) = if first.v6 {
        let mut ip = Ipv6Packet::new_unchecked(&mut head[ETH_HDR_LEN..]);
        ip.set_payload_len(tcp_len as u16);
        (ip.src_addr().octets().to_vec(), ip.dst_addr().octets().to_vec())
    } else {
        let mut ip = Ipv4Packet::new_unchecked(&mut head[ETH_HDR_LEN..]);
        ip.set_total_len((20 + tcp_len) as u16);
        ip.fill_checksum();
        (ip.src_addr().octets().to_vec(), ip.dst_addr().octets().to_vec())
    };
    head[first.tcp_at + TCP_FLAGS_AT] = last_flags;
    let mut tcp = TcpPacket::new_unchecked(&mut head[first.tcp_at..]);
    tcp.set_checksum(pseudo_header_sum(&src, &dst, tcp_len as u32));
    let mut vnet = [0u8; VNET_HDR_LEN];
    vnet[0] = F_NEEDS_CSUM;
    vnet[1] = if first.v6 { GSO_TCPV6 } else { GSO_TCPV4 };
    vnet[2..4].copy_from_slice(&(first.header_len as u16).to_le_bytes());
    vnet[4..6].copy_from_slice(&(gso_size as u16).to_le_bytes());
    vnet[6..8].copy_from_slice(&(first.tcp_at as u16).to_le_bytes());
    vnet[8..10].copy_from_slice(&(TCP_CHECKSUM_AT as u16).to_le_bytes());
    (head, vnet)
}

/// The writes for one turn's frames, in order: runs that the kernel's segmentation turns
/// back into exactly those frames become one super-frame each, everything else (ARP, NDP,
/// pure ACKs, SYN-ACKs, a segment that ends a push, a lone segment) goes as it is.
pub fn plan(frames: &[OutFrame]) -> Vec<TapWrite> {
    let mut writes = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        let plain = |at: usize| TapWrite { frames: at..at + 1, vnet: [0; VNET_HDR_LEN], head: None, header_len: 0 };
        let Some(first) = data_segment(&frames[i].bytes) else {
            writes.push(plain(i));
            i += 1;
            continue;
        };
        let first_bytes = &frames[i].bytes;
        let mut last = first;
        let mut end = i + 1;
        let mut payload_total = first.payload_len;
        let ip_header_len = first.tcp_at - ETH_HDR_LEN;
        while end < frames.len() {
            let ip_len = ip_header_len + (first.header_len - first.tcp_at) + payload_total;
            match data_segment(&frames[end].bytes) {
                Some(next) if continues(&first, first_bytes, &last, end - i, &next, &frames[end].bytes, ip_len) => {
                    payload_total += next.payload_len;
                    last = next;
                    end += 1;
                }
                _ => break,
            }
        }
        if end - i == 1 {
            writes.push(plain(i));
        } else {
            let (head, vnet) = super_frame(&first, first_bytes, last.flags, payload_total, first.payload_len);
            writes.push(TapWrite { frames: i..end, vnet, head: Some(head), header_len: first.header_len });
        }
        i = end;
    }
    writes
}

/// A frame read from the TAP device with IFF_VNET_HDR: the Ethernet frame after the vnet
/// header. `None` (the caller counts it malformed) if the header is cut short or announces
/// a GSO frame: leanweb never enables receive offloads (TUNSETOFFLOAD), so the kernel hands
/// it single frames with complete checksums, and anything else is not for it.
pub fn strip_vnet_header(bytes: &[u8]) -> Option<&[u8]> {
    let (vnet, frame) = bytes.split_at_checked(VNET_HDR_LEN)?;
    (vnet[1] == GSO_NONE).then_some(frame)
}

/// What the kernel's software GSO makes of one write (with checksums computed in software, as
/// on a veth with tx-checksumming off): the frames on the wire. A model of
/// `tcp_gso_segment`/`inet_gso_segment`/`ipv6_gso_segment` for the tests and the fuzz
/// target; `None` for a write the kernel would refuse.
pub fn kernel_segments(write: &[u8]) -> Option<Vec<Vec<u8>>> {
    let (vnet, frame) = write.split_at_checked(VNET_HDR_LEN)?;
    if vnet[1] == GSO_NONE {
        return Some(vec![frame.to_vec()]);
    }
    let v6 = match vnet[1] {
        GSO_TCPV4 => false,
        GSO_TCPV6 => true,
        _ => return None,
    };
    let header_len = u16::from_le_bytes([vnet[2], vnet[3]]) as usize;
    let gso_size = u16::from_le_bytes([vnet[4], vnet[5]]) as usize;
    let tcp_at = u16::from_le_bytes([vnet[6], vnet[7]]) as usize;
    if vnet[0] != F_NEEDS_CSUM
        || gso_size == 0
        || tcp_at != ETH_HDR_LEN + if v6 { 40 } else { 20 }
        || header_len > frame.len()
        || header_len < tcp_at + 20
    {
        return None;
    }
    let (head, payload) = frame.split_at(header_len);
    let chunks: Vec<&[u8]> = payload.chunks(gso_size).collect();
    let seq0 = TcpPacket::new_checked(&head[tcp_at..]).ok()?.seq_number();
    // (The length fields still count the whole super-frame: read the identification alone.)
    let id0 = if v6 { 0 } else { Ipv4Packet::new_unchecked(&head[ETH_HDR_LEN..]).ident() };
    let mut out = Vec::with_capacity(chunks.len());
    for (k, chunk) in chunks.iter().enumerate() {
        let mut seg = [head, chunk].concat();
        let tcp_len = header_len - tcp_at + chunk.len();
        let (src, dst) = if v6 {
            let mut ip = Ipv6Packet::new_unchecked(&mut seg[ETH_HDR_LEN..]);
            ip.set_payload_len(tcp_len as u16);
            (ip.src_addr().into(), ip.dst_addr().into())
        } else {
            let mut ip = Ipv4Packet::new_unchecked(&mut seg[ETH_HDR_LEN..]);
            ip.set_total_len((20 + tcp_len) as u16);
            ip.set_ident(id0.wrapping_add(k as u16));
            ip.fill_checksum();
            (ip.src_addr().into(), ip.dst_addr().into())
        };
        if k + 1 < chunks.len() {
            seg[tcp_at + TCP_FLAGS_AT] &= !(PSH | FIN);
        }
        if k > 0 {
            seg[tcp_at + TCP_FLAGS_AT] &= !CWR;
        }
        let mut tcp = TcpPacket::new_unchecked(&mut seg[tcp_at..]);
        tcp.set_seq_number(seq0 + k * gso_size);
        tcp.fill_checksum(&src, &dst);
        out.push(seg);
    }
    Some(out)
}

#[cfg(test)]
mod tests;
