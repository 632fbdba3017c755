//! The human table (stdout) and the JSON document (--json) of a run.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use crate::limits::NofileStatus;
use crate::load::SecondLine;
use crate::stats::FamilyReport;

pub const FORMAT_VERSION: u32 = 1;

/// Print to stdout; a closed stdout (e.g. `| head`) is not worth a panic.
pub fn say(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

#[derive(Serialize)]
pub struct AnmaJson {
    pub tool: &'static str,
    pub version: &'static str,
    pub format_version: u32,
    pub mode: &'static str,
    pub config: AnmaConfigJson,
    pub wall_s: f64,
    pub nofile: NofileStatus,
    pub families: BTreeMap<String, FamilyReport>,
}

#[derive(Serialize)]
pub struct AnmaConfigJson {
    pub addresses_file: String,
    pub entries_v6: usize,
    pub entries_v4: usize,
    pub path: String,
    pub requests: u64,
    pub concurrency: usize,
    pub timeout_s: f64,
    pub seed: Option<u64>,
    pub threads: usize,
}

#[derive(Serialize)]
pub struct LoadJson {
    pub tool: &'static str,
    pub version: &'static str,
    pub format_version: u32,
    pub mode: &'static str,
    pub config: LoadConfigJson,
    pub wall_s: f64,
    pub started: u64,
    /// open loop with --max-connections: scheduled fetches not started
    pub skipped: u64,
    /// the most fetches open at once
    pub max_open: u64,
    pub max_start_lag_ms: f64,
    pub nofile: NofileStatus,
    pub per_second: Vec<SecondLine>,
    pub families: BTreeMap<String, FamilyReport>,
}

#[derive(Serialize)]
pub struct LoadConfigJson {
    pub urls: Vec<String>,
    pub rate_per_s: Option<f64>,
    pub parallel: Option<usize>,
    pub seconds: Option<f64>,
    pub fetches: Option<u64>,
    pub keepalive: bool,
    pub timeout_s: f64,
    pub threads: usize,
    pub max_connections: Option<u64>,
}

/// One row per family (v6, v4, all): the slides' counts and times, plus percentiles.
pub fn family_table(families: &BTreeMap<String, FamilyReport>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<4} {:>8} {:>8} {:>7} {:>7} {:>7} {:>6} | {:>10} {:>8} {:>8} {:>8} {:>9} | {:>11} {:>7} {:>7} {:>7} {:>8} | {:>9} {:>9}",
        "fam", "requests", "NORMAL", "RESET", "TIMEOUT", "refused", "other",
        "est µs avg", "p50", "p90", "p99", "max",
        "cont ms avg", "p50", "p90", "p99", "max", "MB", "Mbit/s"
    );
    for fam in ["v6", "v4", "all"] {
        let Some(r) = families.get(fam) else { continue };
        let (c, k) = (&r.connect_us, &r.continuation_ms);
        let _ = writeln!(
            out,
            "{:<4} {:>8} {:>8} {:>7} {:>7} {:>7} {:>6} | {:>10.1} {:>8.1} {:>8.1} {:>8.1} {:>9.1} | {:>11.3} {:>7.3} {:>7.3} {:>7.3} {:>8.3} | {:>9.3} {:>9.2}",
            fam, r.requests, r.normal, r.reset, r.timeout, r.refused, r.other,
            c.avg, c.p50, c.p90, c.p99, c.max, k.avg, k.p50, k.p90, k.p99, k.max,
            r.body_bytes as f64 / 1e6, r.throughput_mbps
        );
    }
    if let Some(all) = families.get("all") {
        if !all.other_kinds.is_empty() {
            let kinds: Vec<String> = all.other_kinds.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(out, "other: {}", kinds.join(" "));
        }
    }
    out
}
