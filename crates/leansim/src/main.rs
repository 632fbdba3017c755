//! `leansim SCENARIO.json --pcap OUT.pcap`: runs the scenario, writes the server-side capture,
//! prints the outcome (links' drops, GET times, server counters) as one JSON object.
//! Exit codes: 2 a bad scenario or server flag, 4 an I/O failure, 1 anything else.
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use leansim::{Network, Scenario, SimError};

#[derive(Debug, Parser)]
#[command(name = "leansim", version, about = "leanweb behind one simulated bottleneck, in virtual time")]
struct Args {
    /// Scenario JSON (crates/leansim/src/scenario.rs).
    scenario: PathBuf,
    /// Where to write the capture at the server.
    #[arg(long)]
    pcap: PathBuf,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct InputError(String);

fn run(args: &Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.scenario).with_context(|| format!("reading {}", args.scenario.display()))?;
    let scenario: Scenario = serde_json::from_str(&text).map_err(|e| InputError(format!("{}: {e}", args.scenario.display())))?;
    let file = File::create(&args.pcap).with_context(|| format!("creating {}", args.pcap.display()))?;
    let started = std::time::Instant::now();
    let network = Network::new(&scenario, BufWriter::new(file)).map_err(|e| match e {
        SimError::Pcap(io) => anyhow::Error::new(io),
        other => anyhow::Error::new(InputError(other.to_string())),
    })?;
    let (outcome, _) = network.run()?;
    let mut value = serde_json::to_value(&outcome)?;
    value["wall_s"] = serde_json::json!(started.elapsed().as_secs_f64());
    println!("{value}");
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("leansim: {err:#}");
            if err.is::<InputError>() {
                ExitCode::from(2)
            } else if err.is::<std::io::Error>() || err.chain().any(|c| c.is::<std::io::Error>()) {
                ExitCode::from(4)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
