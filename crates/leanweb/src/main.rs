//! `leanweb`: attach to a TAP device, answer ARP/NDP/ping, serve files over leantcp.
//! Exit codes: 0 stopped by SIGTERM/SIGINT, 2 bad arguments or config, 3 TAP device,
//! 4 log file, 1 anything else.
use std::hash::{BuildHasher, Hasher};
use std::io::{IoSlice, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::Parser;
use leantcp::Instant;
use leanweb::config::{Args, ConfigError};
use leanweb::gso;
use leanweb::http::WallClock;
use leanweb::link_state;
use leanweb::log::EventLog;
use leanweb::stack::{OutFrame, Stack, StackConfig};
use leanweb::tap::Tap;
use serde_json::json;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct TapError(String);

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct LogError(String);

/// Longest sleep between loop turns, so signals and app timeouts are seen promptly.
const MAX_WAIT_MS: u64 = 100;
const MAX_FRAMES_PER_TURN: usize = 256;
const LOG_FLUSH_EVERY: Duration = Duration::from_millis(200);
/// How long the TAP device may take to pass frames after we attach (the kernel's link watch
/// runs within milliseconds, a non-urgent event within a second), and how often to look.
const LINK_UP_TIMEOUT: Duration = Duration::from_secs(3);
const LINK_UP_STEP: Duration = Duration::from_millis(2);

fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.finish()
}

/// The SYN-cookie secret, from the OS (RFC 4987 §3.6: a secret only the listener knows).
fn cookie_key() -> anyhow::Result<[u8; 16]> {
    use std::io::Read;
    let mut key = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .context("reading the SYN-cookie key from /dev/urandom")?;
    Ok(key)
}

/// The `start` event: every setting in force, as the log's first line.
fn start_fields(config: &StackConfig, tap_name: &str, profile: &str, use_gso: bool) -> serde_json::Value {
    let rto = config.tcp.rto;
    json!({
        "tap": tap_name, "addr4": format!("{}/{}", config.addr4, config.prefix4),
        "addr6": format!("{}/{}", config.addr6, config.prefix6),
        "port": config.port, "mac": config.mac.to_string(), "profile": profile,
        "cc": config.tcp.cc.name(),
        "recovery": config.tcp.recovery.name(), "sack": config.tcp.sack, "timestamps": config.tcp.timestamps,
        "rack_tlp": config.tcp.rack_tlp, "limited_transmit": config.tcp.limited_transmit,
        "initial_window_segments": config.tcp.initial_window_segments,
        "hystart": config.tcp.hystart, "abc_limit_segments": config.tcp.abc_limit_segments,
        "send_buffer_bytes": config.tcp.send_buffer_bytes, "send_buffer_max_bytes": config.tcp.send_buffer_max_bytes,
        "send_window_segments": config.tcp.send_window_segments,
        "pacing_rate_bps": config.tcp.pacing_rate_bps,
        "rto_alpha": rto.alpha, "rto_beta": rto.beta, "rto_k": rto.k, "rto_g_us": rto.granularity.as_micros() as u64,
        "rto_min_ms": rto.min.as_millis() as u64, "rto_max_ms": rto.max.as_millis() as u64,
        "rto_initial_ms": rto.initial.as_millis() as u64, "sampling": rto.sampling.name(), "mtu": config.tcp.mtu,
        "syn_cookies": config.syn_cookies.name(), "max_half_open": config.max_half_open,
        "max_connections": config.max_connections,
        "push": config.tcp.push.name(), "ipv4_id": config.ipv4_id.name(), "gso": use_gso,
        "version": env!("CARGO_PKG_VERSION"),
    })
}

fn run(args: Args) -> anyhow::Result<()> {
    let args = args.with_config_file()?;
    let config = args.stack_config(random_u64())?;
    let tap_name = args.tap.clone().ok_or_else(|| ConfigError("--tap NAME is required".into()))?;
    let use_gso = args.gso()?;
    let mut tap = Tap::open(&tap_name, use_gso).map_err(|e| TapError(format!("--tap {tap_name}: {e}")))?;
    // our announcements below are lost if written before the device passes frames
    // (crates/leanweb/src/link_state.rs)
    let sysfs_net = std::path::Path::new(link_state::SYSFS_NET);
    if !link_state::wait_passes_frames(sysfs_net, &tap_name, LINK_UP_TIMEOUT, LINK_UP_STEP) {
        eprintln!(
            "leanweb: warning: {tap_name} does not pass frames after {} s (operstate not up or bridge port not \
             forwarding); announcing anyway",
            LINK_UP_TIMEOUT.as_secs()
        );
    }
    let start_unix_us = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64;
    let start = std::time::Instant::now();
    let mut log = match &args.log {
        Some(path) => {
            EventLog::to_file(path, start_unix_us).map_err(|e| LogError(format!("--log {}: {e}", path.display())))?
        }
        None => EventLog::disabled(),
    };
    log.write(0, "start", start_fields(&config, &tap_name, args.profile()?.name(), use_gso));
    log.flush(); // the start event is on disk before the ready line: callers read it right after
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("installing signal handlers")?;
    }
    let mut stack = Stack::new(config.clone(), log, random_u64());
    stack.set_cookie_key(cookie_key()?);
    stack.announce();
    let mut writer = TapWriter { gso: use_gso, counters: WriteCounters::default() };
    let announcements = stack.take_frames();
    writer.write(&mut tap, &announcements, |_, _| {}); // a full queue would drop one: nothing is queued yet
    println!(
        "leanweb ready tap={} addr4={}/{} addr6={}/{} port={} mac={} link_local6={} pid={}",
        tap_name,
        config.addr4,
        config.prefix4,
        config.addr6,
        config.prefix6,
        config.port,
        config.mac,
        stack.link_local6(),
        std::process::id()
    );
    std::io::stdout().flush().ok();

    let now = || Instant::from_micros(start.elapsed().as_micros() as u64);
    let mut buf = vec![0u8; 65536];
    let mut last_flush = now();
    while !stop.load(Ordering::Relaxed) {
        let t = now();
        let max_wait = Duration::from_millis(MAX_WAIT_MS);
        let wait = stack.poll_timeout().map_or(max_wait, |deadline| deadline.saturating_since(t).min(max_wait));
        if tap.wait_readable(wait).context("waiting on the TAP device")? {
            for _ in 0..MAX_FRAMES_PER_TURN {
                match tap.recv(&mut buf).context("reading the TAP device")? {
                    // a read shorter than its vnet header goes on as an empty frame: the stack
                    // counts it in and malformed, as any frame it cannot parse
                    Some(n) if use_gso => stack.handle_frame(gso::strip_vnet_header(&buf[..n]).unwrap_or(&[]), now()),
                    Some(n) => stack.handle_frame(&buf[..n], now()),
                    None => break,
                }
            }
        }
        let t = now();
        // the wall clock goes in with `now`: the stack's responses carry it as `Date`
        stack.set_wall_clock(WallClock::new(t, SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()));
        stack.handle_timeouts(t);
        stack.poll(t);
        let frames = stack.take_frames();
        writer.write(&mut tap, &frames, |frame, written| {
            if let Some(tx) = &frame.tx {
                stack.log_transmission(now().as_micros(), tx, written);
            }
        });
        if t.saturating_since(last_flush) >= LOG_FLUSH_EVERY {
            stack.log.flush();
            last_flush = t;
        }
    }
    let open_connections = stack.session_count();
    stack.log_open_connections(now());
    let counters = serde_json::to_value(stack.counters).unwrap_or_default();
    let w = writer.counters;
    let mut fields = json!({"send_failures": w.send_failures, "open_connections": open_connections,
                            "tap_writes": w.tap_writes, "gso_super_frames": w.super_frames,
                            "gso_segments": w.super_frame_segments});
    if let (Some(map), serde_json::Value::Object(c)) = (fields.as_object_mut(), counters) {
        map.extend(c);
    }
    stack.log.write(now().as_micros(), "stop", fields);
    stack.log.flush();
    Ok(())
}

#[derive(Debug, Default, Clone, Copy)]
struct WriteCounters {
    /// Frames (segments) whose write failed: logged as `tx_dropped`.
    send_failures: u64,
    tap_writes: u64,
    super_frames: u64,
    /// Segments that went in super-frames.
    super_frame_segments: u64,
}

/// Writes a turn's frames to the TAP device: one by one, or with `--gso on` as planned by
/// `gso::plan` (a super-frame is one `writev` of its vnet header, headers and each frame's
/// payload, no copy). `on_written(frame, written)` runs for each frame after its write, so
/// each segment's `tx` line still follows its own write (a super-frame's segments share it).
struct TapWriter {
    gso: bool,
    counters: WriteCounters,
}

impl TapWriter {
    fn write(&mut self, tap: &mut Tap, frames: &[OutFrame], mut on_written: impl FnMut(&OutFrame, bool)) {
        if !self.gso {
            for frame in frames {
                let written = self.count(tap.send(&frame.bytes), 1, false);
                on_written(frame, written);
            }
            return;
        }
        let writes = gso::plan(frames);
        let mut parts = Vec::new();
        for write in &writes {
            write.parts(frames, &mut parts);
            let slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
            let written = self.count(tap.send_vectored(&slices), write.frames.len() as u64, write.head.is_some());
            for frame in &frames[write.frames.clone()] {
                on_written(frame, written);
            }
        }
    }

    fn count(&mut self, result: std::io::Result<bool>, segments: u64, super_frame: bool) -> bool {
        let written = matches!(result, Ok(true));
        self.counters.tap_writes += 1;
        if !written {
            self.counters.send_failures += segments;
        }
        if super_frame {
            self.counters.super_frames += 1;
            self.counters.super_frame_segments += segments;
        }
        written
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.knobs_json {
        println!("{}", leanweb::knobs::table_json());
        return ExitCode::SUCCESS;
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("leanweb: {err:#}");
            let code = if err.is::<ConfigError>() {
                2
            } else if err.is::<TapError>() {
                3
            } else if err.is::<LogError>() {
                4
            } else {
                1
            };
            ExitCode::from(code)
        }
    }
}
