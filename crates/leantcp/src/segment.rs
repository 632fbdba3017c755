//! TCP segments as owned data, and their IPv4/IPv6 wire form via `smoltcp::wire`
//! (validated Packet/Repr parsing: never panics on untrusted bytes).
use std::net::{IpAddr, SocketAddr};

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
    TcpTimestampRepr,
};

use crate::seq::Seq;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("malformed IPv4 header")]
    Ipv4,
    #[error("malformed IPv6 header")]
    Ipv6,
    #[error("not a TCP packet")]
    NotTcp,
    #[error("malformed TCP segment or bad checksum")]
    Tcp,
    #[error("source and destination are of different address families")]
    MixedFamilies,
    #[error("empty packet")]
    Empty,
    #[error("TCP options longer than 40 bytes")]
    OptionsTooLong,
}

/// Longest TCP header: the data offset field counts 32-bit words in 4 bits.
const MAX_TCP_HEADER_BYTES: usize = 60;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: Seq,
    pub ack: Option<Seq>,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub psh: bool,
    /// Raw (unscaled) window field.
    pub window: u16,
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    /// RFC 2018 SACK-permitted (SYN segments only).
    pub sack_permitted: bool,
    /// RFC 2018 SACK blocks (left edge, right edge), at most 3 on the wire.
    pub sack_blocks: Vec<(Seq, Seq)>,
    /// RFC 7323 timestamps option.
    pub timestamp: Option<Timestamp>,
    pub payload: Vec<u8>,
}

/// RFC 7323 TSval / TSecr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp {
    pub tsval: u32,
    pub tsecr: u32,
}

/// Most SACK blocks one segment carries (RFC 2018 §3: 3 when timestamps are used too).
pub const MAX_SACK_BLOCKS: usize = 3;

impl Segment {
    /// Length in sequence space (payload plus SYN and FIN).
    pub fn seq_len(&self) -> usize {
        self.payload.len() + self.syn as usize + self.fin as usize
    }

    /// Parses an IPv4 or IPv6 packet carrying TCP; checksums are verified.
    pub fn parse_ip(bytes: &[u8]) -> Result<Segment, WireError> {
        let caps = ChecksumCapabilities::default();
        match bytes.first().map(|b| b >> 4) {
            Some(4) => {
                let packet = Ipv4Packet::new_checked(bytes).map_err(|_| WireError::Ipv4)?;
                let ip = Ipv4Repr::parse(&packet, &caps).map_err(|_| WireError::Ipv4)?;
                if ip.next_header != IpProtocol::Tcp {
                    return Err(WireError::NotTcp);
                }
                Self::parse_tcp(packet.payload(), IpAddr::V4(ip.src_addr), IpAddr::V4(ip.dst_addr))
            }
            Some(6) => {
                let packet = Ipv6Packet::new_checked(bytes).map_err(|_| WireError::Ipv6)?;
                let ip = Ipv6Repr::parse(&packet).map_err(|_| WireError::Ipv6)?;
                if ip.next_header != IpProtocol::Tcp {
                    return Err(WireError::NotTcp);
                }
                Self::parse_tcp(packet.payload(), IpAddr::V6(ip.src_addr), IpAddr::V6(ip.dst_addr))
            }
            Some(_) => Err(WireError::Ipv4),
            None => Err(WireError::Empty),
        }
    }

    /// Parses a TCP header + payload whose IP addresses are already known.
    pub fn parse_tcp(bytes: &[u8], src: IpAddr, dst: IpAddr) -> Result<Segment, WireError> {
        let caps = ChecksumCapabilities::default();
        let packet = TcpPacket::new_checked(bytes).map_err(|_| WireError::Tcp)?;
        let (src_ip, dst_ip) = (IpAddress::from(src), IpAddress::from(dst));
        let repr = TcpRepr::parse(&packet, &src_ip, &dst_ip, &caps).map_err(|_| WireError::Tcp)?;
        Ok(Segment {
            src: SocketAddr::new(src, repr.src_port),
            dst: SocketAddr::new(dst, repr.dst_port),
            seq: Seq(repr.seq_number.0 as u32),
            ack: repr.ack_number.map(|a| Seq(a.0 as u32)),
            syn: repr.control == TcpControl::Syn,
            fin: repr.control == TcpControl::Fin,
            rst: repr.control == TcpControl::Rst,
            psh: packet.psh(),
            window: repr.window_len,
            mss: repr.max_seg_size,
            window_scale: repr.window_scale,
            sack_permitted: repr.sack_permitted,
            sack_blocks: repr.sack_ranges.iter().flatten().map(|&(l, r)| (Seq(l), Seq(r))).collect(),
            timestamp: repr.timestamp.map(|t| Timestamp { tsval: t.tsval, tsecr: t.tsecr }),
            payload: repr.payload.to_vec(),
        })
    }

    fn tcp_repr(&self) -> TcpRepr<'_> {
        let control = if self.syn {
            TcpControl::Syn
        } else if self.fin {
            TcpControl::Fin
        } else if self.rst {
            TcpControl::Rst
        } else if self.psh {
            TcpControl::Psh
        } else {
            TcpControl::None
        };
        TcpRepr {
            src_port: self.src.port(),
            dst_port: self.dst.port(),
            control,
            seq_number: TcpSeqNumber(self.seq.0 as i32),
            ack_number: self.ack.map(|a| TcpSeqNumber(a.0 as i32)),
            window_len: self.window,
            window_scale: self.window_scale,
            max_seg_size: self.mss,
            sack_permitted: self.sack_permitted,
            sack_ranges: core::array::from_fn(|i| self.sack_blocks.get(i).map(|(l, r)| (l.0, r.0))),
            timestamp: self.timestamp.map(|t| TcpTimestampRepr::new(t.tsval, t.tsecr)),
            payload: &self.payload,
        }
    }

    /// Length of the IP packet [`Segment::emit_ip`] writes.
    pub fn ip_len(&self) -> usize {
        let ip_header = if self.src.is_ipv4() { 20 } else { 40 };
        ip_header + self.tcp_repr().buffer_len()
    }

    /// Writes the IP packet (header, TCP header with checksum, payload) into `out`,
    /// which must be at least [`Segment::ip_len`] bytes long.
    pub fn emit_ip(&self, out: &mut [u8], hop_limit: u8) -> Result<usize, WireError> {
        let caps = ChecksumCapabilities::default();
        let tcp = self.tcp_repr();
        if tcp.header_len() > MAX_TCP_HEADER_BYTES {
            return Err(WireError::OptionsTooLong); // smoltcp would write a wrapped data offset
        }
        let total = self.ip_len();
        if out.len() < total {
            return Err(WireError::Tcp);
        }
        let out = &mut out[..total];
        let (header_len, src_ip, dst_ip) = match (self.src.ip(), self.dst.ip()) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let ip = Ipv4Repr {
                    src_addr: src,
                    dst_addr: dst,
                    next_header: IpProtocol::Tcp,
                    payload_len: tcp.buffer_len(),
                    hop_limit,
                };
                ip.emit(&mut Ipv4Packet::new_unchecked(&mut *out), &caps);
                (ip.buffer_len(), IpAddress::Ipv4(src), IpAddress::Ipv4(dst))
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let ip = Ipv6Repr {
                    src_addr: src,
                    dst_addr: dst,
                    next_header: IpProtocol::Tcp,
                    payload_len: tcp.buffer_len(),
                    hop_limit,
                };
                ip.emit(&mut Ipv6Packet::new_unchecked(&mut *out));
                (ip.buffer_len(), IpAddress::Ipv6(src), IpAddress::Ipv6(dst))
            }
            _ => return Err(WireError::MixedFamilies),
        };
        let mut packet = TcpPacket::new_unchecked(&mut out[header_len..]);
        tcp.emit(&mut packet, &src_ip, &dst_ip, &caps);
        Ok(total)
    }

    pub fn to_ip_bytes(&self, hop_limit: u8) -> Result<Vec<u8>, WireError> {
        let mut out = vec![0u8; self.ip_len()];
        self.emit_ip(&mut out, hop_limit)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(src: &str, dst: &str) -> Segment {
        Segment {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            seq: Seq(0xfffffff0),
            ack: Some(Seq(7)),
            syn: true,
            fin: false,
            rst: false,
            psh: false,
            window: 4096,
            mss: Some(1440),
            window_scale: Some(7),
            sack_permitted: false,
            sack_blocks: vec![],
            timestamp: None,
            payload: vec![],
        }
    }

    #[test]
    fn round_trips_v4_and_v6() {
        for (src, dst) in [("10.0.0.1:80", "10.0.0.2:5555"), ("[fd00::1]:80", "[fd00::2]:5555")] {
            let mut seg = sample(src, dst);
            let bytes = seg.to_ip_bytes(64).unwrap();
            assert_eq!(Segment::parse_ip(&bytes).unwrap(), seg);
            seg.syn = false;
            seg.fin = true;
            seg.mss = None;
            seg.window_scale = None;
            seg.payload = b"hello".to_vec();
            let bytes = seg.to_ip_bytes(64).unwrap();
            assert_eq!(Segment::parse_ip(&bytes).unwrap(), seg);
        }
    }

    #[test]
    fn sack_and_timestamp_options_round_trip() {
        for (src, dst) in [("10.0.0.1:80", "10.0.0.2:5555"), ("[fd00::1]:80", "[fd00::2]:5555")] {
            let mut syn = sample(src, dst);
            syn.sack_permitted = true;
            syn.timestamp = Some(Timestamp { tsval: 7, tsecr: 0 });
            let bytes = syn.to_ip_bytes(64).unwrap();
            assert_eq!(Segment::parse_ip(&bytes).unwrap(), syn);
            let mut ack = sample(src, dst);
            (ack.syn, ack.mss, ack.window_scale) = (false, None, None);
            ack.sack_blocks = vec![(Seq(100), Seq(200)), (Seq(0xffff_fff0), Seq(10)), (Seq(300), Seq(400))];
            ack.timestamp = Some(Timestamp { tsval: u32::MAX, tsecr: 12345 });
            ack.payload = vec![1; 20];
            let bytes = ack.to_ip_bytes(64).unwrap();
            assert_eq!(bytes.len(), ack.ip_len());
            assert_eq!(Segment::parse_ip(&bytes).unwrap(), ack);
        }
    }

    #[test]
    fn too_many_options_are_an_error_not_a_panic() {
        let mut seg = sample("10.0.0.1:80", "10.0.0.2:5555");
        seg.sack_permitted = true;
        seg.timestamp = Some(Timestamp { tsval: 1, tsecr: 2 });
        seg.sack_blocks = vec![(Seq(1), Seq(2)); 3];
        assert_eq!(seg.to_ip_bytes(64), Err(WireError::OptionsTooLong));
        seg.syn = false;
        (seg.mss, seg.window_scale, seg.sack_permitted) = (None, None, false);
        assert!(seg.to_ip_bytes(64).is_ok(), "timestamps + 3 SACK blocks fit (56 bytes)");
    }

    #[test]
    fn corrupt_bytes_are_errors_not_panics() {
        let seg = sample("10.0.0.1:80", "10.0.0.2:5555");
        let mut bytes = seg.to_ip_bytes(64).unwrap();
        bytes[30] ^= 0xff;
        assert!(Segment::parse_ip(&bytes).is_err(), "checksum must catch the flip");
        for len in 0..bytes.len() {
            let _ = Segment::parse_ip(&bytes[..len]);
        }
        assert_eq!(Segment::parse_ip(&[]), Err(WireError::Empty));
    }
}
