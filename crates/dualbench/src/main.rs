//! dualbench: `anma` (the ANMA dual-stack benchmark) and `load` (http_load-style stress).
//! Exit codes: 0 run done (whatever the outcomes), 2 usage, 3 bad input file or argument,
//! 4 cannot write --json, 1 anything else.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use clap::{ArgGroup, Parser, Subcommand};

use dualbench::addresses::{load_address_file, Family};
use dualbench::anma::{run_anma, AnmaConfig};
use dualbench::duration::parse_duration;
use dualbench::error::InputError;
use dualbench::http::{check_path, parse_url, Url};
use dualbench::limits::{raise_nofile, sockets_needed, warn_if_short};
use dualbench::load::{run_load, Bound, Drive, LoadConfig};
use dualbench::report::{family_table, say, AnmaConfigJson, AnmaJson, LoadConfigJson, LoadJson, FORMAT_VERSION};

const EXIT_INPUT: i32 = 3;
const EXIT_OUTPUT: i32 = 4;

#[derive(Parser)]
#[command(name = "dualbench", version, about = "ANMA dual-stack web benchmark and open-loop HTTP stress client")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// ANMA: N requests over C concurrent connections, IPv6:IPv4 ratio from the address list.
    Anma(AnmaArgs),
    /// http_load: fetches at a rate (open loop) or by P parallel workers (closed loop).
    Load(LoadArgs),
}

#[derive(clap::Args)]
struct AnmaArgs {
    /// address list: one IP per line (IPv6 with or without brackets, optional :port), '#' comments
    #[arg(long)]
    addresses: PathBuf,
    #[arg(long, default_value = "/")]
    path: String,
    /// port for entries that name none
    #[arg(long, default_value_t = 80)]
    port: u16,
    #[arg(long, default_value_t = 10_000)]
    requests: u64,
    #[arg(long, default_value_t = 1_000)]
    concurrency: usize,
    /// a connection still open this long after its SYN is closed as TIMEOUT
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
    /// shuffle the order of requests (counts per entry stay exact)
    #[arg(long)]
    seed: Option<u64>,
    #[arg(long)]
    json: Option<PathBuf>,
    /// runtime worker threads (default: number of CPUs)
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(clap::Args)]
#[command(group(ArgGroup::new("drive").required(true).args(["rate", "parallel"])))]
#[command(group(ArgGroup::new("bound").required(true).args(["seconds", "fetches"])))]
#[command(group(ArgGroup::new("targets").required(true).multiple(true).args(["url", "urls"])))]
struct LoadArgs {
    /// http://IP[:port]/path (repeatable; IP literals only)
    #[arg(long)]
    url: Vec<String>,
    /// file with one URL per line ('#' comments)
    #[arg(long)]
    urls: Option<PathBuf>,
    /// fetches started per second, open loop
    #[arg(long)]
    rate: Option<f64>,
    /// parallel workers, closed loop
    #[arg(long)]
    parallel: Option<usize>,
    #[arg(long, value_parser = parse_duration)]
    seconds: Option<Duration>,
    #[arg(long)]
    fetches: Option<u64>,
    /// reuse connections (default: a new connection per fetch, like http_load)
    #[arg(long)]
    keepalive: bool,
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    timeout: Duration,
    /// open loop: at most N fetches open at once; a fetch due while N are open is skipped
    /// (counted per second as `skipped`, never delayed)
    #[arg(long, value_name = "N", conflicts_with = "parallel")]
    max_connections: Option<u64>,
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long)]
    threads: Option<usize>,
    /// no per-second lines on stdout
    #[arg(long)]
    quiet: bool,
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Anma(a) => anma(a),
        Command::Load(l) => load(l),
    };
    if let Err(err) = result {
        let code = if err.downcast_ref::<InputError>().is_some() {
            EXIT_INPUT
        } else if err.downcast_ref::<OutputErrorMarker>().is_some() {
            EXIT_OUTPUT
        } else {
            1
        };
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "dualbench: {err:#}");
        std::process::exit(code);
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
struct OutputErrorMarker {
    path: String,
    source: std::io::Error,
}

fn runtime(threads: Option<usize>) -> Result<(tokio::runtime::Runtime, usize)> {
    let n = threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(n).enable_all().build()?;
    Ok((rt, n))
}

fn write_json<T: serde::Serialize>(path: &Path, doc: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(doc)? + "\n";
    std::fs::write(path, text)
        .map_err(|source| OutputErrorMarker { path: path.display().to_string(), source })?;
    Ok(())
}

fn positive(what: &str, value: u64) -> Result<()> {
    if value == 0 {
        return Err(InputError::BadArgument(format!("{what} must be at least 1")).into());
    }
    Ok(())
}

fn anma(a: AnmaArgs) -> Result<()> {
    check_path(&a.path).map_err(InputError::BadArgument)?;
    positive("--requests", a.requests)?;
    positive("--concurrency", a.concurrency as u64)?;
    let targets = load_address_file(&a.addresses, a.port)?;
    let nofile = raise_nofile(sockets_needed(a.concurrency.min(a.requests as usize) as u64));
    warn_if_short(&nofile);
    let cfg = AnmaConfig {
        targets: targets.clone(),
        path: a.path.clone(),
        requests: a.requests,
        concurrency: a.concurrency,
        timeout: a.timeout,
        seed: a.seed,
    };
    let (rt, threads) = runtime(a.threads)?;
    let outcome = rt.block_on(run_anma(&cfg));
    let families = outcome.totals.reports(outcome.wall);
    let v6 = targets.iter().filter(|t| Family::of(t) == Family::V6).count();
    say(&format!(
        "dualbench anma: {} requests, {} concurrent, v6:v4 entries {}:{}, timeout {:?}, {:.3} s",
        a.requests, a.concurrency, v6, targets.len() - v6, a.timeout, outcome.wall.as_secs_f64()
    ));
    say(&family_table(&families));
    if let Some(path) = &a.json {
        let doc = AnmaJson {
            tool: "dualbench",
            version: env!("CARGO_PKG_VERSION"),
            format_version: FORMAT_VERSION,
            mode: "anma",
            config: AnmaConfigJson {
                addresses_file: a.addresses.display().to_string(),
                entries_v6: v6,
                entries_v4: targets.len() - v6,
                path: a.path,
                requests: a.requests,
                concurrency: a.concurrency,
                timeout_s: a.timeout.as_secs_f64(),
                seed: a.seed,
                threads,
            },
            wall_s: outcome.wall.as_secs_f64(),
            nofile,
            families,
        };
        write_json(path, &doc)?;
    }
    Ok(())
}

fn load_urls(a: &LoadArgs) -> Result<Vec<Url>> {
    let mut urls = Vec::new();
    for u in &a.url {
        urls.push(parse_url(u).map_err(|p| InputError::BadArgument(format!("--url: {p}")))?);
    }
    if let Some(path) = &a.urls {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| InputError::BadFile { file: file.clone(), problem: e.to_string() })?;
        for (i, line) in text.lines().enumerate() {
            let t = line.split('#').next().unwrap_or("").trim();
            if !t.is_empty() {
                urls.push(parse_url(t).map_err(|problem| InputError::BadLine { file: file.clone(), line: i + 1, problem })?);
            }
        }
    }
    if urls.is_empty() {
        return Err(InputError::BadArgument("no URLs given".into()).into());
    }
    Ok(urls)
}

fn load(a: LoadArgs) -> Result<()> {
    let urls = load_urls(&a)?;
    let drive = match (a.rate, a.parallel) {
        (Some(r), _) if !(r.is_finite() && r > 0.0 && r <= 1e6) => {
            return Err(InputError::BadArgument(format!("--rate {r}: must be in (0, 1e6]")).into())
        }
        (Some(r), _) => Drive::Rate(r),
        (None, Some(p)) => {
            positive("--parallel", p as u64)?;
            Drive::Parallel(p)
        }
        (None, None) => unreachable!("clap requires --rate or --parallel"),
    };
    let bound = match (a.seconds, a.fetches) {
        (Some(s), _) => Bound::Seconds(s),
        (None, Some(n)) => {
            positive("--fetches", n)?;
            Bound::Fetches(n)
        }
        (None, None) => unreachable!("clap requires --seconds or --fetches"),
    };
    if let Some(n) = a.max_connections {
        positive("--max-connections", n)?;
    }
    let cfg = LoadConfig {
        urls: urls.clone(),
        drive,
        bound,
        keepalive: a.keepalive,
        timeout: a.timeout,
        threads: 1,
        print_seconds: !a.quiet,
        max_connections: a.max_connections,
    };
    let nofile = raise_nofile(sockets_needed(cfg.sockets_needed()));
    warn_if_short(&nofile);
    let (rt, threads) = runtime(a.threads)?;
    let cfg = LoadConfig { threads, ..cfg };
    let outcome = rt.block_on(run_load(&cfg));
    let families = outcome.totals.reports(outcome.wall);
    let all = &families["all"];
    say(&format!(
        "dualbench load: {} fetches started in {:.3} s, {} NORMAL ({:.1}/s), {:.2} Mbit/s body, latency ms avg {:.3} p50 {:.3} p99 {:.3} max {:.3}{}",
        outcome.started, outcome.wall.as_secs_f64(), all.normal, all.normal_per_s, all.throughput_mbps,
        all.latency_ms.avg, all.latency_ms.p50, all.latency_ms.p99, all.latency_ms.max,
        match drive {
            Drive::Rate(_) => format!(
                ", max start lag {:.3} ms, at most {} open, {} skipped",
                outcome.max_start_lag.as_secs_f64() * 1e3,
                outcome.max_open,
                outcome.skipped
            ),
            Drive::Parallel(_) => String::new(),
        }
    ));
    say(&family_table(&families));
    if let Some(path) = &a.json {
        let doc = LoadJson {
            tool: "dualbench",
            version: env!("CARGO_PKG_VERSION"),
            format_version: FORMAT_VERSION,
            mode: "load",
            config: LoadConfigJson {
                urls: urls.iter().map(|u| format!("http://{}{}", u.host_header(), u.path)).collect(),
                rate_per_s: a.rate,
                parallel: if a.rate.is_some() { None } else { a.parallel },
                seconds: a.seconds.map(|s| s.as_secs_f64()),
                fetches: if a.seconds.is_some() { None } else { a.fetches },
                keepalive: a.keepalive,
                timeout_s: a.timeout.as_secs_f64(),
                threads,
                max_connections: a.max_connections,
            },
            wall_s: outcome.wall.as_secs_f64(),
            started: outcome.started,
            skipped: outcome.skipped,
            max_open: outcome.max_open,
            max_start_lag_ms: outcome.max_start_lag.as_secs_f64() * 1e3,
            nofile,
            per_second: outcome.per_second,
            families,
        };
        write_json(path, &doc)?;
    }
    Ok(())
}
