//! The `bare` profile's segment traces must not change: every scenario below is run in the
//! deterministic simulator and its full trace (virtual send time, direction, sequence and
//! ACK numbers, flags, window, options, payload length and checksum) is compared with
//! `tests/fixtures/bare_traces.txt`, recorded from the code before the timer, congestion-control
//! and loss-recovery seams went in (docs/notes/leantcp-loss-recovery.md, "Seams").
//! Re-record only on purpose: `LEANTCP_RECORD_TRACES=1 cargo test -p leantcp --test bare_traces`.
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use leantcp::sim::{LinkConfig, Sim};
use leantcp::{Connection, Segment, TcpConfig};

mod common;
use common::*;

/// FNV-1a over the payload: a change in any byte shows.
fn digest(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| (h ^ *b as u32).wrapping_mul(0x0100_0193))
}

fn line(out: &mut String, t_us: u64, dir: &str, s: &Segment) {
    let flags: String = [(s.syn, 'S'), (s.fin, 'F'), (s.rst, 'R'), (s.psh, 'P')]
        .iter()
        .map(|(on, c)| if *on { *c } else { '.' })
        .collect();
    let ack = s.ack.map_or("-".to_string(), |a| a.0.to_string());
    writeln!(
        out,
        "{t_us} {dir} seq={} ack={ack} {flags} win={} mss={:?} ws={:?} len={} sum={:08x}",
        s.seq.0,
        s.window,
        s.mss,
        s.window_scale,
        s.payload.len(),
        digest(&s.payload)
    )
    .unwrap();
}

/// Steps the simulation to its end (or `limit`), recording every segment at the virtual
/// time it was handed to the link; `script` may act on the sim between steps.
fn record(mut sim: Sim, limit: Duration, mut script: impl FnMut(&mut Sim)) -> String {
    let mut out = String::new();
    let deadline = sim.now + limit;
    for _ in 0..2_000_000u32 {
        script(&mut sim);
        let (na, nb) = (sim.a.sent_log.len(), sim.b.sent_log.len());
        let t = sim.now.as_micros();
        let more = sim.step();
        for s in &sim.a.sent_log[na..] {
            line(&mut out, t, "c>s", s);
        }
        for s in &sim.b.sent_log[nb..] {
            line(&mut out, t, "s>c", s);
        }
        if !more || sim.now > deadline {
            break;
        }
    }
    writeln!(
        out,
        "end t={} client_received={} sum={:08x}",
        sim.now.as_micros(),
        sim.a.received.len(),
        digest(&sim.a.received)
    )
    .unwrap();
    out
}

/// The server sends `len` bytes once the connection is up, then closes.
fn serve(len: usize) -> impl FnMut(&mut Sim) {
    let mut queued = false;
    move |sim: &mut Sim| {
        if !queued && sim.b.conn.is_some() {
            sim.b.to_send.extend(pattern(len));
            sim.b.close_after_send = true;
            queued = true;
        }
    }
}

fn link() -> LinkConfig {
    LinkConfig::default()
}

fn bare() -> TcpConfig {
    TcpConfig { time_wait: Duration::from_secs(2), ..TcpConfig::default() }
}

fn scenarios() -> Vec<(&'static str, String)> {
    let mut all = Vec::new();
    let limit = Duration::from_secs(300);
    all.push(("clean 200 KiB v4", record(setup(bare(), bare(), link(), link(), false), limit, serve(200 * 1024))));
    all.push(("clean 200 KiB v6", record(setup(bare(), bare(), link(), link(), true), limit, serve(200 * 1024))));
    for drops in [vec![10], vec![1, 2, 3, 4], vec![5, 6, 40, 41, 42]] {
        let lossy = LinkConfig { drop_indices: drops, ..link() };
        all.push((
            "deterministic drops",
            record(setup(bare(), bare(), link(), lossy, false), limit, serve(150 * 1024)),
        ));
    }
    for seed in 1..=4 {
        let fwd = LinkConfig { loss: 0.03, seed, ..link() };
        let back = LinkConfig { loss: 0.03, seed: seed + 100, ..link() };
        all.push((
            "random loss 3 %",
            record(setup(bare(), bare(), back, fwd, seed % 2 == 0), limit, serve(160 * 1024)),
        ));
    }
    let narrow = LinkConfig { rate_bps: 10_000_000, queue_packets: 20, ..link() };
    all.push(("drop-tail overflow", record(setup(bare(), bare(), link(), narrow, false), limit, serve(320 * 1024))));
    // Zero window: the client does not read for 3 s, then reads.
    let client = TcpConfig { recv_buffer_bytes: 8192, window_scale: 0, ..bare() };
    let mut zw = setup(client, bare(), link(), link(), false);
    zw.a.reading = false;
    let mut serve_zw = serve(50_000);
    all.push((
        "zero window",
        record(zw, limit, move |sim| {
            serve_zw(sim);
            sim.a.reading = sim.now >= leantcp::Instant::from_millis(3000);
        }),
    ));
    // Lost SYN and lost FIN.
    all.push((
        "lost syn and fin",
        record(
            setup(
                bare(),
                bare(),
                LinkConfig { drop_indices: vec![0], ..link() },
                LinkConfig { drop_indices: vec![1], ..link() },
                false,
            ),
            limit,
            serve(0),
        ),
    ));
    // Both sides close at once.
    let mut closed = false;
    all.push((
        "simultaneous close",
        record(setup(bare(), bare(), link(), link(), true), limit, move |sim| {
            let up = |c: &Option<Connection>| c.as_ref().is_some_and(|c| c.state() == leantcp::State::Established);
            if !closed && up(&sim.a.conn) && up(&sim.b.conn) {
                let now = sim.now;
                sim.a.conn.as_mut().unwrap().close(now);
                sim.b.conn.as_mut().unwrap().close(now);
                closed = true;
            }
        }),
    ));
    all
}

fn render() -> String {
    let mut out = String::new();
    for (i, (name, trace)) in scenarios().into_iter().enumerate() {
        writeln!(out, "### {i} {name}").unwrap();
        out.push_str(&trace);
    }
    out
}

#[test]
fn bare_profile_traces_are_unchanged() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bare_traces.txt");
    let got = render();
    if std::env::var_os("LEANTCP_RECORD_TRACES").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).expect("fixture missing: record it with LEANTCP_RECORD_TRACES=1");
    if got != want {
        let (g, w): (Vec<_>, Vec<_>) = (got.lines().collect(), want.lines().collect());
        let first = g.iter().zip(&w).position(|(a, b)| a != b).unwrap_or(g.len().min(w.len()));
        let section = w[..first.min(w.len())].iter().rev().find(|l| l.starts_with("###")).copied().unwrap_or("?");
        panic!(
            "bare trace differs at line {} (in {section}):\n  want: {}\n  got:  {}\n({} vs {} lines)",
            first + 1,
            w.get(first).unwrap_or(&"<end>"),
            g.get(first).unwrap_or(&"<end>"),
            w.len(),
            g.len()
        );
    }
}
