//! linkem binary: bind an NFQUEUE, delay/drop/duplicate each packet per the scheduler,
//! report counters as JSON on SIGUSR1 and at exit, stop cleanly on SIGTERM/SIGINT.
//!
//! Exit codes: 0 clean stop, 1 runtime failure, 2 bad arguments, 3 NFQUEUE unavailable.
#![deny(unsafe_code)]

mod duplicate;

use anyhow::{Context, Result};
use clap::Parser;
use linkem::held::HeldQueue;
use linkem::scheduler::{Decision, DropCause, GilbertElliott, LinkConfig, Scheduler};
use linkem::stats::Counters;
use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use std::collections::BTreeSet;
use std::io::{ErrorKind, Write};
use std::os::fd::{BorrowedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const EXIT_BAD_ARGS: i32 = 2;
const EXIT_NO_NFQUEUE: i32 = 3;
/// Longest sleep without a deadline, so a signal that races the poll is seen soon.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// Copy range when duplicating (enough for jumbo frames; larger packets are not duplicated).
const DUPLICATE_COPY_RANGE: u16 = 9216;

#[derive(Parser, Debug)]
#[command(
    name = "linkem",
    version,
    about = "User-space link emulator on an NFQUEUE: delay, jitter, loss, duplicates"
)]
struct Args {
    /// NFQUEUE number to bind (the iptables rule's --queue-num).
    #[arg(long)]
    queue_num: u16,
    /// Constant one-way delay added to every packet.
    #[arg(long)]
    delay_ms: f64,
    /// Uniform jitter: each delay is drawn from [delay-jitter, delay+jitter].
    #[arg(long, default_value_t = 0.0)]
    jitter_ms: f64,
    /// Let jittered packets overtake each other (default keeps arrival order).
    #[arg(long)]
    reorder: bool,
    /// Bernoulli loss probability per packet, 0..1.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Gilbert–Elliott: P(good -> bad) per packet; giving it turns the model on.
    #[arg(long, requires = "ge_r")]
    ge_p: Option<f64>,
    /// Gilbert–Elliott: P(bad -> good) per packet (mean burst = 1/r).
    #[arg(long, requires = "ge_p")]
    ge_r: Option<f64>,
    /// Gilbert–Elliott: loss probability in the good state.
    #[arg(long, default_value_t = 0.0)]
    ge_loss_good: f64,
    /// Gilbert–Elliott: loss probability in the bad state.
    #[arg(long, default_value_t = 1.0)]
    ge_loss_bad: f64,
    /// Probability that a delivered packet is sent twice.
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// Seed of the random decisions (same seed + same packet sequence = same decisions).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Most packets held at once; packets beyond it are dropped and counted.
    #[arg(long, default_value_t = 10_000)]
    max_held: usize,
    /// Also write each JSON report (SIGUSR1, exit) to this file, atomically.
    #[arg(long)]
    stats: Option<PathBuf>,
}

fn ms_to_ns(name: &str, ms: f64) -> Result<u64, String> {
    if !(0.0..=3_600_000.0).contains(&ms) {
        return Err(format!("{name} must be between 0 and 3600000 ms, got {ms}"));
    }
    Ok((ms * 1e6).round() as u64)
}

fn link_config(args: &Args) -> Result<LinkConfig, String> {
    let config = LinkConfig {
        delay_ns: ms_to_ns("--delay-ms", args.delay_ms)?,
        jitter_ns: ms_to_ns("--jitter-ms", args.jitter_ms)?,
        reorder: args.reorder,
        loss: args.loss,
        gilbert_elliott: match (args.ge_p, args.ge_r) {
            (Some(p), Some(r)) => Some(GilbertElliott {
                p,
                r,
                loss_good: args.ge_loss_good,
                loss_bad: args.ge_loss_bad,
            }),
            _ => None,
        },
        duplicate: args.duplicate,
    };
    config.validate().map_err(|e| e.to_string())?;
    if args.max_held == 0 {
        return Err("--max-held must be at least 1".into());
    }
    Ok(config)
}

struct HeldPacket {
    msg: nfq::Message,
    duplicate: bool,
}

/// Descriptors of this process that are sockets (the /proc/self/fd listing's own
/// descriptor is a directory, so it never shows up here).
fn open_sockets() -> BTreeSet<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return BTreeSet::new();
    };
    dir.filter_map(|entry| {
        let entry = entry.ok()?;
        let target = std::fs::read_link(entry.path()).ok()?;
        if target.to_string_lossy().starts_with("socket:") {
            entry.file_name().to_str()?.parse().ok()
        } else {
            None
        }
    })
    .collect()
}

/// nfq does not expose its netlink socket, but we must sleep on it with a nanosecond
/// deadline (ppoll); it is the one socket `Queue::open` creates (single-threaded here).
fn open_queue() -> Result<(nfq::Queue, RawFd), std::io::Error> {
    let before = open_sockets();
    let queue = nfq::Queue::open()?;
    let new: Vec<RawFd> = open_sockets().difference(&before).copied().collect();
    match new.as_slice() {
        [fd] => Ok((queue, *fd)),
        _ => Err(std::io::Error::other(format!(
            "could not identify the NFQUEUE socket among new descriptors {new:?}"
        ))),
    }
}

fn nfqueue_error(queue_num: u16, what: &str, e: &std::io::Error) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) => "needs root (CAP_NET_ADMIN)",
        Some(libc::EBUSY) => "another process already holds this queue number",
        Some(libc::EPROTONOSUPPORT)
        | Some(libc::ENOENT)
        | Some(libc::EINVAL)
        | Some(libc::EOPNOTSUPP) => "the kernel lacks NFQUEUE (nfnetlink_queue)",
        _ => "is NFQUEUE (nfnetlink_queue) available in this kernel?",
    };
    format!("NFQUEUE unavailable: {what} queue {queue_num}: {e} ({hint})")
}

/// Per-queue kernel counters: (queue_dropped, user_dropped), from this namespace's view.
fn kernel_queue_counters(queue_num: u16) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/net/netfilter/nfnetlink_queue").ok()?;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 7 && f[0].parse::<u16>().ok() == Some(queue_num) {
            return Some((f[5].parse().ok()?, f[6].parse().ok()?));
        }
    }
    None
}

/// How long ago the kernel received this packet, when it stamped it (it does while any
/// socket on the machine asks for timestamps); 0 otherwise. Counting the delay from the
/// kernel's stamp keeps our own wake-up latency out of the emulated delay.
fn kernel_age_ns(msg: &nfq::Message) -> u64 {
    let Some(stamp) = msg.get_timestamp() else {
        return 0;
    };
    match std::time::SystemTime::now().duration_since(stamp) {
        Ok(age) if age < Duration::from_millis(100) => age.as_nanos() as u64,
        _ => 0, // clock stepped or stale stamp: ignore it
    }
}

struct Linkem {
    queue: nfq::Queue,
    scheduler: Scheduler,
    held: HeldQueue<HeldPacket>,
    duplicator: Option<duplicate::Duplicator>,
    counters: Counters,
    stats_path: Option<PathBuf>,
    epoch: Instant,
}

impl Linkem {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn on_packet(&mut self, mut msg: nfq::Message) {
        self.counters.received += 1;
        let now_ns = self.now_ns();
        let age_ns = kernel_age_ns(&msg);
        if age_ns > 0 {
            self.counters.kernel_stamped += 1;
        }
        let arrival_ns = now_ns.saturating_sub(age_ns);
        match self.scheduler.decide(arrival_ns) {
            Decision::Drop(cause) => {
                match cause {
                    DropCause::Random => self.counters.dropped_random += 1,
                    DropCause::Burst => self.counters.dropped_burst += 1,
                }
                self.drop_packet(msg);
            }
            Decision::Deliver {
                release_ns,
                duplicate,
            } => {
                if release_ns <= self.now_ns() {
                    // zero delay: no need to hold it
                    self.release(HeldPacket { msg, duplicate });
                    return;
                }
                match self.held.push(release_ns, HeldPacket { msg, duplicate }) {
                    Ok(()) => {
                        let held = self.held.len() as u64;
                        self.counters.held_max = self.counters.held_max.max(held);
                    }
                    Err(packet) => {
                        self.counters.dropped_held_cap += 1;
                        msg = packet.msg;
                        self.drop_packet(msg);
                    }
                }
            }
        }
    }

    fn drop_packet(&mut self, mut msg: nfq::Message) {
        self.counters.dropped += 1;
        msg.set_verdict(nfq::Verdict::Drop);
        if self.queue.verdict(msg).is_err() {
            self.counters.verdict_errors += 1;
        }
    }

    fn release(&mut self, packet: HeldPacket) {
        let HeldPacket { mut msg, duplicate } = packet;
        let copy = if duplicate {
            let payload = msg.get_payload();
            if payload.len() < msg.get_original_len() {
                self.counters.duplicate_failed += 1;
                None
            } else {
                Some(payload.to_vec())
            }
        } else {
            None
        };
        msg.set_verdict(nfq::Verdict::Accept);
        if self.queue.verdict(msg).is_err() {
            self.counters.verdict_errors += 1;
        } else {
            self.counters.delayed += 1;
        }
        if let Some(bytes) = copy {
            match self.duplicator.as_ref().map(|d| d.send_copy(&bytes)) {
                Some(Ok(())) => self.counters.duplicated += 1,
                _ => self.counters.duplicate_failed += 1,
            }
        }
    }

    fn release_due(&mut self) {
        let now_ns = self.now_ns();
        while let Some(packet) = self.held.pop_due(now_ns) {
            self.release(packet);
        }
    }

    /// Read every packet the kernel has queued so far (the socket is non-blocking).
    fn receive_available(&mut self) -> Result<()> {
        loop {
            match self.queue.recv() {
                Ok(msg) => self.on_packet(msg),
                Err(e)
                    if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted =>
                {
                    return Ok(())
                }
                // the socket buffer overflowed; the kernel counts the loss (user_dropped)
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => continue,
                Err(e) => return Err(e).context("reading from the NFQUEUE"),
            }
        }
    }

    fn report(&mut self, reason: &str) -> Result<()> {
        self.counters.snapshot += 1;
        self.counters.reason = reason.to_string();
        self.counters.held = self.held.len() as u64;
        if let Some((queue_dropped, user_dropped)) = kernel_queue_counters(self.counters.queue_num)
        {
            self.counters.kernel_queue_dropped = Some(queue_dropped);
            self.counters.kernel_user_dropped = Some(user_dropped);
        }
        let line = self.counters.to_json();
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")?;
        out.flush()?;
        if let Some(path) = &self.stats_path {
            self.counters
                .write_file(path)
                .with_context(|| format!("writing stats to {}", path.display()))?;
        }
        Ok(())
    }
}

#[allow(unsafe_code)]
fn wait_readable(fd: RawFd, timeout: Duration) {
    // SAFETY: `fd` is the NFQUEUE socket owned by the `nfq::Queue` that outlives this call.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut fds = [PollFd::new(borrowed, PollFlags::POLLIN)];
    // EINTR (a signal) and timeouts both just return to the loop.
    let _ = ppoll(&mut fds, Some(TimeSpec::from_duration(timeout)), None);
}

fn run(args: Args, config: LinkConfig) -> Result<i32> {
    let queue_num = args.queue_num;
    let (mut queue, fd) = match open_queue() {
        Ok(q) => q,
        Err(e) => {
            eprintln!("linkem: {}", nfqueue_error(queue_num, "opening", &e));
            return Ok(EXIT_NO_NFQUEUE);
        }
    };
    if let Err(e) = queue.bind(queue_num) {
        eprintln!("linkem: {}", nfqueue_error(queue_num, "binding", &e));
        return Ok(EXIT_NO_NFQUEUE);
    }
    let copy_range = if config.duplicate > 0.0 {
        DUPLICATE_COPY_RANGE
    } else {
        0
    };
    queue
        .set_copy_range(queue_num, copy_range)
        .context("setting the copy range")?;
    // Let our own cap bite before the kernel's queue limit does.
    let kernel_max = u32::try_from(args.max_held)
        .unwrap_or(u32::MAX)
        .saturating_add(1024);
    queue
        .set_queue_max_len(queue_num, kernel_max)
        .context("setting the kernel queue length")?;
    queue
        .set_fail_open(queue_num, false)
        .context("setting fail-open off")?;
    queue.set_nonblocking(true);
    let duplicator = if config.duplicate > 0.0 {
        Some(duplicate::Duplicator::open().context("opening raw sockets for duplicates")?)
    } else {
        None
    };
    // Default timer slack (50 µs) would add to every delay.
    let _ = nix::sys::prctl::set_timerslack(1000);

    let terminate = Arc::new(AtomicBool::new(false));
    let report_now = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&terminate))?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&report_now))?;

    let mut linkem = Linkem {
        queue,
        scheduler: Scheduler::new(config.clone(), args.seed)?,
        held: HeldQueue::new(args.max_held),
        duplicator,
        counters: Counters {
            queue_num,
            ..Default::default()
        },
        stats_path: args.stats.clone(),
        epoch: Instant::now(),
    };
    let ready = serde_json::json!({
        "event": "ready", "queue_num": queue_num, "pid": std::process::id(),
        "delay_ns": config.delay_ns, "jitter_ns": config.jitter_ns, "reorder": config.reorder,
        "loss": config.loss, "gilbert_elliott": config.gilbert_elliott.map(|g| [g.p, g.r, g.loss_good, g.loss_bad]),
        "duplicate": config.duplicate, "seed": args.seed, "max_held": args.max_held,
    });
    println!("{ready}");
    std::io::stdout().flush()?;

    while !terminate.load(Ordering::Relaxed) {
        if report_now.swap(false, Ordering::Relaxed) {
            linkem.report("sigusr1")?;
        }
        linkem.receive_available()?;
        linkem.release_due();
        let wait = match linkem.held.next_release_ns() {
            Some(at_ns) => {
                Duration::from_nanos(at_ns.saturating_sub(linkem.now_ns())).min(MAX_WAIT)
            }
            None => MAX_WAIT,
        };
        if !wait.is_zero() {
            wait_readable(fd, wait);
        }
    }
    // Stop: let what is still held go now rather than drop it.
    for packet in linkem.held.drain_all() {
        linkem.counters.flushed_at_exit += 1;
        linkem.release(packet);
    }
    linkem.report("exit")?;
    Ok(0)
}

fn main() {
    let args = Args::parse();
    let config = match link_config(&args) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("linkem: {msg}");
            std::process::exit(EXIT_BAD_ARGS);
        }
    };
    match run(args, config) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("linkem: {e:#}");
            std::process::exit(1);
        }
    }
}
