//! In-memory tests of the frame path: a leantcp client talks to the stack through
//! Ethernet frames, exactly as a peer on the TAP link would.
use super::interface::{icmpv6_packet, multicast_mac, solicited_node};
#[allow(unused_imports)]
use super::segment_lines::{AckLine, RttSampleLine, TxLine};
use super::*;
use crate::http;
use crate::log::EventLog;
use leantcp::RetransmitKind;
#[allow(unused_imports)]
use leantcp::{Connection, Instant, Segment, Seq, State, TcpConfig};
use serde_json::json;
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
use std::time::Duration;

use super::test_fixture::*;

fn segments_out<A: Application>(stack: &mut Stack<A>) -> Vec<Segment> {
    stack
        .take_output()
        .iter()
        .filter_map(|f| {
            let frame = EthernetFrame::new_checked(&f[..]).ok()?;
            assert_eq!(frame.dst_addr(), CLIENT_MAC, "replies go to the client's MAC");
            Segment::parse_ip(frame.payload()).ok()
        })
        .collect()
}

/// Runs a client connection against the stack until `done` or 600 virtual seconds.
fn exchange<A: Application>(stack: &mut Stack<A>, client: &mut Connection, request: &[u8], received: &mut Vec<u8>) {
    let mut now = Instant::ZERO;
    let mut sent_request = false;
    for _ in 0..200_000 {
        if client.state() == State::Established && !sent_request {
            assert_eq!(client.send(request), request.len());
            sent_request = true;
        }
        while let Some(seg) = client.poll_transmit(now) {
            stack.handle_frame(&tcp_frame(&seg), now);
        }
        stack.handle_timeouts(now);
        stack.poll(now);
        let replies = segments_out(stack);
        for seg in &replies {
            client.handle_segment(seg, now);
        }
        received.extend(client.recv(usize::MAX));
        if client.peer_finished() && client.state() == State::CloseWait {
            client.close(now);
        }
        if client.is_closed() || client.state() == State::TimeWait {
            return;
        }
        if replies.is_empty() && !client.wants_transmit() {
            let next = [client.poll_timeout(), stack.poll_timeout()].into_iter().flatten().min();
            now = match next {
                Some(t) if t > now => t,
                _ => now + Duration::from_millis(1),
            };
        }
    }
    panic!("exchange did not finish; state {:?}", client.state());
}

fn client(v6: bool) -> Connection {
    let (local, remote): (SocketAddr, SocketAddr) = if v6 {
        ("[fd00::99]:40000".parse().unwrap(), "[fd00::1]:80".parse().unwrap())
    } else {
        ("10.0.0.99:40000".parse().unwrap(), "10.0.0.1:80".parse().unwrap())
    };
    Connection::connect(local, remote, TcpConfig::default(), Seq(5))
}

fn body_of(response: &[u8]) -> (&str, &[u8]) {
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
    (std::str::from_utf8(&response[..split]).unwrap(), &response[split + 4..])
}

#[test]
fn get_over_ipv4_and_ipv6_is_byte_identical() {
    for v6 in [false, true] {
        let mut fx = fixture(if v6 { "get6" } else { "get4" }, |_| {});
        let mut c = client(v6);
        let mut got = Vec::new();
        exchange(&mut fx.stack, &mut c, b"GET /f320.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &mut got);
        let (head, body) = body_of(&got);
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(head.contains("Content-Length: 327680"));
        assert_eq!(body, &pattern(320 * 1024)[..]);
    }
}

#[test]
fn keep_alive_serves_pipelined_requests_then_head_and_close() {
    let mut fx = fixture("keep", |_| {});
    let mut c = client(false);
    let mut got = Vec::new();
    let req: &[u8] = concat!(
        "GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\nHEAD /small.txt HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .as_bytes();
    exchange(&mut fx.stack, &mut c, req, &mut got);
    let text = String::from_utf8(got).unwrap();
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 3, "{text}");
    assert_eq!(text.matches("hello\n").count(), 2, "HEAD has no body: {text}");
    assert_eq!(text.matches("Connection: keep-alive").count(), 2);
    assert!(text.ends_with("Connection: close\r\n\r\nhello\n"));
}

/// 300 pipelined requests (about 11 KiB, more than one maximal head) are all answered:
/// the stack reads at most one head at a time and leaves the rest in the TCP buffer.
#[test]
fn pipelined_requests_beyond_one_head_are_all_answered() {
    let mut fx = fixture("pipe", |_| {});
    let mut c = client(true);
    let mut got = Vec::new();
    let mut req = b"HEAD /small.txt HTTP/1.1\r\nHost: pipelined\r\n\r\n".repeat(299);
    req.extend_from_slice(b"GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(req.len() > http::MAX_HEAD_BYTES);
    exchange(&mut fx.stack, &mut c, &req, &mut got);
    let text = String::from_utf8(got).unwrap();
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 300);
    assert!(text.ends_with("Connection: close\r\n\r\nhello\n"));
    assert_eq!(fx.stack.counters.requests, 300);
}

/// RFC 9112 §3.2 and §3.2.2, RFC 9110 §6.6.1 through the whole stack: with a wall clock
/// every response has a `Date`; an absolute-form target is served; an HTTP/1.1 request
/// without Host, or any with two, is 400 and closes.
#[test]
fn date_host_and_absolute_form_over_the_wire() {
    let cases: [(&[u8], &str); 4] = [
        (b"GET http://10.0.0.1/small.txt HTTP/1.1\r\nHost: 10.0.0.1\r\nConnection: close\r\n\r\n", "200"),
        (b"GET /small.txt HTTP/1.1\r\n\r\n", "400"),
        (b"GET /small.txt HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", "400"),
        (b"GET /small.txt HTTP/1.0\r\n\r\n", "200"),
    ];
    for (i, (req, status)) in cases.iter().enumerate() {
        let mut fx = fixture(&format!("rfc{i}"), |_| {});
        fx.stack.set_wall_clock(WallClock::new(Instant::ZERO, Duration::from_secs(1_700_000_000)));
        let mut c = client(i % 2 == 1);
        let mut got = Vec::new();
        exchange(&mut fx.stack, &mut c, req, &mut got);
        let (head, body) = body_of(&got);
        assert!(head.starts_with(&format!("HTTP/1.1 {status}")), "{req:?}: {head}");
        assert!(head.contains("\r\nDate: Tue, 14 Nov 2023 22:13:"), "{head}");
        assert!(head.contains("Connection: close"), "{head}");
        if *status == "200" {
            assert_eq!(body, b"hello\n");
        }
    }
    // without a clock (the default) no Date is made up
    let mut fx = fixture("noclock", |_| {});
    let mut got = Vec::new();
    exchange(
        &mut fx.stack,
        &mut client(false),
        b"GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        &mut got,
    );
    assert!(!body_of(&got).0.contains("Date:"));
}

#[test]
fn bad_requests_get_status_codes_and_nothing_outside_root() {
    let cases: [(&[u8], &str); 8] = [
        (b"GET /../secret HTTP/1.1\r\nHost: x\r\n\r\n", "400"),
        (b"GET /%2e%2e/secret HTTP/1.1\r\nHost: x\r\n\r\n", "400"),
        (b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", "404"),
        (b"DELETE /small.txt HTTP/1.1\r\nHost: x\r\n\r\n", "405"),
        (b"POST /small.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "405"),
        (b"BREW /small.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "501"),
        (b"garbage\r\n\r\n", "400"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "404"),
    ];
    for (i, (req, status)) in cases.iter().enumerate() {
        let mut fx = fixture(&format!("bad{i}"), |_| {});
        let mut c = client(i % 2 == 1);
        let mut got = Vec::new();
        exchange(&mut fx.stack, &mut c, req, &mut got);
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with(&format!("HTTP/1.1 {status}")), "{req:?}: {text}");
        // RFC 9110 §15.5.6: a 405 lists the methods the target has
        assert_eq!(text.contains("\r\nAllow: GET, HEAD\r\n"), *status == "405", "{req:?}: {text}");
        assert!(!text.contains("secret"));
    }
    let mut fx = fixture("long", |_| {});
    let mut c = client(false);
    let mut got = Vec::new();
    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(5000));
    exchange(&mut fx.stack, &mut c, long.as_bytes(), &mut got);
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 414"));
}

#[test]
fn answers_arp_neighbour_solicitation_and_pings() {
    let mut fx = fixture("arp", |_| {});
    let stack = &mut fx.stack;
    let arp = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr: CLIENT_MAC,
        source_protocol_addr: Ipv4Addr::new(10, 0, 0, 99),
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
    };
    let mut buf = vec![0u8; arp.buffer_len()];
    arp.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
    stack.handle_frame(&frame(EthernetProtocol::Arp, &buf, EthernetAddress::BROADCAST), Instant::ZERO);
    let out = stack.take_output();
    assert_eq!(out.len(), 1);
    let reply = EthernetFrame::new_checked(&out[0][..]).unwrap();
    let parsed = ArpRepr::parse(&ArpPacket::new_checked(reply.payload()).unwrap()).unwrap();
    let ArpRepr::EthernetIpv4 { operation, source_hardware_addr, .. } = parsed else { panic!("{parsed:?}") };
    assert_eq!((operation, source_hardware_addr), (ArpOperation::Reply, SERVER_MAC));

    // Neighbour solicitation for fd00::1 to its solicited-node group.
    let src: Ipv6Addr = "fd00::99".parse().unwrap();
    let target: Ipv6Addr = "fd00::1".parse().unwrap();
    let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
        target_addr: target,
        lladdr: Some(RawHardwareAddress::from(CLIENT_MAC)),
    });
    let packet = icmpv6_packet(src, solicited_node(target), &ns, 255);
    stack.handle_frame(&frame(EthernetProtocol::Ipv6, &packet, multicast_mac(solicited_node(target))), Instant::ZERO);
    let out = stack.take_output();
    assert_eq!(out.len(), 1);
    let reply = EthernetFrame::new_checked(&out[0][..]).unwrap();
    let ip = Ipv6Packet::new_checked(reply.payload()).unwrap();
    let icmp = Icmpv6Repr::parse(
        &ip.src_addr(),
        &ip.dst_addr(),
        &Icmpv6Packet::new_checked(ip.payload()).unwrap(),
        &ChecksumCapabilities::default(),
    )
    .unwrap();
    assert!(matches!(icmp, Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { target_addr, .. }) if target_addr == target));

    // Echo over IPv6 (the neighbour is known now) and IPv4.
    let echo = Icmpv6Repr::EchoRequest { ident: 7, seq_no: 1, data: b"ping" };
    let packet = icmpv6_packet(src, target, &echo, 64);
    stack.handle_frame(&frame(EthernetProtocol::Ipv6, &packet, SERVER_MAC), Instant::ZERO);
    let echo4 = Icmpv4Repr::EchoRequest { ident: 7, seq_no: 1, data: b"ping" };
    let ip4 = Ipv4Repr {
        src_addr: Ipv4Addr::new(10, 0, 0, 99),
        dst_addr: Ipv4Addr::new(10, 0, 0, 1),
        next_header: IpProtocol::Icmp,
        payload_len: echo4.buffer_len(),
        hop_limit: 64,
    };
    let mut buf = vec![0u8; ip4.buffer_len() + echo4.buffer_len()];
    ip4.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), &ChecksumCapabilities::default());
    echo4.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[20..]), &ChecksumCapabilities::default());
    stack.handle_frame(&frame(EthernetProtocol::Ipv4, &buf, SERVER_MAC), Instant::ZERO);
    assert_eq!(stack.take_output().len(), 2);
    assert_eq!(stack.counters.echo_replies, 2);
}

#[test]
fn garbage_frames_are_counted_not_fatal_and_strays_get_rst() {
    let mut fx = fixture("garbage", |_| {});
    let stack = &mut fx.stack;
    stack.handle_frame(&[1, 2, 3], Instant::ZERO);
    stack.handle_frame(&frame(EthernetProtocol::Ipv4, &[0x45, 0, 0, 5, 1, 2], SERVER_MAC), Instant::ZERO);
    stack.handle_frame(&frame(EthernetProtocol::Ipv6, &[0x60; 50], SERVER_MAC), Instant::ZERO);
    assert_eq!(stack.counters.malformed, 3);
    // An ACK for no connection gets a RST.
    let mut c = client(false);
    let mut seg = c.poll_transmit(Instant::ZERO).unwrap();
    seg.syn = false;
    seg.ack = Some(Seq(1234));
    stack.handle_frame(&tcp_frame(&seg), Instant::ZERO);
    let out = segments_out(stack);
    assert!(out.len() == 1 && out[0].rst && out[0].seq == Seq(1234));
}

#[test]
fn half_open_cap_drops_syn_floods_and_slowloris_is_cut() {
    let mut fx = fixture("caps", |c| {
        c.max_half_open = 4;
        c.syn_cookies = SynCookieMode::Never;
    });
    let stack = &mut fx.stack;
    for port in 0..10u16 {
        let local: SocketAddr = format!("10.0.0.99:{}", 1000 + port).parse().unwrap();
        let mut c = Connection::connect(local, "10.0.0.1:80".parse().unwrap(), TcpConfig::default(), Seq(1));
        let syn = c.poll_transmit(Instant::ZERO).unwrap();
        stack.handle_frame(&tcp_frame(&syn), Instant::ZERO);
    }
    assert_eq!(stack.session_count(), 4);
    assert_eq!(stack.counters.syn_dropped_half_open_cap, 6);
    // The half-open ones time out and free their slots.
    let mut now = Instant::ZERO;
    for _ in 0..200 {
        now = now + Duration::from_millis(500);
        stack.handle_timeouts(now);
        stack.poll(now);
    }
    assert_eq!(stack.session_count(), 0);

    // Slowloris: a connection that never finishes its request head is aborted.
    let mut c = client(false);
    let start = now;
    let mut sent = false;
    for _ in 0..100 {
        while let Some(seg) = c.poll_transmit(now) {
            stack.handle_frame(&tcp_frame(&seg), now);
        }
        stack.handle_timeouts(now);
        stack.poll(now);
        for seg in segments_out(stack) {
            c.handle_segment(&seg, now);
        }
        if c.state() == State::Established && !sent {
            c.send(b"GET / HTTP/1.1\r\nX-Slow: ");
            sent = true;
        }
        now = now + Duration::from_millis(100);
    }
    assert!(now.saturating_since(start) > Duration::from_secs(2));
    assert_eq!(c.state(), State::Closed, "slow client was reset");
    assert!(stack.counters.slow_or_idle_closed >= 1);
}

#[test]
fn announce_sends_gratuitous_arp_and_unsolicited_adverts() {
    let mut fx = fixture("announce", |_| {});
    fx.stack.announce();
    let out = fx.stack.take_output();
    assert_eq!(out.len(), 3, "one ARP, one NA per IPv6 address");
    let arp = EthernetFrame::new_checked(&out[0][..]).unwrap();
    assert!(arp.dst_addr().is_broadcast());
    let parsed = ArpRepr::parse(&ArpPacket::new_checked(arp.payload()).unwrap()).unwrap();
    let ArpRepr::EthernetIpv4 { source_hardware_addr, source_protocol_addr, target_protocol_addr, .. } = parsed else {
        panic!()
    };
    assert_eq!(
        (source_hardware_addr, source_protocol_addr, target_protocol_addr),
        (SERVER_MAC, Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 1))
    );
    let mut targets = Vec::new();
    for raw in &out[1..] {
        let frame = EthernetFrame::new_checked(&raw[..]).unwrap();
        let ip = Ipv6Packet::new_checked(frame.payload()).unwrap();
        assert_eq!(ip.hop_limit(), 255, "NDP needs hop limit 255");
        let icmp = Icmpv6Repr::parse(
            &ip.src_addr(),
            &ip.dst_addr(),
            &Icmpv6Packet::new_checked(ip.payload()).unwrap(),
            &ChecksumCapabilities::default(),
        )
        .unwrap();
        let Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, target_addr, lladdr: Some(lladdr) }) = icmp else {
            panic!("{icmp:?}")
        };
        assert!(flags.contains(NdiscNeighborFlags::OVERRIDE) && !flags.contains(NdiscNeighborFlags::SOLICITED));
        assert_eq!(lladdr.as_bytes(), SERVER_MAC.as_bytes());
        targets.push(target_addr);
    }
    assert_eq!(targets, vec!["fd00::1".parse::<Ipv6Addr>().unwrap(), fx.stack.link_local6()]);
}

/// One turn of the loop between a client and the stack at `now`.
fn turn(stack: &mut Stack, c: &mut Connection, now: Instant) {
    while let Some(seg) = c.poll_transmit(now) {
        stack.handle_frame(&tcp_frame(&seg), now);
    }
    stack.handle_timeouts(now);
    stack.poll(now);
    for seg in segments_out(stack) {
        c.handle_segment(&seg, now);
    }
}

#[test]
fn connection_cap_resets_extra_syns_and_idle_keep_alive_is_closed() {
    let mut fx = fixture("conncap", |c| c.max_connections = 2);
    let stack = &mut fx.stack;
    let now = Instant::ZERO;
    let mut clients: Vec<Connection> = (0..2u16)
        .map(|i| {
            let local: SocketAddr = format!("10.0.0.99:{}", 2000 + i).parse().unwrap();
            Connection::connect(local, "10.0.0.1:80".parse().unwrap(), TcpConfig::default(), Seq(1))
        })
        .collect();
    for c in clients.iter_mut() {
        for _ in 0..3 {
            turn(stack, c, now);
        }
        assert_eq!(c.state(), State::Established);
    }
    let mut third = Connection::connect(
        "10.0.0.99:2002".parse().unwrap(),
        "10.0.0.1:80".parse().unwrap(),
        TcpConfig::default(),
        Seq(1),
    );
    turn(stack, &mut third, now);
    assert_eq!(third.state(), State::Closed, "refused with a RST");
    assert_eq!(stack.counters.syn_refused_connection_cap, 1);

    // A keep-alive client gets its answer, then is closed (FIN, not RST) after the idle timeout (5 s).
    let c = &mut clients[0];
    assert_eq!(c.send(b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n"), 36);
    let mut got = Vec::new();
    let mut t = now;
    while t < Instant::from_millis(4_000) {
        turn(stack, c, t);
        got.extend(c.recv(usize::MAX));
        t = t + Duration::from_millis(100);
    }
    assert!(String::from_utf8_lossy(&got).ends_with("hello\n"));
    assert_eq!(c.state(), State::Established, "still open before the idle timeout");
    while t < Instant::from_millis(7_000) {
        turn(stack, c, t);
        t = t + Duration::from_millis(100);
    }
    assert!(c.peer_finished() && c.state() == State::CloseWait, "server closed the idle connection: {:?}", c.state());
    assert!(stack.counters.slow_or_idle_closed >= 1);
}

#[test]
fn oversized_head_is_431_and_symlinks_out_of_root_are_404() {
    let mut fx = fixture("431", |_| {});
    std::os::unix::fs::symlink(fx.base.join("secret"), fx.base.join("www").join("link")).unwrap();
    let mut c = client(true);
    let mut got = Vec::new();
    let head = format!("GET /small.txt HTTP/1.1\r\n{}\r\n", "X-Filler: aaaaaaaaaaaaaaaa\r\n".repeat(400));
    exchange(&mut fx.stack, &mut c, head.as_bytes(), &mut got);
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 431"));
    let mut c = client(false);
    let mut got = Vec::new();
    exchange(&mut fx.stack, &mut c, b"GET /link HTTP/1.1\r\nHost: x\r\n\r\n", &mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 404") && !text.contains("secret"), "{text}");
}

/// A log sink the test can read back.
#[derive(Clone, Default)]
struct SharedLog(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn log_has_open_request_samples_and_a_close_for_connections_open_at_exit() {
    let mut fx = fixture("logexit", |_| {});
    let sink = SharedLog::default();
    fx.stack.log = EventLog::to_writer(Box::new(sink.clone()), 1_000_000);
    let mut c = client(false);
    assert_eq!(c.send(b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n"), 36);
    for ms in 0..10 {
        turn(&mut fx.stack, &mut c, Instant::from_millis(ms));
    }
    assert!(c.recv(usize::MAX).ends_with(b"hello\n"));
    fx.stack.log_open_connections(Instant::from_millis(10));
    assert_eq!(fx.stack.session_count(), 0);
    fx.stack.log.flush();
    let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    let events: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    for kind in ["open", "state", "request", "rtt_sample", "close"] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    let close = events.iter().find(|e| e["event"] == "close").unwrap();
    assert_eq!(close["state"], "ESTABLISHED");
    assert_eq!(close["bytes_acked"], close["bytes_sent"]);
    assert_eq!(close["unix_us"].as_u64().unwrap(), 1_000_000 + close["t_us"].as_u64().unwrap());
    let sample = events.iter().find(|e| e["event"] == "rtt_sample").unwrap();
    for key in ["rtt_us", "srtt_us", "rttvar_us", "rto_us", "conn"] {
        assert!(sample[key].is_u64(), "{key} in {sample}");
    }
}

/// A spoofed SYN from an address that never answers.
fn spoofed_syn(i: u32) -> Segment {
    let (src, dst): (SocketAddr, SocketAddr) = if i % 2 == 0 {
        (
            SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (i % 200 + 20))), (10_000 + i) as u16),
            "10.0.0.1:80".parse().unwrap(),
        )
    } else {
        (
            SocketAddr::new(IpAddr::V6(Ipv6Addr::from(0xfd00_u128 << 112 | (i as u128 + 0x100))), (10_000 + i) as u16),
            "[fd00::1]:80".parse().unwrap(),
        )
    };
    let mut c = Connection::connect(src, dst, TcpConfig::modern(), Seq(i.wrapping_mul(7919)));
    c.poll_transmit(Instant::ZERO).unwrap()
}

#[test]
fn syn_flood_gets_cookies_and_legitimate_v4_v6_clients_are_served() {
    let mut fx = fixture("cookies", |c| {
        c.max_half_open = 4;
        c.max_connections = 64;
        c.tcp = TcpConfig { time_wait: Duration::from_millis(100), ..TcpConfig::modern() };
    });
    let stack = &mut fx.stack;
    for i in 0..2000 {
        stack.handle_frame(&tcp_frame(&spoofed_syn(i)), Instant::ZERO);
    }
    assert_eq!(stack.session_count(), 4, "no state beyond the half-open cap");
    assert_eq!(stack.counters.syn_cookies_sent, 1996);
    assert_eq!(stack.counters.syn_dropped_half_open_cap, 0);
    stack.poll(Instant::ZERO);
    let syn_acks = segments_out(stack);
    assert_eq!(syn_acks.iter().filter(|s| s.syn && s.ack.is_some()).count(), 2000, "every SYN answered");
    // Cookie SYN-ACKs carry the options the SYN offered.
    let last = syn_acks.last().unwrap();
    assert!(last.sack_permitted && last.timestamp.is_some() && last.window_scale.is_some() && last.mss.is_some());

    for v6 in [false, true] {
        let (local, remote): (SocketAddr, SocketAddr) = if v6 {
            ("[fd00::99]:40000".parse().unwrap(), "[fd00::1]:80".parse().unwrap())
        } else {
            ("10.0.0.99:40000".parse().unwrap(), "10.0.0.1:80".parse().unwrap())
        };
        let mut c = Connection::connect(local, remote, TcpConfig::modern(), Seq(5));
        let mut got = Vec::new();
        exchange(stack, &mut c, b"GET /f320.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &mut got);
        let (head, body) = body_of(&got);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(body, &pattern(320 * 1024)[..], "v6={v6}");
    }
    assert_eq!(stack.counters.syn_cookies_validated, 2);
    assert_eq!(stack.counters.syn_cookies_invalid, 0);
    assert_eq!(stack.counters.connections_accepted, 4 + 2);
}

#[test]
fn forged_and_stale_cookie_acks_are_dropped_and_counted() {
    let mut fx = fixture("badcookie", |c| c.syn_cookies = SynCookieMode::Always);
    let stack = &mut fx.stack;
    stack.set_cookie_tick(Duration::from_secs(1));
    let mut c = client(false);
    let syn = c.poll_transmit(Instant::ZERO).unwrap();
    stack.handle_frame(&tcp_frame(&syn), Instant::ZERO);
    assert_eq!(stack.session_count(), 0, "always: no state for the SYN");
    let syn_ack = segments_out(stack).pop().unwrap();
    assert!(syn_ack.syn && stack.counters.syn_cookies_sent == 1);
    let cookie = syn_ack.seq;
    let ack = |ack_no: Seq| Segment {
        src: syn.src,
        dst: syn.dst,
        seq: syn.seq + 1,
        ack: Some(ack_no),
        syn: false,
        fin: false,
        rst: false,
        psh: false,
        window: 1000,
        mss: None,
        window_scale: None,
        sack_permitted: false,
        sack_blocks: Vec::new(),
        timestamp: None,
        payload: Vec::new(),
    };
    for forged in [cookie, cookie + 2, Seq(cookie.0 ^ 0x8000_0000), Seq(cookie.0 ^ 0x40)] {
        stack.handle_frame(&tcp_frame(&ack(forged)), Instant::from_millis(10));
    }
    assert_eq!(stack.counters.syn_cookies_invalid, 4);
    assert!(segments_out(stack).is_empty(), "dropped silently");
    // Two ticks later the genuine ACK is stale.
    stack.handle_frame(&tcp_frame(&ack(cookie + 1)), Instant::from_millis(2_500));
    assert_eq!(stack.counters.syn_cookies_stale, 1);
    assert_eq!(stack.session_count(), 0);
    assert!(segments_out(stack).is_empty());
    // Within its lifetime it makes the connection.
    stack.handle_frame(&tcp_frame(&ack(cookie + 1)), Instant::from_millis(1_500));
    assert_eq!(stack.counters.syn_cookies_validated, 1);
    assert_eq!(stack.session_count(), 1);
}

#[test]
fn auto_mode_without_recent_cookies_still_resets_strays() {
    let mut fx = fixture("autorst", |c| c.max_half_open = 1);
    let stack = &mut fx.stack;
    stack.set_cookie_tick(Duration::from_secs(1));
    let mut stray = spoofed_syn(0);
    stray.syn = false;
    stray.ack = Some(Seq(77));
    stack.handle_frame(&tcp_frame(&stray), Instant::ZERO);
    assert!(segments_out(stack).iter().any(|s| s.rst), "no cookies out: a stray ACK gets a RST as before");
    // A flood makes cookies: strays are now checked as cookies and dropped ...
    for i in 1..4 {
        stack.handle_frame(&tcp_frame(&spoofed_syn(2 * i)), Instant::ZERO);
    }
    assert_eq!(stack.counters.syn_cookies_sent, 2);
    let _ = segments_out(stack);
    stack.handle_frame(&tcp_frame(&stray), Instant::from_millis(100));
    assert!(segments_out(stack).is_empty());
    assert_eq!(stack.counters.syn_cookies_invalid, 1);
    // ... until no cookie can be valid any more (two ticks): then RST again.
    stack.handle_frame(&tcp_frame(&stray), Instant::from_millis(2_100));
    assert!(segments_out(stack).iter().any(|s| s.rst));
}

/// Each frame carrying sequence space names its segment (logged as `tx` once written);
/// pure ACKs and ARP name none; the RTO state rides along once samples exist.
#[test]
fn frames_carry_their_transmission_records() {
    let mut fx = fixture("tx", |_| {});
    let mut c = client(false);
    let mut now = Instant::ZERO;
    let (mut data_frames, mut with_estimate, mut sent_request) = (0, 0, false);
    for _ in 0..10_000 {
        if c.state() == State::Established && !sent_request {
            c.send(b"GET /f320.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            sent_request = true;
        }
        while let Some(seg) = c.poll_transmit(now) {
            fx.stack.handle_frame(&tcp_frame(&seg), now);
        }
        fx.stack.handle_timeouts(now);
        fx.stack.poll(now);
        for frame in fx.stack.take_frames() {
            let eth = EthernetFrame::new_checked(&frame.bytes[..]).unwrap();
            let seg = Segment::parse_ip(eth.payload()).unwrap();
            match frame.tx {
                Some(tx) => {
                    let x = tx.transmission;
                    assert_eq!((x.seq, x.payload_len, x.syn, x.fin), (seg.seq.0, seg.payload.len(), seg.syn, seg.fin));
                    assert!(!x.retransmission && x.sent_at == now && x.rto_us >= 1_000_000);
                    data_frames += 1;
                    with_estimate += usize::from(x.rto_unfloored_us.is_some() && x.srtt_us.is_some());
                }
                None => assert_eq!(seg.seq_len(), 0, "only frames without sequence space lack a record"),
            }
            c.handle_segment(&seg, now);
        }
        c.recv(usize::MAX);
        if c.peer_finished() && c.state() == State::CloseWait {
            c.close(now);
        }
        if c.is_closed() || c.state() == State::TimeWait {
            break;
        }
        now = now + Duration::from_millis(1);
    }
    // the SYN-ACK, the response head and 320 KiB in 1460-byte segments, and the FIN
    assert!(data_frames > (320 * 1024usize).div_ceil(1460), "{data_frames}");
    assert!(with_estimate >= data_frames - 11, "after the first window every segment carries an estimate");
}

/// The per-segment lines (segment_lines.rs) against the generic map path they replaced:
/// the same bytes, for a first transmission, a retransmission of each kind and the ACK lines.
#[test]
fn segment_lines_are_byte_identical_to_the_generic_map_lines() {
    fn both<T: serde::Serialize>(line: &T, t_us: u64, kind: &str, fields: serde_json::Value) -> (String, String) {
        let (fast, generic) = (SharedLog::default(), SharedLog::default());
        let mut fast_log = EventLog::to_writer(Box::new(fast.clone()), 1_700_000_000_000_000);
        let mut generic_log = EventLog::to_writer(Box::new(generic.clone()), 1_700_000_000_000_000);
        fast_log.write_line(line);
        generic_log.write(t_us, kind, fields);
        fast_log.flush();
        generic_log.flush();
        let text = |s: &SharedLog| String::from_utf8(s.0.lock().unwrap().clone()).unwrap();
        (text(&fast), text(&generic))
    }
    let unix = |t_us: u64| 1_700_000_000_000_000 + t_us;
    let first = Transmission {
        seq: 4_000_000_000,
        payload_len: 1448,
        syn: false,
        fin: true,
        retransmission: false,
        kind: RetransmitKind::GoBackN,
        sent_at: Instant::from_micros(1234),
        srtt_us: None,
        rttvar_us: 0,
        rto_unfloored_us: None,
        rto_us: 1_000_000,
    };
    let mut cases = vec![(first.clone(), true)];
    for kind in [RetransmitKind::GoBackN, RetransmitKind::Handshake, RetransmitKind::Timeout, RetransmitKind::Recovery]
    {
        let x = Transmission {
            retransmission: true,
            kind,
            srtt_us: Some(812),
            rttvar_us: 97,
            rto_unfloored_us: Some(1200.25),
            ..first.clone()
        };
        cases.push((x, false));
    }
    for (x, written) in cases {
        let t_us = 98_765;
        let mut fields = json!({"conn": 7, "seq": x.seq, "len": x.payload_len, "syn": x.syn, "fin": x.fin,
            "retransmission": x.retransmission, "sent_us": x.sent_at.as_micros(), "srtt_us": x.srtt_us,
            "rttvar_us": x.rttvar_us, "rto_unfloored_us": x.rto_unfloored_us, "rto_us": x.rto_us});
        if x.retransmission {
            let map = fields.as_object_mut().unwrap();
            map.insert("kind".into(), x.kind.name().into());
            map.insert("go_back_n".into(), (x.kind == RetransmitKind::GoBackN).into());
        }
        let (fast, generic) = both(
            &TxLine::new(7, &x, written, t_us, unix(t_us)),
            t_us,
            if written { "tx" } else { "tx_dropped" },
            fields,
        );
        assert_eq!(fast, generic);
    }
    let ack = AckLine { ack: 17, at_us: 5, conn: 3, cwnd_bytes: None, event: "ack", t_us: 9, unix_us: unix(9) };
    let (fast, generic) = both(&ack, 9, "ack", json!({"conn": 3, "ack": 17, "at_us": 5}));
    assert_eq!(fast, generic);
    let ack = AckLine { cwnd_bytes: Some(14_480), ..ack };
    let (fast, generic) = both(&ack, 9, "ack", json!({"conn": 3, "ack": 17, "at_us": 5, "cwnd_bytes": 14_480}));
    assert_eq!(fast, generic);
    let rtt = RttSampleLine {
        conn: 3,
        event: "rtt_sample",
        rto_us: 200_000,
        rtt_us: 410,
        rttvar_us: 120,
        srtt_us: 500,
        t_us: 9,
        unix_us: unix(9),
    };
    let (fast, generic) = both(
        &rtt,
        9,
        "rtt_sample",
        json!({"conn": 3, "rtt_us": 410, "srtt_us": 500, "rttvar_us": 120, "rto_us": 200_000}),
    );
    assert_eq!(fast, generic);
}

/// Like `exchange`, but logs each frame's segment as `main.rs` does once it is written, and
/// drops every `drop_every`-th frame of the server's (0: none) so loss events are logged too.
fn logged_exchange(
    stack: &mut Stack,
    client: &mut Connection,
    request: &[u8],
    drop_every: usize,
    clock: &mut Instant,
) -> Vec<u8> {
    let mut now = *clock;
    let mut received = Vec::new();
    let mut sent_request = false;
    let mut frames_seen = 0usize;
    for _ in 0..200_000 {
        if client.state() == State::Established && !sent_request {
            assert_eq!(client.send(request), request.len());
            sent_request = true;
        }
        while let Some(seg) = client.poll_transmit(now) {
            stack.handle_frame(&tcp_frame(&seg), now);
        }
        stack.handle_timeouts(now);
        stack.poll(now);
        let frames = stack.take_frames();
        let mut replies = Vec::new();
        for frame in &frames {
            if let Some(tx) = &frame.tx {
                stack.log_transmission(now.as_micros(), tx, true);
            }
            frames_seen += 1;
            if drop_every > 0 && frames_seen % drop_every == 0 {
                continue;
            }
            let eth = EthernetFrame::new_checked(&frame.bytes[..]).unwrap();
            replies.extend(Segment::parse_ip(eth.payload()).ok());
        }
        for seg in &replies {
            client.handle_segment(seg, now);
        }
        received.extend(client.recv(usize::MAX));
        if client.peer_finished() && client.state() == State::CloseWait {
            client.close(now);
        }
        if client.is_closed() || client.state() == State::TimeWait {
            *clock = now + Duration::from_millis(1);
            return received;
        }
        if replies.is_empty() && !client.wants_transmit() {
            let next = [client.poll_timeout(), stack.poll_timeout()].into_iter().flatten().min();
            now = match next {
                Some(t) if t > now => t,
                _ => now + Duration::from_millis(1),
            };
        }
    }
    panic!("exchange did not finish; state {:?}", client.state());
}

/// The event log of recorded fetches (both profiles, IPv4 and IPv6, keep-alive, an error,
/// a cookie handshake, lost segments) byte for byte as committed in
/// stack/recorded_fetch_log.jsonl; `LEANWEB_RECORD_LOG=1` rewrites that file.
#[test]
fn event_log_of_recorded_fetches_is_unchanged() {
    let mut text = String::new();
    for (name, modern) in [("bare", false), ("modern", true)] {
        let mut fx = fixture(&format!("golden-{name}"), |c| {
            if modern {
                c.tcp = TcpConfig { time_wait: Duration::from_millis(100), ..TcpConfig::modern() };
                c.ipv4_id = Ipv4Id::PerConnection;
                c.syn_cookies = SynCookieMode::Always;
            }
        });
        let sink = SharedLog::default();
        fx.stack.log = EventLog::to_writer(Box::new(sink.clone()), 1_700_000_000_000_000);
        let tcp = if modern { TcpConfig::modern() } else { TcpConfig::default() };
        let mut clock = Instant::from_millis(1000);
        let requests: [(bool, &[u8], usize); 3] = [
            (
                false,
                concat!(
                    "GET /f320.bin HTTP/1.1\r\nHost: x\r\n\r\n",
                    "HEAD /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
                29,
            ),
            (true, b"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /missing HTTP/1.1\r\nHost: x\r\n\r\n", 0),
            (true, b"GET /f320.bin HTTP/1.0\r\n\r\n", 0),
        ];
        for (i, (v6, request, drop_every)) in requests.into_iter().enumerate() {
            let port = 40_000 + i as u16;
            let (local, remote): (SocketAddr, SocketAddr) = if v6 {
                (format!("[fd00::99]:{port}").parse().unwrap(), "[fd00::1]:80".parse().unwrap())
            } else {
                (format!("10.0.0.99:{port}").parse().unwrap(), "10.0.0.1:80".parse().unwrap())
            };
            let mut c = Connection::connect(local, remote, tcp, Seq(5 + i as u32));
            let got = logged_exchange(&mut fx.stack, &mut c, request, drop_every, &mut clock);
            assert!(got.starts_with(b"HTTP/1.1 "), "{name} request {i}");
        }
        fx.stack.log_open_connections(clock);
        fx.stack.log.flush();
        text.push_str(&String::from_utf8(sink.0.lock().unwrap().clone()).unwrap());
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/stack/recorded_fetch_log.jsonl");
    if std::env::var_os("LEANWEB_RECORD_LOG").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let recorded = std::fs::read_to_string(&path).expect("src/stack/recorded_fetch_log.jsonl (LEANWEB_RECORD_LOG=1)");
    assert!(text == recorded, "the event log differs from {}", path.display());
}

/// An application without files: the stack asks it for each path and sends what it gives.
struct InMemory {
    asked: Vec<String>,
}

impl Application for InMemory {
    type Body = std::io::Cursor<Vec<u8>>;

    fn open(&mut self, path: &str) -> Result<crate::app::Resource<Self::Body>, crate::http::HttpError> {
        self.asked.push(path.to_string());
        match path {
            "/generated" => {
                let body = pattern(100_000);
                let len = body.len() as u64;
                Ok(crate::app::Resource { body: std::io::Cursor::new(body), len, content_type: "text/plain" })
            }
            _ => Err(crate::http::HttpError::NotFound),
        }
    }
}

#[test]
fn the_stack_serves_whatever_its_application_gives() {
    let config = config_with_root(PathBuf::from("/nonexistent"));
    let log = EventLog::disabled();
    let mut stack = Stack::with_app(config, InMemory { asked: Vec::new() }, log, 42);
    let mut c = client(false);
    let mut got = Vec::new();
    let request =
        b"GET /generated HTTP/1.1\r\nHost: x\r\n\r\nGET /f320.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    exchange(&mut stack, &mut c, request, &mut got);
    let (head, rest) = body_of(&got);
    assert!(head.starts_with("HTTP/1.1 200 OK") && head.contains("Content-Length: 100000"), "{head}");
    assert_eq!(&rest[..100_000], &pattern(100_000)[..]);
    assert!(String::from_utf8_lossy(&rest[100_000..]).starts_with("HTTP/1.1 404"), "no file system behind it");
    assert_eq!(stack.app.asked, ["/generated", "/f320.bin"]);
}
