//! traceanalyze PCAP --server-port PORT [--summary FILE] [--rtt-samples FILE]
//!              [--series FILE --bin-ms 100] [--window START_S END_S]
//!              [--trace FILE --client-ports PORT,...]
//!
//! Writes the NDJSON summary to stdout (or --summary); exit 0 also for a truncated capture
//! (a warning on stderr), 2 when the input is missing or not a capture, 1 on other errors.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use traceanalyze::{analyze, Config, Sinks, TraceError};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Per-connection TCP metrics of a server-side pcap/pcapng, in one streaming pass"
)]
struct Args {
    /// The capture (pcap or pcapng)
    pcap: PathBuf,
    /// The server's TCP port: connections are oriented client -> server by it
    #[arg(long)]
    server_port: u16,
    /// NDJSON summary (default: stdout)
    #[arg(long)]
    summary: Option<PathBuf>,
    /// CSV of RTT samples: conn,ack_ts_ns,rtt_ns
    #[arg(long)]
    rtt_samples: Option<PathBuf>,
    /// CSV of per-flow time series (bytes per bin, in-flight bytes)
    #[arg(long)]
    series: Option<PathBuf>,
    /// CSV of the segment trace (time-sequence rows) of the connections from --client-ports
    #[arg(long, requires = "client_ports")]
    trace: Option<PathBuf>,
    /// Client ports to trace, comma-separated (the measured requests' connections)
    #[arg(long, value_delimiter = ',', requires = "trace")]
    client_ports: Vec<u16>,
    /// Series bin width in milliseconds
    #[arg(long, default_value_t = 100.0)]
    bin_ms: f64,
    /// The port aggregate's interval, epoch seconds (default: first to last segment)
    #[arg(long, num_args = 2, value_names = ["START_S", "END_S"])]
    window: Option<Vec<f64>>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let user_error = matches!(
                err.downcast_ref::<TraceError>(),
                Some(TraceError::Open { .. } | TraceError::NotAPcap(_))
            );
            eprintln!("traceanalyze: {err:#}");
            ExitCode::from(if user_error { 2 } else { 1 })
        }
    }
}

/// Epoch seconds -> ns, whole seconds apart: an f64 of ~1.7e18 ns is only good to 256 ns.
fn epoch_ns(seconds: f64) -> i64 {
    let whole = seconds.floor();
    whole as i64 * 1_000_000_000 + ((seconds - whole) * 1e9).round() as i64
}

fn create(path: &PathBuf) -> anyhow::Result<BufWriter<File>> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    Ok(BufWriter::with_capacity(1 << 16, file))
}

fn run(args: &Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.bin_ms > 0.0, "--bin-ms must be positive");
    let window_ns = args
        .window
        .as_ref()
        .map(|w| (epoch_ns(w[0]), epoch_ns(w[1])));
    if let Some((s, e)) = window_ns {
        anyhow::ensure!(e > s, "--window: END_S must be after START_S");
    }
    let input = File::open(&args.pcap).map_err(|source| TraceError::Open {
        path: args.pcap.display().to_string(),
        source,
    })?;
    let mut summary: Box<dyn Write> = match &args.summary {
        Some(path) => Box::new(create(path)?),
        None => Box::new(BufWriter::with_capacity(1 << 16, io::stdout().lock())),
    };
    let mut rtt = args.rtt_samples.as_ref().map(create).transpose()?;
    let mut series = args.series.as_ref().map(create).transpose()?;
    let mut trace = args.trace.as_ref().map(create).transpose()?;
    let config = Config {
        server_port: args.server_port,
        bin_ns: args
            .series
            .as_ref()
            .map(|_| (args.bin_ms * 1e6).round().max(1.0) as i64),
        window_ns,
        trace_client_ports: args.client_ports.iter().copied().collect(),
    };
    let mut sinks = Sinks {
        summary: &mut *summary,
        rtt: rtt.as_mut().map(|w| w as &mut dyn Write),
        series: series.as_mut().map(|w| w as &mut dyn Write),
        trace: trace.as_mut().map(|w| w as &mut dyn Write),
    };
    let outcome = analyze(
        input, // pcap-parser buffers: no BufReader (one copy less)
        &args.pcap.display().to_string(),
        config,
        &mut sinks,
    )?;
    if let Some(reason) = &outcome.stats.stop_reason {
        eprintln!(
            "traceanalyze: warning: {}: {reason}; analysed the {} frames before the cut",
            args.pcap.display(),
            outcome.stats.frames
        );
    }
    Ok(())
}
