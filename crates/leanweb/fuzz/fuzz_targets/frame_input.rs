//! Fuzzes leanweb's frame-input path with the real loop's order (frame in, timers, app
//! poll, frames out). The input is a list of records `[len lo, len hi, clock advance]`
//! followed by `len & 0x7ff` bytes:
//! - bit 15 of len clear: the bytes are one raw Ethernet frame (any garbage); with bit 14
//!   set too, they are a read from the TAP device with IFF_VNET_HDR (`--gso on`), which
//!   loses its virtio_net_hdr first (`gso::strip_vnet_header`);
//! - bit 15 set: the bytes describe a TCP segment from one of four clients, sent with valid
//!   checksums so the fuzzer gets past the wire checks into the TCP state machine and HTTP:
//!   `[flags, seq delta (i8), ack delta (i8), window/256, options, payload…]` where seq is
//!   relative to the client's next sequence number and ack to the server's (learnt from the
//!   stack's own output, as a real peer would). Options: 0x01 MSS, 0x02 window scale
//!   (shift = options >> 4), 0x04 SACK-permitted, 0x08 timestamps (TSval = the clock in ms,
//!   TSecr = the server's last TSval); without window scale, (options >> 4) & 3 SACK blocks
//!   are taken from the payload's first two bytes each: left = server's next − 16·a,
//!   right = left + 16·b (so blocks land in, around and beyond the data in flight).
//!
//! Every input runs twice: against the `bare` profile with `--syn-cookies auto` (cookies once
//! 8 handshakes are half-open) and against `modern` (SACK, RACK-TLP, timestamps, CUBIC,
//! PSH at the end of data, per-connection IPv4 ids) with `--syn-cookies always`, so the
//! scoreboard, reassembly, option and cookie paths are fuzzed too. Clients learn the
//! server's ISN from its SYN-ACK, so ack delta 0 returns a valid cookie. After every turn
//! the stack's frames are planned into TAP writes as `--gso on` does (`gso::plan`), and
//! each write must segment back into exactly its frames (`gso::kernel_segments`).
#![no_main]
use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;
use std::time::Duration;

use leantcp::segment::Timestamp;
use leantcp::{Instant, Push, Segment, Seq, TcpConfig};
use leanweb::gso;
use leanweb::http::WallClock;
use leanweb::log::EventLog;
use leanweb::stack::{Ipv4Id, Stack, StackConfig, SynCookieMode};
use libfuzzer_sys::fuzz_target;
use smoltcp::wire::{EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr};

const SERVER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
const CLIENT_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x99]);

fn root() -> &'static std::path::PathBuf {
    static ROOT: OnceLock<std::path::PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        // A fixed place inside the (gitignored) fuzz target dir: reused by every run, never piling up in /tmp.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-root");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("index.html"), b"<p>fuzz</p>\n").unwrap();
        std::fs::write(dir.join("f.bin"), vec![7u8; 20_000]).unwrap();
        dir.canonicalize().unwrap()
    })
}

/// A fuzz-driven TCP peer: its own next sequence number and the server's, per client.
struct Client {
    addr: SocketAddr,
    next_seq: Seq,
    server_next: Seq,
    server_tsval: u32,
}

fn ethernet(payload: &[u8], v6: bool) -> Vec<u8> {
    let ethertype = if v6 { EthernetProtocol::Ipv6 } else { EthernetProtocol::Ipv4 };
    let repr = EthernetRepr { src_addr: CLIENT_MAC, dst_addr: SERVER_MAC, ethertype };
    let mut buf = vec![0u8; repr.buffer_len() + payload.len()];
    let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
    repr.emit(&mut frame);
    frame.payload_mut().copy_from_slice(payload);
    buf
}

fn segment_frame(clients: &mut [Client], bytes: &[u8], now: Instant) -> Option<Vec<u8>> {
    let [flags, seq_delta, ack_delta, window, options, payload @ ..] = bytes else { return None };
    let v6 = flags & 0x20 != 0;
    let index = (flags >> 6) as usize + if v6 { 4 } else { 0 };
    let client = &mut clients[index];
    let server: SocketAddr = if v6 { "[fd00::1]:80".parse().unwrap() } else { "10.0.0.1:80".parse().unwrap() };
    let mut payload = payload;
    let mut sack_blocks = Vec::new();
    if options & 0x02 == 0 {
        for _ in 0..(options >> 4) & 3 {
            let [a, b, tail @ ..] = payload else { break };
            let left = Seq(client.server_next.0.wrapping_sub(*a as u32 * 16));
            sack_blocks.push((left, left + *b as usize * 16));
            payload = tail;
        }
    }
    let seg = Segment {
        src: client.addr,
        dst: server,
        seq: Seq(client.next_seq.0.wrapping_add(*seq_delta as i8 as i32 as u32)),
        ack: (flags & 0x02 != 0).then(|| Seq(client.server_next.0.wrapping_add(*ack_delta as i8 as i32 as u32))),
        syn: flags & 0x01 != 0,
        fin: flags & 0x04 != 0,
        rst: flags & 0x08 != 0,
        psh: flags & 0x10 != 0,
        window: (*window as u16) << 8 | 0xff,
        mss: (options & 0x01 != 0).then_some(536 + (*options as u16) * 4),
        window_scale: (options & 0x02 != 0).then_some(options >> 4),
        sack_permitted: options & 0x04 != 0,
        sack_blocks,
        timestamp: (options & 0x08 != 0).then(|| Timestamp { tsval: (now.as_micros() / 1000) as u32, tsecr: client.server_tsval }),
        payload: payload.to_vec(),
    };
    client.next_seq = seg.seq + seg.seq_len();
    Some(ethernet(&seg.to_ip_bytes(64).ok()?, v6))
}

/// Learns each client's view of the server's sequence space from the stack's output.
fn observe(clients: &mut [Client], frames: Vec<Vec<u8>>) {
    for raw in frames {
        let Ok(frame) = EthernetFrame::new_checked(&raw[..]) else { continue };
        let Ok(seg) = Segment::parse_ip(frame.payload()) else { continue };
        if let Some(client) = clients.iter_mut().find(|c| c.addr == seg.dst) {
            let end = seg.seq + seg.seq_len();
            if end > client.server_next || seg.syn {
                client.server_next = end;
            }
            if let Some(ts) = seg.timestamp {
                client.server_tsval = ts.tsval;
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    run(data, TcpConfig::bare(), SynCookieMode::Auto);
    run(data, TcpConfig::modern(), SynCookieMode::Always);
});

fn run(data: &[u8], tcp: TcpConfig, syn_cookies: SynCookieMode) {
    let config = StackConfig {
        mac: SERVER_MAC,
        addr4: "10.0.0.1".parse().unwrap(),
        prefix4: 24,
        addr6: "fd00::1".parse().unwrap(),
        prefix6: 64,
        gateway4: Some("10.0.0.254".parse().unwrap()),
        gateway6: None,
        port: 80,
        root: root().clone(),
        tcp: TcpConfig { recv_buffer_bytes: 4096, ..tcp },
        max_connections: 16,
        max_half_open: 8,
        header_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(2),
        syn_cookies,
        ipv4_id: if tcp.push == Push::EndOfData { Ipv4Id::PerConnection } else { Ipv4Id::Zero },
    };
    let mut stack = Stack::new(config, EventLog::disabled(), 1);
    // a fixed wall clock, as leanweb's loop gives one: responses carry a Date
    stack.set_wall_clock(WallClock::new(Instant::ZERO, Duration::from_secs(1_700_000_000)));
    let mut clients: Vec<Client> = (0..8u16)
        .map(|i| {
            let ip: IpAddr = if i < 4 { "10.0.0.2".parse().unwrap() } else { "fd00::2".parse().unwrap() };
            Client { addr: SocketAddr::new(ip, 40000 + i), next_seq: Seq(1000 * (i as u32 + 1)), server_next: Seq(0), server_tsval: 0 }
        })
        .collect();
    let mut now = Instant::ZERO;
    let mut rest = data;
    while rest.len() >= 3 {
        let header = u16::from_le_bytes([rest[0], rest[1]]);
        let len = (header & 0x7ff) as usize;
        now = now + Duration::from_millis(rest[2] as u64 * 10);
        rest = &rest[3..];
        let chunk = &rest[..len.min(rest.len())];
        rest = &rest[chunk.len()..];
        if header & 0x8000 != 0 {
            if let Some(frame) = segment_frame(&mut clients, chunk, now) {
                stack.handle_frame(&frame, now);
            }
        } else if header & 0x4000 != 0 {
            if let Some(frame) = gso::strip_vnet_header(chunk) {
                stack.handle_frame(frame, now);
            }
        } else {
            stack.handle_frame(chunk, now);
        }
        stack.handle_timeouts(now);
        stack.poll(now);
        let frames = stack.take_frames();
        for write in gso::plan(&frames) {
            let wire = gso::kernel_segments(&write.to_bytes(&frames)).expect("a write the kernel takes");
            assert!(wire.iter().map(|w| &w[..]).eq(frames[write.frames.clone()].iter().map(|f| &f.bytes[..])), "super-frame {:?} is not its frames", write.frames);
        }
        observe(&mut clients, frames.into_iter().map(|f| f.bytes).collect());
    }
}
