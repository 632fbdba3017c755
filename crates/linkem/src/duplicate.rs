//! Sends the extra copy of a duplicated packet: NFQUEUE can only accept a packet once, so
//! the copy goes out through a raw socket (IP header included) from the router itself and
//! is routed like the original (OUTPUT path, so it is not queued to linkem again).

use smoltcp::wire::{IpVersion, Ipv4Packet, Ipv6Packet};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::{IpAddr, SocketAddr};

pub struct Duplicator {
    v4: Socket,
    v6: Socket,
}

impl Duplicator {
    pub fn open() -> io::Result<Self> {
        // IPPROTO_RAW implies the header is included, for IPv4 and IPv6 alike.
        let raw = Some(Protocol::from(libc::IPPROTO_RAW));
        Ok(Duplicator {
            v4: Socket::new(Domain::IPV4, Type::RAW, raw)?,
            v6: Socket::new(Domain::IPV6, Type::RAW, raw)?,
        })
    }

    pub fn send_copy(&self, packet: &[u8]) -> io::Result<()> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
        let (socket, dst) = match IpVersion::of_packet(packet).map_err(|_| invalid("not IP"))? {
            IpVersion::Ipv4 => {
                let p = Ipv4Packet::new_checked(packet).map_err(|_| invalid("bad IPv4 header"))?;
                (&self.v4, IpAddr::V4(p.dst_addr()))
            }
            IpVersion::Ipv6 => {
                let p = Ipv6Packet::new_checked(packet).map_err(|_| invalid("bad IPv6 header"))?;
                (&self.v6, IpAddr::V6(p.dst_addr()))
            }
        };
        socket.send_to(packet, &SockAddr::from(SocketAddr::new(dst, 0)))?;
        Ok(())
    }
}
