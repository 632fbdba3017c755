//! The in-memory stack the frame-path tests drive (stack/tests.rs, gso/tests.rs): a stack
//! serving a 320 KiB file from a temporary root, and frames from a client MAC to it.
use super::*;
#[allow(unused_imports)]
use leantcp::{Connection, Instant, Segment, Seq, State, TcpConfig};
#[allow(unused_imports)]
use smoltcp::phy::ChecksumCapabilities;
#[allow(unused_imports)]
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, Icmpv4Packet,
    Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, NdiscNeighborFlags,
    NdiscRepr, RawHardwareAddress,
};
#[allow(unused_imports)]
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub(crate) const CLIENT_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x99]);
pub(crate) const SERVER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);

pub(crate) struct Fixture {
    pub(crate) stack: Stack,
    pub(crate) base: PathBuf,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

pub(crate) fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 13 % 256) as u8).collect()
}

/// The fixture's stack settings, serving `root`.
pub(crate) fn config_with_root(root: PathBuf) -> StackConfig {
    StackConfig {
        mac: SERVER_MAC,
        addr4: Ipv4Addr::new(10, 0, 0, 1),
        prefix4: 24,
        addr6: "fd00::1".parse().unwrap(),
        prefix6: 64,
        gateway4: None,
        gateway6: None,
        port: 80,
        root,
        tcp: TcpConfig { time_wait: Duration::from_millis(100), ..TcpConfig::default() },
        max_connections: 8,
        max_half_open: 4,
        header_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(5),
        syn_cookies: SynCookieMode::Auto,
        ipv4_id: Ipv4Id::Zero,
    }
}

pub(crate) fn fixture(name: &str, tweak: impl FnOnce(&mut StackConfig)) -> Fixture {
    let base = std::env::temp_dir().join(format!("leanweb-stack-{name}-{}", std::process::id()));
    let root = base.join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("f320.bin"), pattern(320 * 1024)).unwrap();
    std::fs::write(root.join("small.txt"), b"hello\n").unwrap();
    std::fs::write(base.join("secret"), b"secret").unwrap();
    let mut config = config_with_root(root.canonicalize().unwrap());
    tweak(&mut config);
    let log = EventLog::to_writer(Box::new(std::io::sink()), 0);
    Fixture { stack: Stack::new(config, log, 42), base }
}

pub(crate) fn frame(ethertype: EthernetProtocol, payload: &[u8], dst: EthernetAddress) -> Vec<u8> {
    let repr = EthernetRepr { src_addr: CLIENT_MAC, dst_addr: dst, ethertype };
    let mut buf = vec![0u8; repr.buffer_len() + payload.len()];
    let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
    repr.emit(&mut f);
    f.payload_mut().copy_from_slice(payload);
    buf
}

pub(crate) fn tcp_frame(seg: &Segment) -> Vec<u8> {
    let et = if seg.src.is_ipv4() { EthernetProtocol::Ipv4 } else { EthernetProtocol::Ipv6 };
    frame(et, &seg.to_ip_bytes(64).unwrap(), SERVER_MAC)
}
