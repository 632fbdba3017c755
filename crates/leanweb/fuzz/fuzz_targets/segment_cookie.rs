//! Fuzzes leantcp's segment parser and the SYN-cookie path (RFC 4987 §3.6) without the
//! stack around them: any bytes are parsed as an IPv4 or IPv6 packet (`Segment::parse_ip`);
//! a parsed segment is checked as a cookie ACK (must not panic, must not be accepted unless
//! the cookie is one we made), and, treated as a SYN, gets a cookie whose ACK must validate
//! to exactly the options the SYN offered and build an ESTABLISHED connection (also when the
//! ACK carries the segment's payload).
#![no_main]
use std::time::Duration;

use leantcp::segment::Timestamp;
use leantcp::{Connection, Instant, Segment, Seq, State, SynCookies, TcpConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&clock, packet)) = data.split_first() else { return };
    let Ok(seg) = Segment::parse_ip(packet) else { return };
    let cookies = SynCookies::new([0x5a; 16], Duration::from_secs(64));
    let now = Instant::ZERO + Duration::from_secs(clock as u64 * 16);
    // A parsed segment of arbitrary content as a cookie ACK: no panic; accepted only by luck
    // of 23 hash bits, and then it must still build or refuse cleanly.
    if let Ok(options) = cookies.check(&seg, now) {
        let iss = Seq(seg.ack.map_or(0, |a| a.0.wrapping_sub(1)));
        let _ = Connection::accept_cookie(&seg, &options, TcpConfig::modern(), iss, now);
    }
    // The same segment as a SYN: the full stateless handshake.
    let syn = Segment { syn: true, ack: None, rst: false, fin: false, payload: Vec::new(), sack_blocks: Vec::new(), ..seg.clone() };
    for config in [TcpConfig::bare(), TcpConfig::modern()] {
        let options = SynCookies::options_for(&syn, config.sack, config.timestamps);
        let iss = cookies.make(&syn, &options, now);
        let syn_ack = Connection::cookie_syn_ack(&syn, &options, config, iss, now).expect("a SYN gets a SYN-ACK");
        assert_eq!((syn_ack.seq, syn_ack.ack), (iss, Some(syn.seq + 1)));
        let ack = Segment {
            src: syn.src,
            dst: syn.dst,
            seq: syn.seq + 1,
            ack: Some(iss + 1),
            syn: false,
            fin: false,
            rst: false,
            psh: !seg.payload.is_empty(),
            window: seg.window,
            mss: None,
            window_scale: None,
            sack_permitted: false,
            sack_blocks: Vec::new(),
            timestamp: syn.timestamp.map(|t| Timestamp { tsval: t.tsval.wrapping_add(1), tsecr: syn_ack.timestamp.map_or(0, |s| s.tsval) }),
            payload: seg.payload.clone(),
        };
        let later = now + Duration::from_secs(clock as u64 % 64);
        let back = cookies.check(&ack, later).expect("our own cookie validates within its tick");
        assert_eq!(back, options);
        let mut conn = Connection::accept_cookie(&ack, &back, config, iss, later).expect("the cookie ACK establishes");
        assert_eq!(conn.state(), State::Established);
        let received = conn.recv(usize::MAX);
        assert!(received.len() <= seg.payload.len());
        while conn.poll_transmit(later).is_some() {}
    }
});
