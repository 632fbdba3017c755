//! IP → MAC cache filled from ARP, NDP and the source of every received frame
//! (a reply goes back to the MAC its request came from, as the bare stack did).
use std::collections::HashMap;
use std::net::IpAddr;

use smoltcp::wire::EthernetAddress;

/// Bound on cached entries; the cache is cleared when full (state stays bounded).
const MAX_NEIGHBORS: usize = 4096;

#[derive(Debug, Default)]
pub struct Neighbors {
    table: HashMap<IpAddr, EthernetAddress>,
}

impl Neighbors {
    pub fn learn(&mut self, ip: IpAddr, mac: EthernetAddress) {
        if !mac.is_unicast() || ip.is_unspecified() || ip.is_multicast() {
            return;
        }
        if self.table.len() >= MAX_NEIGHBORS && !self.table.contains_key(&ip) {
            self.table.clear();
        }
        self.table.insert(ip, mac);
    }

    pub fn lookup(&self, ip: &IpAddr) -> Option<EthernetAddress> {
        self.table.get(ip).copied()
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}
