//! The simulated bottleneck and the scenarios on it: rate, drop-tail FIFO, delay, seeded
//! loss, competing flows, leanweb serving a GET, and the pcap the analysis reads.
use std::path::PathBuf;

use leansim::scenario::{Background, ClientSpec, Family, GetSpec, LinkSpec};
use leansim::{Network, Outcome, Scenario, SimError};

fn docroot(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("leansim-test-{}-{tag}", std::process::id()))
}

fn link(rate_bps: u64, queue_packets: usize, delay_ms: f64, loss: f64) -> LinkSpec {
    LinkSpec { rate_bps, queue_packets, delay_ms, loss }
}

fn scenario(tag: &str, data: LinkSpec, ack: LinkSpec, gets: &[(&str, Family)], background: Vec<Background>) -> Scenario {
    Scenario {
        seed: 1,
        server_args: vec!["--profile".into(), "bare".into()],
        root: docroot(tag),
        port: 80,
        data_link: data,
        ack_link: ack,
        client: ClientSpec::default(),
        gets: gets.iter().map(|(path, family)| GetSpec { family: *family, path: path.to_string() }).collect(),
        gap_ms: 0.0,
        warmup_ms: 0.0,
        background,
        limit_s: 60.0,
    }
}

/// Runs with the files in place, then removes them.
fn run(s: &Scenario) -> (Outcome, Vec<u8>) {
    std::fs::create_dir_all(&s.root).unwrap();
    std::fs::write(s.root.join("1KiB.bin"), vec![7u8; 1024]).unwrap();
    std::fs::write(s.root.join("320KiB.bin"), vec![9u8; 320 * 1024]).unwrap();
    let result = Network::new(s, Vec::new()).and_then(Network::run);
    std::fs::remove_dir_all(&s.root).unwrap();
    result.unwrap()
}

fn get_ms(outcome: &Outcome, i: usize) -> f64 {
    let g = &outcome.gets[i];
    assert!(g.ok, "GET {i} finished");
    (g.body_done_us.unwrap() - g.start_us.unwrap()) as f64 / 1000.0
}

#[test]
fn delay_adds_two_round_trips_to_a_small_get() {
    // No rate limit: SYN, SYN-ACK, request, response = 4 one-way delays, exactly.
    let s = scenario("delay", link(0, 1000, 10.0, 0.0), link(0, 1000, 10.0, 0.0), &[("/1KiB.bin", Family::V4)], vec![]);
    let (outcome, _) = run(&s);
    assert_eq!(get_ms(&outcome, 0), 40.0);
}

#[test]
fn rate_limits_a_large_get_to_the_bottleneck() {
    let s = scenario("rate", link(100_000_000, 1000, 0.0, 0.0), link(100_000_000, 1000, 0.0, 0.0), &[("/320KiB.bin", Family::V4)], vec![]);
    let (outcome, _) = run(&s);
    // 320 KiB and the head in 1460-byte segments (bare: no timestamps) of 1514-byte frames
    // at 100 Mbit/s (the last one shorter): 27.2 ms; the links' clock counts whole microseconds (121 µs a frame,
    // not 121.12), 0.1 % fast
    let payload = 320.0 * 1024.0 + 100.0;
    let frames = (payload / 1460.0_f64).ceil();
    let wire_ms = (payload + frames * 54.0) * 8.0 / 100e6 * 1000.0;
    let ms = get_ms(&outcome, 0);
    assert!(ms >= wire_ms * 0.998 && ms < wire_ms + 1.0, "{ms} ms vs {wire_ms} ms on the wire");
    assert_eq!(outcome.data_link.dropped_queue, 0);
}

#[test]
fn udp_source_fills_the_fifo_and_tail_drops_the_excess() {
    // 20 Mbit/s offered into 10 Mbit/s for 1 s: half is delivered, the rest dropped at the tail.
    let mut s = scenario("fifo", link(10_000_000, 50, 0.0, 0.0), link(0, 1000, 0.0, 0.0), &[],
        vec![Background::Udp { rate_bps: 20_000_000.0, frame_bytes: 1250, family: Family::V4 }]);
    s.limit_s = 1.0;
    let (outcome, _) = run(&s);
    assert_eq!(outcome.udp_frames_sent, 2001, "one 1250-byte frame every 0.5 ms from t = 0 to 1 s");
    assert_eq!(outcome.udp_frames_delivered, 1000, "10 Mbit/s = 1000 frames of 10 kbit in 1 s");
    let in_queue = outcome.udp_frames_sent - outcome.udp_frames_delivered - outcome.data_link.dropped_queue;
    assert!(in_queue <= 50, "the FIFO holds at most 50 packets, {in_queue} left");
    assert_eq!(outcome.data_link.dropped_loss, 0);
}

#[test]
fn seeded_loss_is_reproducible_and_changes_with_the_seed() {
    let mut s = scenario("loss", link(100_000_000, 1000, 1.0, 0.02), link(100_000_000, 1000, 1.0, 0.0),
        &[("/320KiB.bin", Family::V4)], vec![Background::Udp { rate_bps: 10_000_000.0, frame_bytes: 1000, family: Family::V4 }]);
    s.server_args = vec!["--profile".into(), "modern".into()];
    s.warmup_ms = 500.0;
    let (a, pcap_a) = run(&s);
    let (b, pcap_b) = run(&s);
    assert_eq!(pcap_a, pcap_b, "same seed, same capture byte for byte");
    assert_eq!(a.data_link.dropped_loss, b.data_link.dropped_loss);
    s.seed = 2;
    let (c, pcap_c) = run(&s);
    assert_ne!(pcap_a, pcap_c, "another seed, other losses");
    let offered = a.data_link.offered as f64;
    let rate = a.data_link.dropped_loss as f64 / offered;
    assert!(offered > 500.0 && (0.005..0.05).contains(&rate), "{} of {offered} lost", a.data_link.dropped_loss);
    assert!(c.gets[0].ok && a.gets[0].ok);
}

#[test]
fn competing_flows_share_the_bottleneck() {
    let alone = scenario("alone", link(100_000_000, 1000, 1.0, 0.0), link(100_000_000, 1000, 1.0, 0.0), &[("/320KiB.bin", Family::V4)], vec![]);
    let (outcome, _) = run(&alone);
    let alone_ms = get_ms(&outcome, 0);
    // Half the bottleneck taken by a constant-rate source: the GET takes longer (the bare
    // server sends its window at once, so the FIFO gives it more than half); nothing is
    // dropped in the deep FIFO.
    let mut beside_udp = alone.clone();
    beside_udp.background = vec![Background::Udp { rate_bps: 50_000_000.0, frame_bytes: 1514, family: Family::V4 }];
    beside_udp.warmup_ms = 100.0;
    let (outcome, _) = run(&beside_udp);
    let ratio = get_ms(&outcome, 0) / alone_ms;
    assert!((1.2..2.6).contains(&ratio), "GET beside 50 Mbit/s of UDP: {ratio}x as long as alone");
    assert_eq!(outcome.data_link.dropped_queue, 0);
    // Two more lean GETs from the same server at the same time: all three finish, later.
    let mut beside_lean = alone.clone();
    beside_lean.background = vec![Background::Get { path: "/320KiB.bin".into(), family: Family::V6, interval_ms: 0.001, count: 2 }];
    let (outcome, _) = run(&beside_lean);
    assert_eq!(outcome.background_gets_started, 2);
    assert_eq!(outcome.background_gets_done, 2);
    assert!(get_ms(&outcome, 0) > 1.5 * alone_ms, "three flows share 100 Mbit/s");
}

#[test]
fn ipv6_gets_and_the_pcap_hold_every_server_frame() {
    let s = scenario("pcap", link(100_000_000, 1000, 0.5, 0.0), link(100_000_000, 1000, 0.5, 0.0),
        &[("/1KiB.bin", Family::V6), ("/1KiB.bin", Family::V4)], vec![]);
    let (outcome, pcap) = run(&s);
    assert!(outcome.gets.iter().all(|g| g.ok));
    assert_eq!(outcome.server.requests, 2);
    let mut reader = pcap_parser::LegacyPcapSlice::from_slice(&pcap).unwrap();
    let mut frames = 0;
    while let Some(block) = reader.next() {
        if let pcap_parser::PcapBlockOwned::Legacy(b) = block.unwrap() {
            assert!(b.data.len() >= 54);
            frames += 1;
        }
    }
    assert_eq!(frames, outcome.frames_captured);
    assert_eq!(outcome.frames_captured, outcome.server.frames_in + outcome.server.frames_out);
}

#[test]
fn bad_server_flags_and_empty_scenarios_are_refused() {
    let mut s = scenario("bad", link(0, 10, 0.0, 0.0), link(0, 10, 0.0, 0.0), &[("/1KiB.bin", Family::V4)], vec![]);
    s.server_args = vec!["--profile".into(), "fancy".into()];
    std::fs::create_dir_all(&s.root).unwrap();
    assert!(matches!(Network::new(&s, Vec::new()), Err(SimError::ServerFlags(m)) if m.contains("fancy")));
    s.server_args.clear();
    s.gets.clear();
    assert!(matches!(Network::new(&s, Vec::new()), Err(SimError::Scenario(_))));
    std::fs::remove_dir_all(&s.root).unwrap();
}

#[test]
fn the_client_window_decides_whether_a_shallow_queue_overflows() {
    // The bare server sends what the client's window allows, at once: 64240 bytes (44
    // segments) fit a 64-packet FIFO, 131072 bytes (90 segments) do not; a window growing
    // with every arrival (as the kernel client's) outgrows it too.
    let base = scenario("window", link(100_000_000, 64, 0.5, 0.0), link(100_000_000, 64, 0.5, 0.0), &[("/320KiB.bin", Family::V4)], vec![]);
    let (fixed, _) = run(&base);
    assert_eq!(fixed.data_link.dropped_queue, 0);
    let mut wide = base.clone();
    wide.client.recv_buffer_bytes = 131_072;
    let (wide, _) = run(&wide);
    assert!(wide.data_link.dropped_queue > 0);
    let mut growing = base.clone();
    growing.client.grow_window = true;
    let (growing, _) = run(&growing);
    assert!(growing.data_link.dropped_queue > 0);
    assert!(fixed.gets[0].ok && wide.gets[0].ok && growing.gets[0].ok);
}
