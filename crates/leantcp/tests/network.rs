//! Seeded in-memory network tests: every TCP behaviour of leantcp end to end.
use std::time::Duration;

use leantcp::sim::{LinkConfig, Sim};
use leantcp::{Connection, Event, Push, RetransmitKind, SamplingStrategy, Segment, Seq, State, TcpConfig};

mod common;
use common::*;

fn link() -> LinkConfig {
    LinkConfig::default()
}

#[test]
fn handshake_v4_and_v6_negotiates_mss_and_window_scale() {
    for (v6, mss) in [(false, 1460), (true, 1440)] {
        let mut sim = setup(TcpConfig::default(), TcpConfig::default(), link(), link(), v6);
        assert!(sim.run_until(Duration::from_secs(1), established));
        let server = sim.b.conn.as_ref().unwrap();
        assert_eq!(server.send_mss(), mss);
        // The client advertised 64 KiB with shift 2: raw field 16384, scaled back to 65536.
        assert_eq!(server.peer_window(), 64 * 1024);
        let syn = &sim.a.sent_log[0];
        assert!(syn.syn && syn.ack.is_none() && syn.window_scale == Some(2) && syn.mss == Some(mss as u16));
        // One RTT (2 × 5 ms + serialization) sample from the handshake on each side.
        let srtt = server.rto().srtt().unwrap();
        assert!(srtt >= Duration::from_millis(10) && srtt < Duration::from_millis(11), "{srtt:?}");
    }
}

fn transfer(server: TcpConfig, a_to_b: LinkConfig, b_to_a: LinkConfig, len: usize) -> Sim {
    let mut sim = setup(TcpConfig::default(), server, a_to_b, b_to_a, false);
    assert!(sim.run_until(Duration::from_secs(5), established));
    sim.b.to_send.extend(pattern(len));
    sim.b.close_after_send = true;
    let done = sim.run_until(Duration::from_secs(600), |s| {
        s.a.received.len() == len && state(&s.a) == State::CloseWait && state(&s.b) == State::FinWait2
    });
    assert!(done, "transfer of {len} bytes did not finish: got {}", sim.a.received.len());
    assert_eq!(sim.a.received, pattern(len), "byte-identical");
    sim
}

#[test]
fn transfer_of_504_kib_is_byte_identical_without_retransmissions() {
    let mut sim = transfer(TcpConfig::default(), link(), link(), 504 * 1024);
    let server = sim.b.conn.as_mut().unwrap();
    assert_eq!(server.stats().retransmissions, 0);
    assert_eq!(server.stats().bytes_acked, 504 * 1024);
    assert_eq!(server.state(), State::FinWait2);
}

#[test]
fn lost_segment_times_out_and_goes_back_n() {
    // Server -> client packet #10 (a data segment mid-window) is lost.
    let lossy = LinkConfig { drop_indices: vec![10], ..link() };
    let mut sim = transfer(TcpConfig::default(), link(), lossy, 200 * 1024);
    let server = sim.b.conn.as_mut().unwrap();
    let stats = server.stats();
    let evs = events(server);
    let timeouts: Vec<_> = evs.iter().filter(|e| matches!(e, Event::Timeout { .. })).collect();
    assert_eq!(timeouts.len(), 1, "{timeouts:?}");
    assert_eq!(stats.timeouts, 1);
    let gbn: Vec<_> =
        evs.iter().filter(|e| matches!(e, Event::Retransmit { kind: RetransmitKind::GoBackN, .. })).collect();
    // No congestion control: the whole window was in flight, so go-back-N resends many segments.
    assert!(gbn.len() > 5, "go-back-N resent only {} segments", gbn.len());
    assert_eq!(stats.retransmissions as usize, gbn.len());
    // The first retransmission starts at the lost segment.
    let lost = &sim.b.sent_log[10];
    assert!(matches!(gbn[0], Event::Retransmit { seq, .. } if *seq == lost.seq.0));
}

#[test]
fn repeated_loss_backs_off_exponentially_then_recovers() {
    // Lose the first data segment and its first three retransmissions.
    let lossy = LinkConfig { drop_indices: vec![1, 2, 3, 4], ..link() };
    let server = TcpConfig { send_buffer_bytes: 1000, ..TcpConfig::default() };
    let mut sim = setup(TcpConfig::default(), server, link(), lossy, false);
    assert!(sim.run_until(Duration::from_secs(5), established));
    sim.b.to_send.extend(pattern(1000));
    assert!(sim.run_until(Duration::from_secs(60), |s| s.a.received.len() == 1000));
    let server = sim.b.conn.as_mut().unwrap();
    let rtos: Vec<u64> = events(server)
        .into_iter()
        .filter_map(|e| match e {
            Event::Timeout { rto_us, .. } => Some(rto_us),
            _ => None,
        })
        .collect();
    assert_eq!(rtos, vec![2_000_000, 4_000_000, 8_000_000, 16_000_000]);
    // 1 + 2 + 4 + 8 s of waiting before the fifth copy got through.
    assert!(
        sim.now >= leantcp::Instant::from_millis(15_000) && sim.now < leantcp::Instant::from_millis(15_100),
        "{:?}",
        sim.now
    );
    // Karn: the retransmitted segment gave no sample; backoff stays until a fresh sample.
    assert_eq!(server.rto().backoff_shift(), 4);
}

#[test]
fn each_sampling_strategy_yields_its_share_of_samples() {
    let mut samples = Vec::new();
    for strategy in [SamplingStrategy::All, SamplingStrategy::One, SamplingStrategy::Some] {
        let mut server = TcpConfig::default();
        server.rto.sampling = strategy;
        let sim = transfer(server, link(), link(), 100 * 1460);
        let stats = sim.b.conn.as_ref().unwrap().stats();
        let seq_segments = sim.b.sent_log.iter().filter(|s| s.seq_len() > 0).count() as u64;
        samples.push((strategy, stats.rtt_samples));
        if strategy == SamplingStrategy::All {
            // all: one sample per segment that used sequence space (SYN-ACK, data, FIN).
            assert_eq!(stats.rtt_samples, seq_segments, "{samples:?}");
            assert!(seq_segments >= 101);
        }
    }
    let count = |s| samples.iter().find(|(k, _)| *k == s).unwrap().1;
    // some: every other new-data ACK (leantcp ACKs every segment), about half.
    let (all, some) = (count(SamplingStrategy::All), count(SamplingStrategy::Some));
    assert!(some == all / 2 || some == all / 2 + 1, "{samples:?}");
    // one: one timed segment per round trip, far fewer.
    let one = count(SamplingStrategy::One);
    assert!(one >= 2 && one < some, "{samples:?}");
}

#[test]
fn sending_is_limited_by_the_peer_window_and_zero_window_is_probed() {
    let client = TcpConfig { recv_buffer_bytes: 8192, window_scale: 0, ..TcpConfig::default() };
    let (a, b) = addrs(false);
    let mut sim = Sim::new(link(), link());
    sim.a.conn = Some(Connection::connect(a, b, client, Seq(1)));
    sim.b.listen = Some((TcpConfig::default(), Seq(5)));
    sim.a.reading = false;
    assert!(sim.run_until(Duration::from_secs(1), established));
    sim.b.to_send.extend(pattern(50_000));
    let mut max_in_flight = 0;
    sim.run_until(Duration::from_secs(20), |s| {
        max_in_flight = max_in_flight.max(s.b.conn.as_ref().unwrap().bytes_in_flight());
        false
    });
    assert!(max_in_flight <= 8192 && max_in_flight > 0, "{max_in_flight}");
    let server = sim.b.conn.as_mut().unwrap();
    let probes = events(server).into_iter().filter(|e| matches!(e, Event::ZeroWindowProbe { .. })).count();
    assert!(probes >= 2, "expected persist probes, got {probes}");
    assert_eq!(server.stats().timeouts, 0, "probes are not timeouts");
    sim.a.reading = true;
    assert!(sim.run_until(Duration::from_secs(120), |s| s.a.received.len() == 50_000));
    assert_eq!(sim.a.received, pattern(50_000));
}

#[test]
fn active_close_walks_fin_wait_to_time_wait_to_closed() {
    let server = TcpConfig { time_wait: Duration::from_secs(2), ..TcpConfig::default() };
    let mut sim = setup(TcpConfig::default(), server, link(), link(), true);
    assert!(sim.run_until(Duration::from_secs(1), established));
    sim.b.conn.as_mut().unwrap().close(sim.now);
    assert_eq!(state(&sim.b), State::FinWait1);
    assert!(
        sim.run_until(Duration::from_secs(1), |s| state(&s.b) == State::FinWait2 && state(&s.a) == State::CloseWait)
    );
    let now = sim.now;
    sim.a.conn.as_mut().unwrap().close(now);
    assert_eq!(state(&sim.a), State::LastAck);
    assert!(sim.run_until(Duration::from_secs(1), |s| state(&s.b) == State::TimeWait && state(&s.a) == State::Closed));
    let entered = sim.now;
    assert!(sim.run_until(Duration::from_secs(5), |s| state(&s.b) == State::Closed));
    assert!(sim.now.saturating_since(entered) >= Duration::from_millis(1990));
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let cfg = TcpConfig { time_wait: Duration::from_secs(1), ..TcpConfig::default() };
    let mut sim = setup(cfg, cfg, link(), link(), false);
    assert!(sim.run_until(Duration::from_secs(1), established));
    let now = sim.now;
    sim.a.conn.as_mut().unwrap().close(now);
    sim.b.conn.as_mut().unwrap().close(now);
    let both_in_time_wait = |s: &Sim| state(&s.a) == State::TimeWait && state(&s.b) == State::TimeWait;
    assert!(sim.run_until(Duration::from_secs(1), both_in_time_wait));
    for end in [&mut sim.a, &mut sim.b] {
        let evs = events(end.conn.as_mut().unwrap());
        assert!(evs.contains(&Event::StateChanged { from: State::FinWait1, to: State::Closing }), "{evs:?}");
    }
    assert!(sim.run_until(Duration::from_secs(3), |s| state(&s.a) == State::Closed && state(&s.b) == State::Closed));
}

#[test]
fn simultaneous_open_reaches_established() {
    let (a, b) = addrs(false);
    let mut sim = Sim::new(link(), link());
    sim.a.conn = Some(Connection::connect(a, b, TcpConfig::default(), Seq(100)));
    sim.b.conn = Some(Connection::connect(b, a, TcpConfig::default(), Seq(900)));
    assert!(sim.run_until(Duration::from_secs(2), established));
    sim.b.to_send.extend(pattern(3000));
    assert!(sim.run_until(Duration::from_secs(2), |s| s.a.received.len() == 3000));
}

#[test]
fn close_in_syn_sent_and_syn_received() {
    let (a, b) = addrs(false);
    let mut client = Connection::connect(a, b, TcpConfig::default(), Seq(1));
    let syn = client.poll_transmit(leantcp::Instant::ZERO).unwrap();
    client.close(leantcp::Instant::ZERO);
    assert_eq!(client.state(), State::Closed);
    assert!(client.poll_transmit(leantcp::Instant::ZERO).is_none());

    let mut server = Connection::accept(&syn, TcpConfig::default(), Seq(77)).unwrap();
    assert_eq!(server.state(), State::SynReceived);
    server.close(leantcp::Instant::ZERO);
    assert_eq!(server.state(), State::FinWait1);
    let synack = server.poll_transmit(leantcp::Instant::ZERO).unwrap();
    assert!(synack.syn && synack.ack == Some(Seq(2)));
}

#[test]
fn abort_sends_rst_and_the_peer_closes() {
    let mut sim = setup(TcpConfig::default(), TcpConfig::default(), link(), link(), false);
    assert!(sim.run_until(Duration::from_secs(1), established));
    let now = sim.now;
    sim.b.conn.as_mut().unwrap().abort(now);
    assert!(sim.run_until(Duration::from_secs(1), |s| state(&s.a) == State::Closed));
    assert!(events(sim.a.conn.as_mut().unwrap()).contains(&Event::ResetReceived));
}

#[test]
fn connecting_to_no_listener_is_reset() {
    let (a, b) = addrs(true);
    let mut sim = Sim::new(link(), link());
    sim.a.conn = Some(Connection::connect(a, b, TcpConfig::default(), Seq(1)));
    assert!(sim.run_until(Duration::from_secs(1), |s| state(&s.a) == State::Closed));
    assert_eq!(sim.b.resets_sent, 1);
}

#[test]
fn lost_syn_and_lost_fin_are_retransmitted() {
    let cfg = TcpConfig { time_wait: Duration::from_secs(1), ..TcpConfig::default() };
    // a->b #0 is the SYN; b->a #1 is the server's FIN (after the SYN-ACK #0).
    let mut sim = setup(
        cfg,
        cfg,
        LinkConfig { drop_indices: vec![0], ..link() },
        LinkConfig { drop_indices: vec![1], ..link() },
        false,
    );
    assert!(sim.run_until(Duration::from_secs(3), established));
    assert!(sim.now >= leantcp::Instant::from_millis(1000), "SYN resent after the 1 s initial RTO");
    let now = sim.now;
    sim.b.conn.as_mut().unwrap().close(now);
    assert!(sim.run_until(Duration::from_secs(5), |s| state(&s.a) == State::CloseWait));
    assert_eq!(sim.b.conn.as_ref().unwrap().stats().timeouts, 1);
}

#[test]
fn random_loss_still_delivers_everything() {
    for seed in 1..=3 {
        let lossy = LinkConfig { loss: 0.02, seed, ..link() };
        let sim =
            transfer(TcpConfig::default(), LinkConfig { loss: 0.02, seed: seed + 100, ..link() }, lossy, 160 * 1024);
        assert!(sim.b.conn.as_ref().unwrap().stats().timeouts >= 1);
    }
}

#[test]
fn drop_tail_queue_overflow_is_recovered_by_go_back_n() {
    // No congestion control into a 10 Mbit/s link with a 20-packet queue: the burst overflows.
    let narrow = LinkConfig { rate_bps: 10_000_000, queue_packets: 20, ..link() };
    let sim = transfer(TcpConfig::default(), link(), narrow, 320 * 1024);
    assert!(sim.b_to_a.dropped_queue > 0);
    assert!(sim.b.conn.as_ref().unwrap().stats().retransmissions > 0);
}

/// The segment `from` would send next carrying RST with sequence number `seq_offset` past its SND.NXT.
fn reset_from(from: &leantcp::sim::Endpoint, seq_offset: u32) -> leantcp::Segment {
    let last = from.sent_log.last().expect("endpoint sent something");
    let mut rst = last.clone();
    rst.seq = last.seq + (last.seq_len() + seq_offset as usize);
    rst.ack = None;
    (rst.syn, rst.fin, rst.rst, rst.psh) = (false, false, true, false);
    rst.payload.clear();
    rst
}

/// RFC 9293 §3.10.7.4 with RFC 5961 §3: an exact RST closes the connection in every
/// synchronized state; one inside the window but not exact draws a challenge ACK; one
/// outside the window is dropped silently. Checked in ESTABLISHED, FIN-WAIT-2 and CLOSE-WAIT.
#[test]
fn reset_closes_every_synchronized_state_only_when_exact() {
    let targets = [State::Established, State::FinWait2, State::CloseWait];
    for target in targets {
        let mut sim = setup(TcpConfig::default(), TcpConfig::default(), link(), link(), false);
        assert!(sim.run_until(Duration::from_secs(1), established));
        match target {
            State::FinWait2 => sim.b.conn.as_mut().unwrap().close(sim.now),
            State::CloseWait => sim.a.conn.as_mut().unwrap().close(sim.now),
            _ => {}
        }
        assert!(sim.run_until(Duration::from_secs(1), |s| state(&s.b) == target
            && !s.b.conn.as_ref().unwrap().wants_transmit()));
        let now = sim.now;
        let server = sim.b.conn.as_mut().unwrap();
        server.handle_segment(&reset_from(&sim.a, 1 << 20), now);
        assert_eq!(server.state(), target, "{target:?}: RST outside the window must not close");
        assert!(server.poll_transmit(now).is_none(), "{target:?}: RST outside the window is dropped silently");
        server.handle_segment(&reset_from(&sim.a, 1), now);
        assert_eq!(server.state(), target, "{target:?}: RST in the window but not exact must not close");
        let ack = server.poll_transmit(now).expect("a challenge ACK answers the inexact RST");
        assert!(ack.ack.is_some() && !ack.rst && ack.payload.is_empty(), "{ack:?}");
        server.handle_segment(&reset_from(&sim.a, 0), now);
        assert_eq!(server.state(), State::Closed, "{target:?}: exact RST closes");
        assert!(events(server).contains(&Event::ResetReceived));
        assert!(server.poll_transmit(now).is_none(), "nothing is sent after a RST");
    }
}

/// FIN-WAIT-1 straight to TIME-WAIT when the peer's FIN also acknowledges ours, and the
/// FIN of a close() in SYN-RECEIVED goes out once the handshake completes.
#[test]
fn fin_wait_1_to_time_wait_and_close_before_established() {
    let mut sim = setup(
        TcpConfig::default(),
        TcpConfig { time_wait: Duration::from_secs(1), ..TcpConfig::default() },
        link(),
        link(),
        false,
    );
    assert!(sim.run_until(Duration::from_secs(1), established));
    let now = sim.now;
    sim.b.conn.as_mut().unwrap().close(now);
    let fin = sim.b.conn.as_mut().unwrap().poll_transmit(now).expect("server FIN");
    assert!(fin.fin);
    // The client sees the FIN and closes at once: its FIN+ACK answers both.
    let client = sim.a.conn.as_mut().unwrap();
    client.handle_segment(&fin, now);
    client.close(now);
    let fin_ack = client.poll_transmit(now).expect("client FIN+ACK");
    assert!(fin_ack.fin && fin_ack.ack == Some(fin.seq + 1));
    let server = sim.b.conn.as_mut().unwrap();
    assert_eq!(server.state(), State::FinWait1);
    server.handle_segment(&fin_ack, now);
    assert_eq!(server.state(), State::TimeWait);
    // RFC 9293: the ACK of our FIN is processed first (FIN-WAIT-2), then the FIN, in one segment.
    let evs = events(server);
    assert!(
        evs.ends_with(&[
            Event::StateChanged { from: State::FinWait1, to: State::FinWait2 },
            Event::StateChanged { from: State::FinWait2, to: State::TimeWait },
        ]),
        "{evs:?}"
    );

    // close() in SYN-RECEIVED: SYN-ACK first, FIN after the handshake's ACK.
    let (a, b) = addrs(true);
    let mut client = Connection::connect(a, b, TcpConfig::default(), Seq(1));
    let t = leantcp::Instant::ZERO;
    let syn = client.poll_transmit(t).unwrap();
    let mut server = Connection::accept(&syn, TcpConfig::default(), Seq(77)).unwrap();
    server.close(t);
    let synack = server.poll_transmit(t).unwrap();
    assert!(server.poll_transmit(t).is_none(), "no FIN before the handshake completes");
    client.handle_segment(&synack, t);
    let ack = client.poll_transmit(t).unwrap();
    server.handle_segment(&ack, t);
    let fin = server.poll_transmit(t).expect("FIN after the handshake");
    assert!(fin.fin && fin.seq == Seq(78));
    client.handle_segment(&fin, t);
    assert_eq!(client.state(), State::CloseWait);
}

/// SYN cookies (RFC 4987 §3.6) end to end: the server keeps nothing for the SYN; the first
/// cookie SYN-ACK and the first segment completing the handshake are lost, and 2 % random
/// loss follows. The connection built from the cookie carries the negotiated SACK,
/// timestamps and window scale, and 320 KiB arrive intact over v4 and v6.
#[test]
fn syn_cookie_handshake_survives_loss_and_carries_the_options() {
    for v6 in [false, true] {
        let a_to_b = LinkConfig { drop_indices: vec![2], loss: 0.02, seed: 11, ..link() };
        let b_to_a = LinkConfig { drop_indices: vec![0], loss: 0.02, seed: 12, ..link() };
        let mut sim = setup(TcpConfig::modern(), TcpConfig::modern(), a_to_b, b_to_a, v6);
        sim.b.cookies = Some(leantcp::SynCookies::with_key([3; 16]));
        let body = pattern(320 * 1024);
        sim.a.to_send.extend(b"GET / HTTP/1.1\r\n\r\n");
        sim.b.to_send.extend(&body);
        sim.b.close_after_send = true;
        assert!(
            sim.run_until(Duration::from_secs(120), |s| s.a.received.len() == body.len()),
            "v6={v6}: {} bytes",
            sim.a.received.len()
        );
        assert_eq!(sim.a.received, body);
        assert!(sim.b.cookies_sent >= 2, "the lost SYN-ACK was answered by a new cookie");
        assert_eq!(sim.b.cookies_validated, 1);
        let server = sim.b.conn.as_ref().unwrap();
        assert!(server.sack_in_use() && server.timestamps_in_use());
        assert_eq!(server.send_mss(), if v6 { 1440 } else { 1460 });
        assert_eq!(server.stats().bytes_received, 18, "the request arrived once, intact");
        assert!(sim.b.sent_log[0].syn && sim.b.sent_log[0].window_scale == Some(2));
    }
}

#[test]
fn push_marks_every_segment_or_only_the_end_of_the_queued_data() {
    let len = 100 * 1024; // queued at once: it fits the 256 KiB send buffer
    for (push, expect_all) in [(Push::EverySegment, true), (Push::EndOfData, false)] {
        let sim = transfer(TcpConfig { push, ..TcpConfig::modern() }, link(), link(), len);
        let data: Vec<_> = sim.b.sent_log.iter().filter(|s| !s.payload.is_empty()).collect();
        let end_of_data = |s: &&Segment| {
            s.seq + s.payload.len() == data.last().unwrap().seq + data.last().unwrap().payload.len()
        };
        assert!(data.len() > 60, "{} data segments", data.len());
        for seg in &data {
            let want = expect_all || end_of_data(seg);
            assert_eq!(seg.psh, want, "{push:?}: segment at {:?} of {} bytes", seg.seq, seg.payload.len());
        }
    }
}
