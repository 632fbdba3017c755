//! One captured frame -> one TCP segment, with `etherparse`'s lax slicing: captures are
//! headers only (tcpdump -s 128), so the IP length fields, not the captured bytes, say how
//! much payload a segment carried. Same rules as python/src/congestlab/analysis/packets.py.

use etherparse::{
    EtherType, Ethernet2Header, Ethernet2Slice, IpNumber, LaxIpSlice, LaxNetSlice, LaxSlicedPacket,
    LinuxSllProtocolType, LinuxSllSlice, TcpSlice,
};

use crate::capture::Frame;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

/// LINKTYPE_* values the analyzer reads (tcpdump writes ETHERNET on a veth).
pub const LINKTYPE_ETHERNET: i32 = 1;
pub const LINKTYPE_RAW: i32 = 101;
pub const DLT_RAW: i32 = 12;
pub const LINKTYPE_LINUX_SLL: i32 = 113;
const SLL_HEADER_BYTES: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn as_str(self) -> &'static str {
        match self {
            Family::V4 => "v4",
            Family::V6 => "v6",
        }
    }
}

/// A TCP segment as the analysis needs it. Addresses are IPv6-sized; IPv4 ones use the
/// first four bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub ts_ns: i64,
    pub family: Family,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub payload_len: u32,
    /// Bytes on the wire: link header + IP total length (what Wireshark's frame.len counts,
    /// less Ethernet padding).
    pub frame_len: u32,
    /// The advertised receive window as sent (unscaled).
    pub window: u16,
    /// The TCP options as sent (parsed only for traced connections: flow.rs).
    pub options: [u8; MAX_OPTION_BYTES],
    pub options_len: u8,
}

/// A TCP header carries at most 40 bytes of options.
pub const MAX_OPTION_BYTES: usize = 40;

impl Segment {
    pub fn options(&self) -> &[u8] {
        &self.options[..usize::from(self.options_len)]
    }
    pub fn syn(&self) -> bool {
        self.flags & SYN != 0
    }
    pub fn fin(&self) -> bool {
        self.flags & FIN != 0
    }
    pub fn rst(&self) -> bool {
        self.flags & RST != 0
    }
    pub fn has_ack(&self) -> bool {
        self.flags & ACK != 0
    }
}

/// Why a frame gave no segment. Counted per kind, never fatal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Skip {
    Linktype(i32),
    Undecodable,
    NotIp,
    NotTcp,
    BadTcpHeaderLength,
}

impl Skip {
    pub fn label(self) -> String {
        match self {
            Skip::Linktype(n) => format!("linktype {n}"),
            Skip::Undecodable => "undecodable frame".into(),
            Skip::NotIp => "not IP".into(),
            Skip::NotTcp => "not TCP".into(),
            Skip::BadTcpHeaderLength => "bad TCP header length".into(),
        }
    }
}

pub fn decode(frame: &Frame<'_>) -> Result<Segment, Skip> {
    let data = frame.data;
    // the common links go layer by layer (etherparse's per-layer slices); anything else
    // (VLAN tags, other SLL protocol types) through etherparse's whole-packet lax slicer
    let ip_start = match frame.linktype {
        LINKTYPE_ETHERNET => {
            let eth =
                Ethernet2Slice::from_slice_without_fcs(data).map_err(|_| Skip::Undecodable)?;
            match eth.ether_type() {
                EtherType::IPV4 | EtherType::IPV6 => Ethernet2Header::LEN,
                _ => ip_offset(
                    &LaxSlicedPacket::from_ethernet(data).map_err(|_| Skip::Undecodable)?,
                    data,
                )?,
            }
        }
        LINKTYPE_LINUX_SLL => {
            let sll = LinuxSllSlice::from_slice(data).map_err(|_| Skip::Undecodable)?;
            match sll.protocol_type() {
                LinuxSllProtocolType::EtherType(EtherType::IPV4 | EtherType::IPV6) => {
                    SLL_HEADER_BYTES
                }
                LinuxSllProtocolType::EtherType(ether_type) => {
                    let rest = &data[SLL_HEADER_BYTES..];
                    SLL_HEADER_BYTES
                        + ip_offset(&LaxSlicedPacket::from_ether_type(ether_type, rest), rest)?
                }
                _ => return Err(Skip::NotIp),
            }
        }
        LINKTYPE_RAW | DLT_RAW => match data.first().map(|b| b >> 4) {
            Some(4 | 6) => 0,
            Some(_) => return Err(Skip::NotIp),
            None => return Err(Skip::Undecodable),
        },
        other => return Err(Skip::Linktype(other)),
    };
    from_ip(frame.ts_ns, &data[ip_start..], ip_start)
}

/// Where the IP header starts in a frame the lax slicer took apart.
fn ip_offset(packet: &LaxSlicedPacket<'_>, data: &[u8]) -> Result<usize, Skip> {
    let header = match &packet.net {
        Some(LaxNetSlice::Ipv4(ip)) => ip.header().slice().as_ptr(),
        Some(LaxNetSlice::Ipv6(ip)) => ip.header().slice().as_ptr(),
        Some(LaxNetSlice::Arp(_)) => return Err(Skip::NotIp),
        None => {
            return Err(if packet.stop_err.is_some() {
                Skip::Undecodable
            } else {
                Skip::NotIp
            })
        }
    };
    Ok((header as usize).saturating_sub(data.as_ptr() as usize))
}

/// The IP and TCP headers of `ip` (the frame from its IP header on, `link_header_len` bytes
/// of link header before it).
fn from_ip(ts_ns: i64, ip: &[u8], link_header_len: usize) -> Result<Segment, Skip> {
    let (ip, stop_err) = LaxIpSlice::from_slice(ip).map_err(|_| Skip::Undecodable)?;
    // IP header length fields, not the captured length, say what the segment carried
    let (family, src, dst, ip_payload_len, ip_total_len) = match &ip {
        LaxIpSlice::Ipv4(v4) => {
            let h = v4.header();
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src[..4].copy_from_slice(&h.source());
            dst[..4].copy_from_slice(&h.destination());
            let total = i64::from(h.total_len());
            (Family::V4, src, dst, total - i64::from(h.ihl()) * 4, total)
        }
        LaxIpSlice::Ipv6(v6) => {
            let h = v6.header();
            let plen = i64::from(h.payload_length());
            let ext = v6.extensions().slice().len() as i64;
            (
                Family::V6,
                h.source(),
                h.destination(),
                plen - ext,
                40 + plen,
            )
        }
    };
    let payload = ip.payload();
    if payload.ip_number != IpNumber::TCP || payload.fragmented {
        return Err(Skip::NotTcp);
    }
    if stop_err.is_some() {
        return Err(Skip::Undecodable);
    }
    let tcp = TcpSlice::from_slice(payload.payload).map_err(|_| Skip::Undecodable)?;
    let payload_len = ip_payload_len - i64::from(tcp.data_offset()) * 4;
    if payload_len < 0 || ip_total_len < 0 {
        return Err(Skip::BadTcpHeaderLength);
    }
    let mut flags = 0u8;
    let bits = [
        tcp.fin(),
        tcp.syn(),
        tcp.rst(),
        tcp.psh(),
        tcp.ack(),
        tcp.urg(),
        tcp.ece(),
        tcp.cwr(),
    ];
    for (i, set) in bits.into_iter().enumerate() {
        if set {
            flags |= 1 << i;
        }
    }
    let raw_options = tcp.options();
    let mut options = [0u8; MAX_OPTION_BYTES];
    let options_len = raw_options.len().min(MAX_OPTION_BYTES);
    options[..options_len].copy_from_slice(&raw_options[..options_len]);
    Ok(Segment {
        ts_ns,
        family,
        src,
        dst,
        sport: tcp.source_port(),
        dport: tcp.destination_port(),
        seq: tcp.sequence_number(),
        ack: tcp.acknowledgment_number(),
        flags,
        payload_len: payload_len as u32,
        frame_len: (link_header_len as i64 + ip_total_len) as u32,
        window: tcp.window_size(),
        options,
        options_len: options_len as u8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn frame(data: &[u8], linktype: i32) -> Frame<'_> {
        Frame {
            linktype,
            ts_ns: 5,
            data,
        }
    }

    fn v4_segment(payload: usize) -> Vec<u8> {
        let builder = PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv4([10, 0, 0, 10], [10, 0, 4, 10], 64)
            .tcp(40000, 80, 1000, 65535)
            .ack(77)
            .psh();
        let mut out = Vec::new();
        builder.write(&mut out, &vec![b'x'; payload]).unwrap();
        out
    }

    #[test]
    fn headers_only_frame_keeps_payload_length_from_ip() {
        let full = v4_segment(1448);
        let seg = decode(&frame(&full[..128.min(full.len())], LINKTYPE_ETHERNET)).unwrap();
        assert_eq!(seg.payload_len, 1448);
        assert_eq!(seg.frame_len as usize, full.len());
        assert_eq!(
            (seg.sport, seg.dport, seg.seq, seg.ack),
            (40000, 80, 1000, 77)
        );
        assert!(seg.has_ack() && !seg.syn() && !seg.fin());
        assert_eq!(&seg.src[..4], &[10, 0, 0, 10]);
    }

    #[test]
    fn ipv6_and_raw_ip() {
        let builder = PacketBuilder::ip(etherparse::IpHeaders::Ipv6(
            etherparse::Ipv6Header {
                source: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xa],
                destination: [0xfd, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0xa],
                hop_limit: 64,
                ..Default::default()
            },
            Default::default(),
        ))
        .tcp(80, 40001, 5, 100)
        .syn();
        let mut out = Vec::new();
        builder.write(&mut out, &[]).unwrap();
        let seg = decode(&frame(&out, LINKTYPE_RAW)).unwrap();
        assert_eq!(seg.family, Family::V6);
        assert_eq!(seg.payload_len, 0);
        assert_eq!(seg.frame_len as usize, out.len());
        assert!(seg.syn());
    }

    #[test]
    fn malformed_frames_are_skips_not_panics() {
        let full = v4_segment(10);
        assert_eq!(
            decode(&frame(&full[..20], LINKTYPE_ETHERNET)),
            Err(Skip::Undecodable)
        );
        assert_eq!(
            decode(&frame(&full[..10], LINKTYPE_ETHERNET)),
            Err(Skip::Undecodable)
        );
        assert_eq!(
            decode(&frame(&full[..40], LINKTYPE_ETHERNET)),
            Err(Skip::Undecodable)
        ); // inside TCP
        assert_eq!(decode(&frame(&full, 147)), Err(Skip::Linktype(147)));
        let mut arp = full.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(matches!(
            decode(&frame(&arp, LINKTYPE_ETHERNET)),
            Err(Skip::NotIp | Skip::Undecodable)
        ));
        let udp = {
            let b = PacketBuilder::ethernet2([2; 6], [4; 6])
                .ipv4([1, 1, 1, 1], [2, 2, 2, 2], 9)
                .udp(1, 2);
            let mut out = Vec::new();
            b.write(&mut out, &[1, 2, 3]).unwrap();
            out
        };
        assert_eq!(decode(&frame(&udp, LINKTYPE_ETHERNET)), Err(Skip::NotTcp));
        // every prefix of a valid frame decodes or is skipped, never panics
        for cut in 0..full.len() {
            let _ = decode(&frame(&full[..cut], LINKTYPE_ETHERNET));
            let _ = decode(&frame(&full[..cut], LINKTYPE_LINUX_SLL));
            let _ = decode(&frame(
                &full[14..14 + cut.min(full.len() - 14)],
                LINKTYPE_RAW,
            ));
        }
    }

    #[test]
    fn vlan_tagged_frame_goes_through_the_lax_slicer() {
        let builder = PacketBuilder::ethernet2([2; 6], [4; 6])
            .single_vlan(etherparse::VlanId::try_new(7).unwrap())
            .ipv4([10, 0, 0, 10], [10, 0, 4, 10], 64)
            .tcp(40000, 80, 1, 65535)
            .ack(1);
        let mut out = Vec::new();
        builder.write(&mut out, &[0u8; 100]).unwrap();
        let seg = decode(&frame(&out, LINKTYPE_ETHERNET)).unwrap();
        assert_eq!((seg.payload_len, seg.frame_len as usize), (100, out.len()));
    }

    #[test]
    fn ip_length_shorter_than_the_headers_is_skipped() {
        let mut full = v4_segment(0);
        // IP total length shorter than IP + TCP headers
        full[16..18].copy_from_slice(&30u16.to_be_bytes());
        assert!(decode(&frame(&full, LINKTYPE_ETHERNET)).is_err());
    }
}
