//! SYN cookies (RFC 4987 §3.6): when the listener's half-open table is full, the SYN-ACK's
//! initial sequence number carries everything the listener needs to build the connection
//! from the client's ACK, and no state is kept per SYN.
//!
//! Layout of the 32-bit cookie (our ISN), low bits first:
//!
//! | bits  | field                                                                |
//! |-------|----------------------------------------------------------------------|
//! | 0     | timestamps (RFC 7323) were offered and are on in our config           |
//! | 1     | SACK-permitted (RFC 2018) was offered and is on in our config         |
//! | 2..6  | the peer's window-scale shift 0..14, or 15 when it offered none       |
//! | 6..9  | index into [`MSS_TABLE`]: the largest entry not above the peer's MSS  |
//! | 9..32 | 23 bits of SipHash-1-3 keyed with a secret, over the 4-tuple, the     |
//! |       | client's ISN, a coarse time counter and bits 0..9                     |
//!
//! The options ride in the ISN (not in TSval as Linux does, `net/ipv4/syncookies.c`), so
//! they survive when the peer offers no timestamps. The hash covers the option bits: a
//! tampered bit fails validation like a forged cookie. The counter ticks every
//! [`SynCookies::tick`]; a cookie is accepted for the counter it was made with and the one
//! before (so it lives between one and two ticks). Counters further back are "stale",
//! counted apart from forgeries.
use core::hash::Hasher;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use siphasher::sip::SipHasher13;

use crate::segment::{Segment, Timestamp};
use crate::seq::Seq;
use crate::time::Instant;

/// MSS values a cookie can name (3 bits). 536 and 1220 are the IPv4/IPv6 defaults without
/// an MSS option (RFC 9293 §3.7.1, RFC 8200 §8.3); the others are the usual Ethernet,
/// tunnel and jumbo values.
pub const MSS_TABLE: [u16; 8] = [64, 536, 1220, 1300, 1400, 1440, 1460, 8960];

const HASH_SHIFT: u32 = 9;
const NO_WINDOW_SCALE: u32 = 15;
/// How many counters back a failed cookie is checked to call it stale rather than forged.
const STALE_LOOKBACK: u64 = 4;

/// The options a cookie carries, as the listener will apply them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieOptions {
    pub mss: u16,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: bool,
}

/// Why a cookie ACK was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CookieError {
    /// Matches the key and tuple, but made more than two ticks ago.
    Stale,
    /// Does not match: a forged, guessed or tampered cookie, or another connection's ACK.
    Invalid,
}

#[derive(Debug, Clone)]
pub struct SynCookies {
    key: [u8; 16],
    tick: Duration,
}

fn default_mss(addr: &SocketAddr) -> u16 {
    if addr.is_ipv4() {
        536
    } else {
        1220
    }
}

impl SynCookies {
    /// `key` must be secret and random (from the OS at start); `tick` is the counter's period.
    pub fn new(key: [u8; 16], tick: Duration) -> Self {
        SynCookies { key, tick: tick.max(Duration::from_millis(1)) }
    }

    /// 64 s per counter, near Linux's (`tcp_cookie_time`, 60 s).
    pub fn with_key(key: [u8; 16]) -> Self {
        SynCookies::new(key, Duration::from_secs(64))
    }

    pub fn tick(&self) -> Duration {
        self.tick
    }

    /// The same key with another counter period.
    pub fn with_tick(&self, tick: Duration) -> Self {
        SynCookies::new(self.key, tick)
    }

    fn counter(&self, now: Instant) -> u64 {
        now.as_micros() / (self.tick.as_micros().max(1) as u64)
    }

    fn hash(&self, local: SocketAddr, remote: SocketAddr, client_isn: Seq, counter: u64, low: u32) -> u32 {
        let mut h = SipHasher13::new_with_key(&self.key);
        for addr in [local, remote] {
            match addr.ip() {
                IpAddr::V4(a) => h.write(&a.octets()),
                IpAddr::V6(a) => h.write(&a.octets()),
            }
            h.write_u16(addr.port());
        }
        h.write_u32(client_isn.0);
        h.write_u64(counter);
        h.write_u32(low);
        (h.finish() >> 41) as u32 // 23 bits
    }

    /// The options of a SYN as a cookie can carry them, given which options we use.
    pub fn options_for(syn: &Segment, sack_on: bool, timestamps_on: bool) -> CookieOptions {
        let peer_mss = syn.mss.unwrap_or_else(|| default_mss(&syn.src));
        let mss = MSS_TABLE.iter().rev().copied().find(|m| *m <= peer_mss).unwrap_or(MSS_TABLE[0]);
        CookieOptions {
            mss,
            window_scale: syn.window_scale.map(|s| s.min(14)),
            sack_permitted: sack_on && syn.sack_permitted,
            timestamps: timestamps_on && syn.timestamp.is_some(),
        }
    }

    fn encode_options(options: &CookieOptions) -> u32 {
        let mss_index = MSS_TABLE.iter().rposition(|m| *m <= options.mss).unwrap_or(0) as u32;
        let ws = options.window_scale.map_or(NO_WINDOW_SCALE, |s| s.min(14) as u32);
        (mss_index << 6) | (ws << 2) | ((options.sack_permitted as u32) << 1) | options.timestamps as u32
    }

    fn decode_options(low: u32) -> CookieOptions {
        let ws = (low >> 2) & 0xf;
        CookieOptions {
            mss: MSS_TABLE[((low >> 6) & 0x7) as usize],
            window_scale: (ws != NO_WINDOW_SCALE).then_some(ws.min(14) as u8),
            sack_permitted: low & 0b10 != 0,
            timestamps: low & 1 != 0,
        }
    }

    /// The ISN for a SYN-ACK answering `syn` (which arrived at `syn.dst` from `syn.src`).
    pub fn make(&self, syn: &Segment, options: &CookieOptions, now: Instant) -> Seq {
        let low = Self::encode_options(options);
        let hash = self.hash(syn.dst, syn.src, syn.seq, self.counter(now), low);
        Seq((hash << HASH_SHIFT) | low)
    }

    /// Checks the ACK completing a cookie handshake: its `ack - 1` must be a cookie made
    /// for this 4-tuple and the client ISN `seq - 1` during this tick or the one before.
    pub fn check(&self, ack: &Segment, now: Instant) -> Result<CookieOptions, CookieError> {
        let Some(ack_no) = ack.ack else { return Err(CookieError::Invalid) };
        if ack.syn || ack.rst {
            return Err(CookieError::Invalid);
        }
        let cookie = ack_no.0.wrapping_sub(1);
        let client_isn = Seq(ack.seq.0.wrapping_sub(1));
        let low = cookie & ((1 << HASH_SHIFT) - 1);
        if (low >> 2) & 0xf != NO_WINDOW_SCALE && (low >> 2) & 0xf > 14 {
            return Err(CookieError::Invalid);
        }
        let hash = cookie >> HASH_SHIFT;
        let counter = self.counter(now);
        for age in 0..=1 + STALE_LOOKBACK {
            let Some(c) = counter.checked_sub(age) else { break };
            if self.hash(ack.dst, ack.src, client_isn, c, low) == hash {
                return if age <= 1 { Ok(Self::decode_options(low)) } else { Err(CookieError::Stale) };
            }
        }
        Err(CookieError::Invalid)
    }

    /// The SYN the cookie stands for, rebuilt from the ACK: what [`crate::Connection::accept`]
    /// would have seen, with the MSS rounded down to the table and TSval from the ACK.
    pub fn rebuilt_syn(ack: &Segment, options: &CookieOptions) -> Segment {
        Segment {
            src: ack.src,
            dst: ack.dst,
            seq: Seq(ack.seq.0.wrapping_sub(1)),
            ack: None,
            syn: true,
            fin: false,
            rst: false,
            psh: false,
            window: ack.window,
            mss: Some(options.mss),
            window_scale: options.window_scale,
            sack_permitted: options.sack_permitted,
            timestamp: match (options.timestamps, ack.timestamp) {
                (true, Some(ts)) => Some(Timestamp { tsval: ts.tsval, tsecr: 0 }),
                _ => None,
            },
            sack_blocks: Vec::new(),
            payload: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syn(mss: Option<u16>, ws: Option<u8>, sack: bool, ts: bool) -> Segment {
        Segment {
            src: "10.0.0.99:40000".parse().unwrap(),
            dst: "10.0.0.1:80".parse().unwrap(),
            seq: Seq(0xdead_beef),
            ack: None,
            syn: true,
            fin: false,
            rst: false,
            psh: false,
            window: 64240,
            mss,
            window_scale: ws,
            sack_permitted: sack,
            sack_blocks: Vec::new(),
            timestamp: ts.then_some(Timestamp { tsval: 777, tsecr: 0 }),
            payload: Vec::new(),
        }
    }

    fn ack_for(syn: &Segment, cookie: Seq) -> Segment {
        Segment {
            seq: syn.seq + 1,
            ack: Some(cookie + 1),
            syn: false,
            mss: None,
            window_scale: None,
            sack_permitted: false,
            timestamp: syn.timestamp.map(|t| Timestamp { tsval: t.tsval + 1, tsecr: 5 }),
            ..syn.clone()
        }
    }

    fn cookies() -> SynCookies {
        SynCookies::new([7; 16], Duration::from_secs(64))
    }

    #[test]
    fn round_trip_carries_every_option_combination() {
        let c = cookies();
        let now = Instant::ZERO + Duration::from_secs(100);
        for mss in [None, Some(100), Some(536), Some(1220), Some(1460), Some(1459), Some(9000), Some(20)] {
            for ws in [None, Some(0), Some(7), Some(14), Some(20)] {
                for sack in [false, true] {
                    for ts in [false, true] {
                        let s = syn(mss, ws, sack, ts);
                        let opts = SynCookies::options_for(&s, true, true);
                        let cookie = c.make(&s, &opts, now);
                        let back = c.check(&ack_for(&s, cookie), now).expect("valid cookie");
                        assert_eq!(back, opts);
                        assert_eq!(back.window_scale, ws.map(|w| w.min(14)));
                        assert_eq!((back.sack_permitted, back.timestamps), (sack, ts));
                        let peer = mss.unwrap_or(536);
                        assert!(back.mss <= peer.max(64), "mss {} rounds down from {peer}", back.mss);
                    }
                }
            }
        }
        // Options we have switched off are not carried even if offered.
        let s = syn(Some(1460), Some(7), true, true);
        let opts = SynCookies::options_for(&s, false, false);
        assert!(!opts.sack_permitted && !opts.timestamps);
        assert_eq!(SynCookies::options_for(&s, true, true).mss, 1460);
        let mut v6 = s.clone();
        v6.src = "[fd00::99]:40000".parse().unwrap();
        v6.dst = "[fd00::1]:80".parse().unwrap();
        v6.mss = None;
        assert_eq!(SynCookies::options_for(&v6, true, true).mss, 1220);
    }

    #[test]
    fn tampering_with_any_bit_or_the_tuple_fails() {
        let c = cookies();
        let now = Instant::ZERO + Duration::from_secs(10);
        let s = syn(Some(1460), Some(7), true, true);
        let opts = SynCookies::options_for(&s, true, true);
        let cookie = c.make(&s, &opts, now);
        let ack = ack_for(&s, cookie);
        assert!(c.check(&ack, now).is_ok());
        let mut accepted = 0;
        for bit in 0..32 {
            let mut bad = ack.clone();
            bad.ack = Some(Seq(ack.ack.unwrap().0 ^ (1 << bit)));
            if c.check(&bad, now).is_ok() {
                accepted += 1;
            }
        }
        assert_eq!(accepted, 0, "every flipped bit is caught (hash covers the option bits)");
        let mut other_port = ack.clone();
        other_port.src.set_port(40001);
        assert_eq!(c.check(&other_port, now), Err(CookieError::Invalid));
        let mut other_isn = ack.clone();
        other_isn.seq = other_isn.seq + 1;
        assert_eq!(c.check(&other_isn, now), Err(CookieError::Invalid));
        let other_key = SynCookies::new([8; 16], Duration::from_secs(64));
        assert_eq!(other_key.check(&ack, now), Err(CookieError::Invalid));
        let mut syn_ack = ack.clone();
        syn_ack.syn = true;
        assert_eq!(c.check(&syn_ack, now), Err(CookieError::Invalid));
    }

    #[test]
    fn cookies_expire_after_two_ticks() {
        let c = SynCookies::new([1; 16], Duration::from_secs(64));
        let made = Instant::ZERO + Duration::from_secs(64 * 10 + 63);
        let s = syn(None, None, false, false);
        let cookie = c.make(&s, &SynCookies::options_for(&s, true, true), made);
        let ack = ack_for(&s, cookie);
        assert!(c.check(&ack, made + Duration::from_secs(1)).is_ok(), "next tick");
        assert!(c.check(&ack, made + Duration::from_secs(64)).is_ok(), "still the previous tick");
        assert_eq!(c.check(&ack, made + Duration::from_secs(65)), Err(CookieError::Stale));
        assert_eq!(c.check(&ack, made + Duration::from_secs(64 * 4)), Err(CookieError::Stale));
        assert_eq!(c.check(&ack, made + Duration::from_secs(64 * 7)), Err(CookieError::Invalid));
    }

    #[test]
    fn random_acks_are_almost_never_accepted() {
        let c = cookies();
        let now = Instant::ZERO + Duration::from_secs(1000);
        let s = syn(Some(1460), None, false, false);
        let mut accepted = 0;
        let mut x: u32 = 12345;
        for _ in 0..200_000 {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let ack = ack_for(&s, Seq(x));
            accepted += c.check(&ack, now).is_ok() as u32;
        }
        // 23 hash bits and two counters: expected 200000 * 2 / 2^23 ≈ 0.05.
        assert!(accepted <= 2, "{accepted} random ACKs accepted");
    }

    /// A stateless handshake between two leantcp endpoints, then data both ways: the
    /// connection rebuilt from the cookie uses what the SYN negotiated.
    #[test]
    fn cookie_handshake_builds_a_working_connection() {
        use crate::{Connection, State, TcpConfig};
        for (config, v6) in [(TcpConfig::modern(), false), (TcpConfig::bare(), true), (TcpConfig::modern(), true)] {
            let c = cookies();
            let (local, remote): (SocketAddr, SocketAddr) = if v6 {
                ("[fd00::99]:40000".parse().unwrap(), "[fd00::1]:80".parse().unwrap())
            } else {
                ("10.0.0.99:40000".parse().unwrap(), "10.0.0.1:80".parse().unwrap())
            };
            let mut now = Instant::ZERO + Duration::from_secs(5);
            let mut client = Connection::connect(local, remote, config, Seq(9));
            let syn = client.poll_transmit(now).unwrap();
            let opts = SynCookies::options_for(&syn, config.sack, config.timestamps);
            let iss = c.make(&syn, &opts, now);
            let syn_ack = Connection::cookie_syn_ack(&syn, &opts, config, iss, now).unwrap();
            assert_eq!(syn_ack.seq, iss);
            assert!(syn_ack.syn && syn_ack.ack == Some(syn.seq + 1));
            now = now + Duration::from_millis(10);
            client.handle_segment(&syn_ack, now);
            assert_eq!(client.state(), State::Established);
            client.send(b"GET / HTTP/1.1\r\n\r\n");
            let ack = client.poll_transmit(now).unwrap();
            let back = c.check(&ack, now).expect("valid cookie");
            let mut server =
                Connection::accept_cookie(&ack, &back, config, Seq(ack.ack.unwrap().0.wrapping_sub(1)), now)
                    .expect("established");
            assert_eq!(server.state(), State::Established);
            assert_eq!(server.sack_in_use(), config.sack);
            assert_eq!(server.timestamps_in_use(), config.timestamps);
            let mut got = server.recv(usize::MAX);
            while let Some(seg) = client.poll_transmit(now) {
                server.handle_segment(&seg, now);
            }
            got.extend(server.recv(usize::MAX));
            assert_eq!(got, b"GET / HTTP/1.1\r\n\r\n");
            let body = vec![b'x'; 20_000];
            assert_eq!(server.send(&body), body.len());
            let mut received = Vec::new();
            for _ in 0..200 {
                while let Some(seg) = server.poll_transmit(now) {
                    client.handle_segment(&seg, now);
                }
                while let Some(seg) = client.poll_transmit(now) {
                    server.handle_segment(&seg, now);
                }
                received.extend(client.recv(usize::MAX));
                now = now + Duration::from_millis(5);
                if received.len() == body.len() {
                    break;
                }
            }
            assert_eq!(received, body);
            // The client advertises 64 KiB as 16384 << 2: read unscaled it would be at most 16384.
            assert!(server.peer_window() > 20_000, "window scale applied: {}", server.peer_window());
        }
    }
}
