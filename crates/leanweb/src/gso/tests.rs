//! The super-frame rule against the stack's real output: for every turn of an in-memory
//! fetch, the kernel's segmentation (`kernel_segments`) of each write must give back exactly
//! the frames the stack built, byte for byte.
use std::net::SocketAddr;
use std::time::Duration;

use leantcp::{Connection, Instant, Push, Segment, Seq, State, TcpConfig};
use smoltcp::wire::EthernetFrame;

use super::*;
use crate::stack::test_fixture::{self, tcp_frame, Fixture};
use crate::stack::{Ipv4Id, Stack};

const FILE_BYTES: usize = 320 * 1024;

fn fixture(name: &str, tcp: TcpConfig, ipv4_id: Ipv4Id) -> Fixture {
    test_fixture::fixture(&format!("gso-{name}"), |c| {
        c.tcp = TcpConfig { time_wait: Duration::from_millis(100), ..tcp };
        c.ipv4_id = ipv4_id;
    })
}

/// Fetches the file with a client of `client_tcp`; every turn's frames are planned into
/// writes, each checked against the kernel's segmentation. Returns (writes, frames) per turn.
fn fetch(stack: &mut Stack, v6: bool, client_tcp: TcpConfig) -> Vec<(Vec<TapWrite>, Vec<OutFrame>)> {
    let (local, remote): (SocketAddr, SocketAddr) = if v6 {
        ("[fd00::99]:40000".parse().unwrap(), "[fd00::1]:80".parse().unwrap())
    } else {
        ("10.0.0.99:40000".parse().unwrap(), "10.0.0.1:80".parse().unwrap())
    };
    let mut client = Connection::connect(
        local,
        remote,
        TcpConfig { recv_buffer_bytes: 1 << 20, window_scale: 7, ..client_tcp },
        Seq(5),
    );
    let mut turns = Vec::new();
    let mut received = 0;
    let mut now = Instant::ZERO;
    let mut sent_request = false;
    for _ in 0..100_000 {
        if client.state() == State::Established && !sent_request {
            let request = b"GET /f320.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
            assert_eq!(client.send(request), request.len());
            sent_request = true;
        }
        while let Some(seg) = client.poll_transmit(now) {
            stack.handle_frame(&tcp_frame(&seg), now);
        }
        stack.handle_timeouts(now);
        stack.poll(now);
        let frames = stack.take_frames();
        let writes = plan(&frames);
        assert_eq!(writes.iter().map(|w| w.frames.len()).sum::<usize>(), frames.len(), "every frame in one write");
        for write in &writes {
            let wire = kernel_segments(&write.to_bytes(&frames)).expect("a write the kernel takes");
            let built: Vec<&[u8]> = frames[write.frames.clone()].iter().map(|f| &f.bytes[..]).collect();
            assert_eq!(wire, built, "segments of frames {:?}", write.frames);
        }
        for f in &frames {
            let frame = EthernetFrame::new_checked(&f.bytes[..]).unwrap();
            if let Ok(seg) = Segment::parse_ip(frame.payload()) {
                client.handle_segment(&seg, now);
            }
        }
        received += client.recv(usize::MAX).len();
        if client.peer_finished() && client.state() == State::CloseWait {
            client.close(now);
        }
        let idle = frames.is_empty() && !client.wants_transmit();
        turns.push((writes, frames));
        if client.is_closed() || client.state() == State::TimeWait {
            assert!(received > FILE_BYTES, "the whole response arrived ({received} bytes)");
            return turns;
        }
        if idle {
            let next = [client.poll_timeout(), stack.poll_timeout()].into_iter().flatten().min();
            now = match next {
                Some(t) if t > now => t,
                _ => now + Duration::from_millis(1),
            };
        } else {
            now = now + Duration::from_micros(100);
        }
    }
    panic!("fetch did not finish");
}

#[test]
fn super_frames_segment_back_into_exactly_the_frames_the_stack_built() {
    for v6 in [false, true] {
        let mut fx = fixture(if v6 { "modern6" } else { "modern4" }, TcpConfig::modern(), Ipv4Id::PerConnection);
        let turns = fetch(&mut fx.stack, v6, TcpConfig::modern());
        let frames: usize = turns.iter().map(|(_, f)| f.len()).sum();
        let writes: Vec<&TapWrite> = turns.iter().flat_map(|(w, _)| w).collect();
        let merged = writes.iter().filter(|w| w.head.is_some()).count();
        let longest = writes.iter().map(|w| w.frames.len()).max().unwrap();
        assert!(
            frames > 200 && merged > 5 && longest >= 10,
            "v6 {v6}: {frames} frames, {merged} super-frames, longest {longest}"
        );
        assert!(writes.len() * 4 < frames, "v6 {v6}: {} writes for {frames} frames", writes.len());
        eprintln!("v6 {v6}: {frames} frames in {} writes, {merged} super-frames, longest {longest}", writes.len());
        // Timestamps are on: a super-frame only holds segments with one TSval (one clock tick).
        let vnet_types: Vec<u8> = writes.iter().filter(|w| w.head.is_some()).map(|w| w.vnet[1]).collect();
        assert!(vnet_types.iter().all(|t| *t == if v6 { GSO_TCPV6 } else { GSO_TCPV4 }));
    }
}

#[test]
fn bare_frames_never_merge_psh_on_every_segment_and_ipv4_id_zero() {
    // Either wire detail alone keeps a run from merging, so `bare` with --gso on writes the
    // same frames one by one.
    for (push, ipv4_id, v6) in [
        (Push::EverySegment, Ipv4Id::Zero, false),
        (Push::EverySegment, Ipv4Id::PerConnection, true),
        (Push::EndOfData, Ipv4Id::Zero, false),
    ] {
        let mut fx = fixture("bare", TcpConfig { push, ..TcpConfig::bare() }, ipv4_id);
        let turns = fetch(&mut fx.stack, v6, TcpConfig::bare());
        assert!(
            turns.iter().flat_map(|(w, _)| w).all(|w| w.head.is_none() && w.frames.len() == 1),
            "{push:?} {ipv4_id:?} v6 {v6}"
        );
    }
}

/// The turn of a modern fetch with the longest super-frame, and that write.
fn longest_run() -> (Vec<OutFrame>, Range<usize>) {
    let mut fx = fixture("runs", TcpConfig::modern(), Ipv4Id::PerConnection);
    let turns = fetch(&mut fx.stack, false, TcpConfig::modern());
    let (writes, frames) =
        turns.into_iter().max_by_key(|(w, _)| w.iter().map(|w| w.frames.len()).max().unwrap_or(0)).unwrap();
    let run = writes.into_iter().max_by_key(|w| w.frames.len()).unwrap().frames;
    assert!(run.len() >= 6);
    (frames, run)
}

#[test]
fn a_run_is_cut_where_the_kernel_would_change_a_segment() {
    let (frames, run) = longest_run();
    let tcp_at = ETH_HDR_LEN + 20;
    let cut_after = |change: &dyn Fn(&mut Vec<u8>), at: usize| {
        let mut changed: Vec<OutFrame> = frames.iter().map(|f| OutFrame { bytes: f.bytes.clone(), tx: f.tx }).collect();
        let bytes = &mut changed[run.start + at].bytes;
        change(bytes);
        if bytes.len() > tcp_at {
            // Valid checksums again: the change stands for a segment the stack built that way.
            let mut ip = Ipv4Packet::new_unchecked(&mut bytes[ETH_HDR_LEN..]);
            ip.fill_checksum();
            let (src, dst) = (ip.src_addr().into(), ip.dst_addr().into());
            TcpPacket::new_unchecked(&mut bytes[tcp_at..]).fill_checksum(&src, &dst);
        }
        let writes = plan(&changed);
        let w = writes.iter().find(|w| w.frames.contains(&run.start)).unwrap();
        (
            w.frames.end - run.start,
            writes.iter().all(|w| {
                kernel_segments(&w.to_bytes(&changed)).unwrap()
                    == changed[w.frames.clone()].iter().map(|f| f.bytes.clone()).collect::<Vec<_>>()
            }),
        )
    };
    // PSH on the 3rd segment: the kernel would clear it, so the run ends with it.
    assert_eq!(cut_after(&|b| b[tcp_at + TCP_FLAGS_AT] |= PSH, 2), (3, true));
    // An IPv4 identification out of sequence at the 3rd: the run ends before it.
    assert_eq!(cut_after(&|b| b[ETH_HDR_LEN + 5] ^= 1, 2).0, 2);
    // Another TSval (options are copied from the first segment) at the 4th.
    assert_eq!(cut_after(&|b| b[tcp_at + 20 + 4 + 3] ^= 1, 3).0, 3);
    // Another window, another ack at the 2nd.
    assert_eq!(cut_after(&|b| b[tcp_at + 15] ^= 1, 1).0, 1);
    assert_eq!(cut_after(&|b| b[tcp_at + 11] ^= 1, 1).0, 1);
    // A sequence gap at the 2nd.
    assert_eq!(cut_after(&|b| b[tcp_at + 7] ^= 1, 1).0, 1);
    // A frame in between that is no data segment (a truncated one).
    assert_eq!(cut_after(&|b| b.truncate(30), 2).0, 2);
}

/// RFC 1071 checksum over `bytes` (the test's own, independent of the code above).
fn ones_complement_sum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[test]
fn the_partial_checksum_completes_to_smoltcps_full_one() {
    let (frames, run) = longest_run();
    for f in &frames[run] {
        let seg = data_segment(&f.bytes).unwrap();
        let ip = Ipv4Packet::new_checked(&f.bytes[ETH_HDR_LEN..]).unwrap();
        let mut tcp = f.bytes[seg.tcp_at..].to_vec();
        let full = u16::from_be_bytes([tcp[TCP_CHECKSUM_AT], tcp[TCP_CHECKSUM_AT + 1]]);
        let partial = pseudo_header_sum(&ip.src_addr().octets(), &ip.dst_addr().octets(), tcp.len() as u32);
        // What a device (or skb_checksum_help) does with CHECKSUM_PARTIAL: sum from csum_start
        // with the partial sum in the field, complement, store.
        tcp[TCP_CHECKSUM_AT..TCP_CHECKSUM_AT + 2].copy_from_slice(&partial.to_be_bytes());
        assert_eq!(!ones_complement_sum(&tcp), full);
    }
}

#[test]
fn read_frames_lose_their_vnet_header_and_gso_frames_are_refused() {
    let frame = [7u8; 60];
    let mut read = vec![0u8; VNET_HDR_LEN];
    read.extend_from_slice(&frame);
    assert_eq!(strip_vnet_header(&read), Some(&frame[..]));
    read[1] = GSO_TCPV4;
    assert_eq!(strip_vnet_header(&read), None);
    assert_eq!(strip_vnet_header(&read[..5]), None);
    assert_eq!(strip_vnet_header(&[0u8; VNET_HDR_LEN]), Some(&[][..]));
}
