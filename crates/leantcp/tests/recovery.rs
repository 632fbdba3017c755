//! Loss recovery in the deterministic simulator, one test per RFC behaviour: NewReno's
//! fast retransmit and partial ACKs (RFC 6582), limited transmit (RFC 3042), SACK blocks
//! and reassembly (RFC 2018), the SACK scoreboard and pipe (RFC 6675), RACK's reordering
//! window and the tail loss probe (RFC 8985), timestamps and Karn's rule (RFC 7323,
//! RFC 6298), the persist timer under the modern profile, and whole transfers over lossy
//! links. The server (`b`) sends; the client (`a`) receives and is a modern stack too
//! unless a test says otherwise (a Linux client offers SACK and timestamps).
use std::time::Duration;

use leantcp::cc::CcKind;
use leantcp::recovery::RecoveryKind;
use leantcp::sim::{LinkConfig, Sim};
use leantcp::{Connection, Event, Instant, RetransmitKind, Segment, Seq, State, TcpConfig};

mod common;
use common::*;

/// 100 Mbit/s, 5 ms each way, and a queue long enough that slow start overflows nothing:
/// the only losses are the ones a test asks for.
fn link() -> LinkConfig {
    LinkConfig { queue_packets: 1000, ..LinkConfig::default() }
}

/// A receiver like Linux's: SACK and timestamps on, a 256 KiB window.
fn client() -> TcpConfig {
    TcpConfig { recv_buffer_bytes: 256 * 1024, window_scale: 7, ..TcpConfig::modern() }
}

fn newreno() -> TcpConfig {
    TcpConfig { cc: CcKind::Reno, recovery: RecoveryKind::NewReno, limited_transmit: true, ..TcpConfig::bare() }
}

/// The server sends `len` bytes and closes; returns the sim once the client has all of it
/// and the time the transfer took (from queueing the data to the last byte at the client).
fn transfer_with(
    client: TcpConfig,
    server: TcpConfig,
    a_to_b: LinkConfig,
    b_to_a: LinkConfig,
    v6: bool,
    len: usize,
) -> (Sim, Duration) {
    let mut sim = connected(client, server, a_to_b, b_to_a, v6);
    let start = sim.now;
    sim.b.to_send.extend(pattern(len));
    sim.b.close_after_send = true;
    let done =
        sim.run_until(Duration::from_secs(600), |s| s.a.received.len() == len && state(&s.a) == State::CloseWait);
    assert!(done, "transfer of {len} bytes did not finish: got {}", sim.a.received.len());
    assert_eq!(sim.a.received, pattern(len), "byte-identical");
    let took = sim.now.saturating_since(start);
    (sim, took)
}

fn transfer(server: TcpConfig, b_to_a: LinkConfig, len: usize) -> (Sim, Duration) {
    transfer_with(client(), server, link(), b_to_a, false, len)
}

fn server_events(sim: &mut Sim) -> Vec<Event> {
    events(sim.b.conn.as_mut().unwrap())
}

fn retransmits(evs: &[Event]) -> Vec<(u32, RetransmitKind)> {
    evs.iter()
        .filter_map(|e| match e {
            Event::Retransmit { seq, kind, .. } => Some((*seq, *kind)),
            _ => None,
        })
        .collect()
}

/// Link indices (server → client) of the segments a loss-free run of `server` sends for
/// `len` bytes: index 0 is the SYN-ACK, data follows.
fn data_indices(server: TcpConfig, len: usize) -> Vec<u64> {
    let (sim, _) = transfer(server, link(), len);
    sim.b.sent_log.iter().enumerate().filter(|(_, s)| !s.payload.is_empty()).map(|(i, _)| i as u64).collect()
}

fn seq_of(sim: &Sim, index: u64) -> u32 {
    sim.b.sent_log[index as usize].seq.0
}

/// When the server sent segment `seq` for the n-th time (0 = original), by the sent log's
/// order: the sim records no times, so this counts the segments before it.
fn nth_send_position(sim: &Sim, seq: u32, n: usize) -> usize {
    sim.b
        .sent_log
        .iter()
        .enumerate()
        .filter(|(_, s)| s.seq.0 == seq && !s.payload.is_empty())
        .nth(n)
        .map(|(i, _)| i)
        .expect("sent")
}

#[test]
fn modern_beats_bare_on_a_lossy_path_and_stays_byte_identical() {
    let len = 320 * 1024;
    let mut slower = 0;
    for seed in 1..=6u64 {
        let lossy = LinkConfig { loss: 0.05, seed, ..link() };
        let (_, bare) = transfer(TcpConfig::bare(), lossy.clone(), len);
        let (sim, modern) = transfer_with(client(), TcpConfig::modern(), link(), lossy, seed % 2 == 0, len);
        let stats = sim.b.conn.as_ref().unwrap().stats();
        println!(
            "seed {seed}: bare {bare:?} modern {modern:?} timeouts {} recoveries {} tlp {}",
            stats.timeouts, stats.recoveries, stats.tail_loss_probes
        );
        if modern >= bare {
            slower += 1;
        }
        assert!(modern < Duration::from_millis(800), "seed {seed}: modern took {modern:?}");
    }
    assert_eq!(slower, 0, "modern slower than bare in {slower} of 6 seeds");
}

/// RFC 6582 §3.2: one loss in a window is repaired by fast retransmit on the third
/// duplicate ACK, without a timeout; one window reduction; recovery ends on the full ACK.
#[test]
fn newreno_fast_retransmit_repairs_one_loss_without_timeout() {
    let len = 200 * 1024;
    let data = data_indices(newreno(), len);
    let lost = data[20];
    let (mut sim, _) = transfer(newreno(), LinkConfig { drop_indices: vec![lost], ..link() }, len);
    assert!(
        sim.run_until(Duration::from_secs(1), |s| state(&s.b) == State::FinWait2),
        "the last ACK reaches the server"
    );
    let lost_seq = seq_of(&sim, lost);
    let server = sim.b.conn.as_ref().unwrap();
    let stats = server.stats();
    assert_eq!(stats.timeouts, 0);
    assert_eq!(stats.recoveries, 1);
    assert!(stats.duplicate_acks >= 3);
    assert_eq!(server.recovery_name(), "newreno");
    let evs = server_events(&mut sim);
    assert_eq!(retransmits(&evs), vec![(lost_seq, RetransmitKind::Recovery)]);
    let recovery: Vec<_> = evs.iter().filter(|e| matches!(e, Event::Recovery { .. })).collect();
    let entered_then_left = matches!(recovery.as_slice(),
        [Event::Recovery { entered: true, cwnd_bytes: c, ssthresh_bytes: s }, Event::Recovery { entered: false, .. }]
        if c == s);
    assert!(
        entered_then_left,
        "{recovery:?}"
    );
}

/// RFC 6582 §3.2 step 5: two losses in one window — the partial ACK after the first
/// retransmission retransmits the second hole at once (no third duplicate ACK, no
/// timeout), still within one recovery (one window reduction).
#[test]
fn newreno_partial_ack_retransmits_the_next_hole() {
    let len = 200 * 1024;
    let data = data_indices(newreno(), len);
    let (first, second) = (data[20], data[24]);
    let (mut sim, _) = transfer(newreno(), LinkConfig { drop_indices: vec![first, second], ..link() }, len);
    let (s1, s2) = (seq_of(&sim, first), seq_of(&sim, second));
    let stats = sim.b.conn.as_ref().unwrap().stats();
    assert_eq!((stats.timeouts, stats.recoveries), (0, 1));
    let evs = server_events(&mut sim);
    assert_eq!(retransmits(&evs), vec![(s1, RetransmitKind::Recovery), (s2, RetransmitKind::Recovery)]);
    // The second hole is resent when the partial ACK arrives (one-way delay after the
    // client sent it), not after three more duplicate ACKs.
    let partial = sim.a.sent_log.iter().position(|s| s.ack == Some(Seq(s2))).expect("partial ACK");
    let retx = nth_send_position(&sim, s2, 1);
    let gap = sim.b.sent_times[retx].saturating_since(sim.a.sent_times[partial]);
    assert!(gap < Duration::from_micros(5_200), "second hole resent {gap:?} after the partial ACK left the client");
}

/// RFC 3042: with a congestion window of 3 segments and the first one lost, only two
/// duplicate ACKs can come back. Limited transmit sends one new segment for each, which
/// draws the third duplicate ACK: fast retransmit instead of a timeout.
#[test]
fn limited_transmit_turns_a_timeout_into_fast_retransmit() {
    let len = 20 * 1024;
    let iw3 = |limited_transmit| TcpConfig { initial_window_segments: 3, limited_transmit, ..newreno() };
    let data = data_indices(iw3(true), len);
    for limited_transmit in [true, false] {
        let (mut sim, took) =
            transfer(iw3(limited_transmit), LinkConfig { drop_indices: vec![data[0]], ..link() }, len);
        let stats = sim.b.conn.as_ref().unwrap().stats();
        let evs = server_events(&mut sim);
        let kinds: Vec<_> = retransmits(&evs).into_iter().map(|(_, k)| k).collect();
        if limited_transmit {
            assert_eq!((stats.timeouts, stats.recoveries), (0, 1), "{kinds:?}");
            assert_eq!(kinds, vec![RetransmitKind::Recovery]);
            // Segments 4 and 5 (beyond cwnd = 3) left before the retransmission.
            let retx = nth_send_position(&sim, seq_of(&sim, data[0]), 1);
            let new_before = sim.b.sent_log[..retx].iter().filter(|s| !s.payload.is_empty()).count();
            assert_eq!(new_before, 5, "3 in the initial window + 2 by limited transmit");
            assert!(took < Duration::from_millis(200), "{took:?}");
        } else {
            assert_eq!(stats.timeouts, 1, "{kinds:?}");
            assert!(took >= Duration::from_millis(1000), "1 s minimum RTO of the bare timer: {took:?}");
        }
    }
}

/// RFC 6675: three losses in one window are all resent within about one round trip of
/// the first (the scoreboard knows every hole), where NewReno needs a round trip per hole.
#[test]
fn sack_recovery_repairs_several_holes_in_one_round_trip() {
    let len = 200 * 1024;
    let sack = TcpConfig { rack_tlp: false, ..TcpConfig::modern() };
    let data = data_indices(sack, len);
    let lost = vec![data[30], data[33], data[36]];
    let (mut sim, sack_took) = transfer(sack, LinkConfig { drop_indices: lost.clone(), ..link() }, len);
    let server = sim.b.conn.as_ref().unwrap();
    assert!(server.sack_in_use());
    assert_eq!(server.recovery_name(), "sack");
    let stats = server.stats();
    assert_eq!((stats.timeouts, stats.recoveries, stats.retransmissions), (0, 1, 3));
    let seqs: Vec<u32> = lost.iter().map(|i| seq_of(&sim, *i)).collect();
    let evs = server_events(&mut sim);
    assert_eq!(retransmits(&evs).into_iter().map(|(s, _)| s).collect::<Vec<_>>(), seqs);
    // All three retransmissions leave before any of them can have been acknowledged:
    // between the first and the last, fewer than a window's worth of segments.
    let (p1, p3) = (nth_send_position(&sim, seqs[0], 1), nth_send_position(&sim, seqs[2], 1));
    assert!(p3 - p1 < 10, "retransmissions {p1}..{p3} spread over more than a round trip");
    // The client's duplicate ACKs carried SACK blocks, newest first (RFC 2018 §4).
    let with_blocks: Vec<&Segment> = sim.a.sent_log.iter().filter(|s| !s.sack_blocks.is_empty()).collect();
    assert!(!with_blocks.is_empty());
    assert!(with_blocks.iter().all(|s| s.sack_blocks.len() <= 3 && s.timestamp.is_some()));
    let (_, newreno_took) = transfer_with(
        TcpConfig::bare(),
        newreno(),
        link(),
        LinkConfig {
            drop_indices: data_indices(newreno(), len).iter().copied().filter(|i| lost.contains(i)).collect(),
            ..link()
        },
        false,
        len,
    );
    assert!(sack_took + Duration::from_millis(15) < newreno_took, "SACK {sack_took:?} vs NewReno {newreno_took:?}");
}

/// RFC 6675 SetPipe during recovery: pipe = segments neither SACKed nor lost + the
/// retransmissions in flight, and the sender never has more than cwnd of it out.
#[test]
fn sack_pipe_stays_within_cwnd_during_recovery() {
    let len = 300 * 1024;
    let sack = TcpConfig { rack_tlp: false, ..TcpConfig::modern() };
    let data = data_indices(sack, len);
    let mut sim = connected(
        client(),
        sack,
        link(),
        LinkConfig { drop_indices: vec![data[40], data[41], data[50]], ..link() },
        false,
    );
    sim.b.to_send.extend(pattern(len));
    let (mut checked, mut prev_pipe) = (0, usize::MAX);
    let done = sim.run_until(Duration::from_secs(10), |s| {
        let conn = s.b.conn.as_ref().unwrap();
        if conn.in_recovery() {
            let sb = conn.scoreboard();
            let expected: usize = sb
                .iter()
                .filter(|g| !g.sacked)
                .map(|g| if g.lost { 0 } else { g.len() } + if g.retx_in_flight { g.len() } else { 0 })
                .sum();
            assert_eq!(sb.pipe(), expected);
            // Right after entry pipe may exceed the halved cwnd; it may grow only below cwnd.
            if sb.pipe() > prev_pipe {
                assert!(sb.pipe() <= conn.cwnd(), "pipe grew to {} over cwnd {}", sb.pipe(), conn.cwnd());
            }
            prev_pipe = sb.pipe();
            checked += 1;
        } else {
            prev_pipe = usize::MAX;
        }
        s.a.received.len() == len
    });
    assert!(done && checked > 0);
}

/// RFC 2018 receiver: out-of-order data with holes, overlaps and duplicates is kept,
/// reassembled and delivered once the holes fill; SACK blocks report the most recently
/// received block first and never what is already acknowledged.
#[test]
fn reassembly_with_holes_and_overlaps_and_sack_block_order() {
    let (a, b) = addrs(false);
    let t = Instant::ZERO;
    let mut client = Connection::connect(a, b, client(), Seq(1));
    let syn = client.poll_transmit(t).unwrap();
    assert!(syn.sack_permitted && syn.timestamp.is_some());
    let mut server = Connection::accept(&syn, TcpConfig::modern(), Seq(5000)).unwrap();
    let synack = server.poll_transmit(t).unwrap();
    assert!(synack.sack_permitted && synack.timestamp.is_some());
    client.handle_segment(&synack, t);
    let _ack = client.poll_transmit(t).unwrap();
    assert!(client.sack_in_use() && client.timestamps_in_use());
    let base = Seq(5001);
    let data = pattern(1000);
    let seg = |from: usize, to: usize| {
        let mut s = synack.clone();
        (s.syn, s.sack_permitted, s.mss, s.window_scale) = (false, false, None, None);
        s.seq = base + from;
        s.payload = data[from..to].to_vec();
        s
    };
    let ack_after = |client: &mut Connection, s: Segment| {
        client.handle_segment(&s, t);
        client.poll_transmit(t).expect("an ACK for every data segment")
    };
    let rel = |blocks: &[(Seq, Seq)]| blocks.iter().map(|(l, r)| (l.diff(base), r.diff(base))).collect::<Vec<_>>();
    let ack = ack_after(&mut client, seg(300, 400));
    assert_eq!(ack.ack, Some(base));
    assert_eq!(rel(&ack.sack_blocks), vec![(300, 400)]);
    let ack = ack_after(&mut client, seg(600, 700));
    assert_eq!(rel(&ack.sack_blocks), vec![(600, 700), (300, 400)], "newest block first");
    let ack = ack_after(&mut client, seg(350, 500)); // overlaps and extends the first block
    assert_eq!(rel(&ack.sack_blocks), vec![(300, 500), (600, 700)]);
    let ack = ack_after(&mut client, seg(800, 900));
    assert_eq!(rel(&ack.sack_blocks), vec![(800, 900), (300, 500), (600, 700)]);
    let ack = ack_after(&mut client, seg(500, 600)); // joins two blocks
    assert_eq!(rel(&ack.sack_blocks), vec![(300, 700), (800, 900)]);
    let ack = ack_after(&mut client, seg(650, 680)); // duplicate inside a block
    assert_eq!(rel(&ack.sack_blocks), vec![(300, 700), (800, 900)]);
    assert_eq!(client.recv_queue_len(), 0, "nothing in order yet");
    let ack = ack_after(&mut client, seg(0, 310)); // fills the first hole, overlapping
    assert_eq!(ack.ack, Some(base + 700));
    assert_eq!(rel(&ack.sack_blocks), vec![(800, 900)], "acknowledged data leaves the blocks");
    let ack = ack_after(&mut client, seg(700, 1000));
    assert_eq!(ack.ack, Some(base + 1000));
    assert!(ack.sack_blocks.is_empty());
    assert_eq!(client.recv(usize::MAX), data);
    assert_eq!(client.stats().bytes_received, 1000);
}

/// The bare stack keeps no reassembly queue: out-of-order data is dropped and asked for
/// again, and no SACK is offered or sent.
#[test]
fn bare_receiver_drops_out_of_order_data_and_offers_no_options() {
    let (a, b) = addrs(true);
    let t = Instant::ZERO;
    let mut client = Connection::connect(a, b, TcpConfig::bare(), Seq(1));
    let syn = client.poll_transmit(t).unwrap();
    assert!(!syn.sack_permitted && syn.timestamp.is_none());
    let mut server = Connection::accept(&syn, TcpConfig::modern(), Seq(5000)).unwrap();
    let synack = server.poll_transmit(t).unwrap();
    assert!(!synack.sack_permitted && synack.timestamp.is_none(), "the modern server only answers what was offered");
    client.handle_segment(&synack, t);
    client.poll_transmit(t).unwrap();
    let mut s = synack.clone();
    (s.syn, s.mss, s.window_scale) = (false, None, None);
    s.seq = Seq(5101);
    s.payload = vec![1; 100];
    client.handle_segment(&s, t);
    let ack = client.poll_transmit(t).unwrap();
    assert_eq!(ack.ack, Some(Seq(5001)));
    assert!(ack.sack_blocks.is_empty() && client.out_of_order_blocks().is_empty());
    assert_eq!(server.recovery_name(), "newreno", "modern without SACK from the peer falls back to NewReno");
}

/// RFC 8985 §6.2: a segment that arrives late but within RACK's reordering window is not
/// retransmitted. The first reordering cannot be told from a loss (no reordering seen yet,
/// 3 SACKed segments: the window is 0), so it costs one needless retransmission; that
/// retransmission's too-fast ACK shows the reordering, the window opens to min RTT / 4,
/// and the second late segment is waited for. SACK's DupThresh (RACK off) resends both.
#[test]
fn rack_reordering_window_tolerates_late_segments_once_reordering_is_seen() {
    let len = 300 * 1024;
    let modern = TcpConfig::modern();
    let data = data_indices(modern, len);
    let late = |d: u64| (d, Duration::from_millis(1)); // ~8 segments overtake it at 100 Mbit/s
    let reorder = LinkConfig { delay_indices: vec![late(data[20]), late(data[150])], ..link() };
    let mut needless = Vec::new();
    for rack_tlp in [true, false] {
        let server = TcpConfig { rack_tlp, ..modern };
        let (mut sim, _) = transfer(server, reorder.clone(), len);
        let stats = sim.b.conn.as_ref().unwrap().stats();
        assert_eq!(stats.timeouts, 0);
        let retx = retransmits(&server_events(&mut sim)).len();
        needless.push(retx);
        if rack_tlp {
            assert_eq!(retx, 1, "RACK: only the first reordering is taken for a loss");
        } else {
            assert_eq!(retx, 2, "DupThresh: every reordering beyond 3 segments is a loss");
        }
    }
    println!("needless retransmissions with/without RACK: {needless:?}");
}

/// RFC 8985 §6.2 step 5: five segments leave in one burst, the fourth is lost. One
/// SACKed segment is too few for DupThresh, and when its SACK arrives the lost one is not
/// yet overdue: RACK arms the reordering timer and resends it RACK.rtt + min RTT / 4
/// after it was sent — no probe, no timeout.
#[test]
fn rack_reorder_timer_finds_a_loss_dupthresh_cannot() {
    let modern = TcpConfig::modern();
    let len = 5 * 1448;
    let data = data_indices(modern, len);
    assert_eq!(data.len(), 5);
    let lost = data[3];
    let (mut sim, _) = transfer(modern, LinkConfig { drop_indices: vec![lost], ..link() }, len);
    let lost_seq = seq_of(&sim, lost);
    let stats = sim.b.conn.as_ref().unwrap().stats();
    assert_eq!((stats.timeouts, stats.tail_loss_probes, stats.recoveries, stats.rack_marked_lost), (0, 0, 1, 1));
    assert_eq!(retransmits(&server_events(&mut sim)), vec![(lost_seq, RetransmitKind::Recovery)]);
    let sent = sim.b.sent_times[nth_send_position(&sim, lost_seq, 0)];
    let resent = sim.b.sent_times[nth_send_position(&sim, lost_seq, 1)];
    let sack_left_client =
        sim.a.sent_times[sim.a.sent_log.iter().position(|s| !s.sack_blocks.is_empty()).expect("a SACK")];
    let sack_arrived = sack_left_client + Duration::from_millis(5);
    assert!(resent > sack_arrived + Duration::from_millis(1), "resent on the timer, not on the SACK's arrival");
    let after = resent.saturating_since(sent);
    // RACK.rtt ≈ 10.1 ms (2 × 5 ms + serialisation), reordering window ≈ 10 ms / 4.
    assert!(after >= Duration::from_micros(12_400) && after < Duration::from_micros(13_500), "{after:?}");
}

/// RFC 8985 §7: the last two segments are lost; nothing comes back to trigger SACK or
/// RACK. The probe timeout (2·SRTT) resends the last segment, its SACK lets RACK find
/// the other hole: repaired in a few round trips instead of a 200 ms timeout.
#[test]
fn tail_loss_probe_repairs_a_tail_loss_without_timeout() {
    let len = 100 * 1024;
    let modern = TcpConfig::modern();
    let data = data_indices(modern, len);
    let tail = vec![data[data.len() - 2], data[data.len() - 1]];
    let mut took = Vec::new();
    for rack_tlp in [true, false] {
        let server = TcpConfig { rack_tlp, ..modern };
        let (mut sim, t) = transfer(server, LinkConfig { drop_indices: tail.clone(), ..link() }, len);
        let stats = sim.b.conn.as_ref().unwrap().stats();
        let evs = server_events(&mut sim);
        if rack_tlp {
            assert_eq!((stats.timeouts, stats.tail_loss_probes), (0, 1), "{:?}", retransmits(&evs));
            let probe = evs.iter().find_map(|e| match e {
                Event::TailLossProbe { seq, retransmission } => Some((*seq, *retransmission)),
                _ => None,
            });
            assert_eq!(probe, Some((seq_of(&sim, tail[1]), true)), "no new data left: the last segment is resent");
        } else {
            assert_eq!(stats.timeouts, 1);
        }
        took.push(t);
    }
    assert!(took[0] + Duration::from_millis(100) < took[1], "TLP {:?} vs RTO {:?}", took[0], took[1]);
}

/// RFC 6298 §3 (Karn) vs RFC 7323 §4.1: the only segment is lost and resent after a
/// timeout. Without timestamps its ACK is ambiguous — no sample, the backoff stays;
/// with timestamps the echoed TSval times the retransmission: a sample, backoff cleared.
#[test]
fn karn_with_and_without_timestamps() {
    for timestamps in [true, false] {
        let server = TcpConfig { rack_tlp: false, timestamps, ..TcpConfig::modern() };
        let mut sim = connected(client(), server, link(), LinkConfig { drop_indices: vec![1], ..link() }, false);
        let before = sim.b.conn.as_ref().unwrap().stats().rtt_samples;
        sim.b.to_send.extend(pattern(1000));
        assert!(sim.run_until(Duration::from_secs(5), |s| s.a.received.len() == 1000
            && !s.b.conn.as_ref().unwrap().timers().is_armed(leantcp::timer::Timer::Retransmission)));
        let server = sim.b.conn.as_ref().unwrap();
        assert_eq!(server.timestamps_in_use(), timestamps);
        let stats = server.stats();
        assert_eq!(stats.timeouts, 1);
        if timestamps {
            assert_eq!((stats.rtt_samples - before, stats.timestamp_rtt_samples), (1, 1));
            assert_eq!(server.rto().backoff_shift(), 0, "a valid sample clears the backoff");
            let latest = server.rtt_stats().latest.unwrap();
            assert!(
                latest >= Duration::from_millis(10) && latest <= Duration::from_millis(11),
                "1 ms ticks: {latest:?}"
            );
        } else {
            assert_eq!((stats.rtt_samples - before, stats.timestamp_rtt_samples), (0, 0));
            assert_eq!(server.rto().backoff_shift(), 1, "Karn: the backoff stays until a clean sample");
        }
    }
}

/// RFC 9293 §3.8.6.1 under the modern profile: a zero window is probed on the persist
/// timer (its own slot in the timer table), never counted as a timeout, and the transfer
/// completes once the reader reads.
#[test]
fn persist_timer_probes_a_zero_window_under_the_modern_profile() {
    let reader = TcpConfig { recv_buffer_bytes: 8192, window_scale: 0, ..client() };
    let mut sim = connected(reader, TcpConfig::modern(), link(), link(), false);
    sim.a.reading = false;
    sim.b.to_send.extend(pattern(50_000));
    let mut persist_seen = false;
    sim.run_until(Duration::from_secs(20), |s| {
        persist_seen |= s.b.conn.as_ref().unwrap().timers().is_armed(leantcp::timer::Timer::Persist);
        false
    });
    assert!(persist_seen);
    let server = sim.b.conn.as_mut().unwrap();
    assert_eq!(server.peer_window(), 0);
    let probes = events(server).into_iter().filter(|e| matches!(e, Event::ZeroWindowProbe { .. })).count();
    assert!(probes >= 2, "expected persist probes, got {probes}");
    assert_eq!(server.stats().timeouts, 0, "probes are not timeouts");
    sim.a.reading = true;
    assert!(sim.run_until(Duration::from_secs(120), |s| s.a.received.len() == 50_000));
    assert_eq!(sim.a.received, pattern(50_000));
}

/// The controller is built when the handshake fixes the MSS: IW10 of the peer's MSS
/// (less the timestamps option), not of our MTU.
#[test]
fn controller_is_built_with_the_negotiated_mss() {
    let (a, b) = addrs(false);
    let t = Instant::ZERO;
    let small = TcpConfig { mtu: 1040, ..client() }; // MSS 1000
    let mut client = Connection::connect(a, b, small, Seq(1));
    let syn = client.poll_transmit(t).unwrap();
    assert_eq!(syn.mss, Some(1000));
    let server = Connection::accept(&syn, TcpConfig::modern(), Seq(9)).unwrap();
    assert_eq!((server.send_mss(), server.data_mss()), (1000, 988));
    assert_eq!(server.cwnd(), 10 * 988);
    let bare = Connection::accept(&syn, TcpConfig::bare(), Seq(9)).unwrap();
    assert_eq!((bare.data_mss(), bare.cwnd()), (1000, usize::MAX));
}

/// Whole transfers over IPv4 and IPv6 with random loss both ways under every recovery
/// policy: byte-identical; with RACK-TLP never slower than go-back-N. (Without RACK a
/// lost retransmission still waits for the RTO — 1 s here, the bare timer — so plain
/// NewReno can lose to go-back-N's wholesale resend on an unlucky seed; seed 3 does.)
#[test]
fn every_policy_delivers_over_random_loss() {
    let policies = [
        ("go-back-n", TcpConfig::bare()),
        ("newreno", newreno()),
        ("sack", TcpConfig { rack_tlp: false, ..TcpConfig::modern() }),
        ("sack+rack-tlp", TcpConfig::modern()),
        ("newreno+rack-tlp", TcpConfig { recovery: RecoveryKind::NewReno, sack: false, ..TcpConfig::modern() }),
    ];
    for seed in 1..=3u64 {
        let mut times = Vec::new();
        for (name, server) in policies {
            let fwd = LinkConfig { loss: 0.03, seed, ..link() };
            let back = LinkConfig { loss: 0.03, seed: seed + 50, ..link() };
            let (_, took) = transfer_with(client(), server, back, fwd, seed == 2, 200 * 1024);
            times.push((name, took));
        }
        println!("seed {seed}: {times:?}");
        let gbn = times[0].1;
        for (name, took) in times.iter().filter(|(name, _)| name.contains("rack")) {
            assert!(*took < gbn, "seed {seed}: {name} {took:?} not faster than go-back-n {gbn:?}");
        }
    }
}

/// RFC 8985 §7.3: one probe at a time — when the probe is lost too, the next step is the
/// retransmission timeout, not a second probe.
#[test]
fn a_lost_probe_is_followed_by_the_timeout_not_another_probe() {
    let len = 100 * 1024;
    let modern = TcpConfig::modern();
    let data = data_indices(modern, len);
    let last = *data.last().unwrap();
    let (sim, _) = transfer(modern, LinkConfig { drop_indices: vec![last - 1, last, last + 1], ..link() }, len);
    let stats = sim.b.conn.as_ref().unwrap().stats();
    assert_eq!((stats.tail_loss_probes, stats.timeouts), (1, 1));
}

/// RFC 8985 §7.2 with Linux's 2 ms slack (rack.rs `PTO_SLACK`): on a sub-millisecond path
/// (handshake SRTT ~0.2 ms) the client's ACKs of a 4-segment response come back 1.5 ms
/// late, as on a loaded host. 2·SRTT alone would probe before they arrive (a spurious
/// retransmission on every response); with the slack the ACKs win and nothing is resent.
#[test]
fn tail_loss_probe_waits_out_ack_jitter_at_sub_millisecond_srtt() {
    let fast = LinkConfig { delay: Duration::from_micros(100), ..link() };
    let late_acks =
        LinkConfig { delay_indices: (2..20).map(|i| (i, Duration::from_micros(1500))).collect(), ..fast.clone() };
    let (mut sim, _) = transfer_with(client(), TcpConfig::modern(), late_acks, fast, false, 4 * 1448);
    let stats = sim.b.conn.as_ref().unwrap().stats();
    let evs = server_events(&mut sim);
    assert_eq!((stats.tail_loss_probes, stats.timeouts, stats.retransmissions), (0, 0, 0), "{:?}", retransmits(&evs));
}
