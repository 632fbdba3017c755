//! The scenario a run simulates, as JSON (written by python/src/congestlab/simulate/mapping.py
//! from a study spec): one bottleneck between a client side and leanweb, the measured GETs
//! in turn, and background flows sharing the bottleneck.
use std::path::PathBuf;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Seeds the links' random loss and the connections' initial sequence numbers.
    #[serde(default = "one")]
    pub seed: u64,
    /// leanweb's own flags (crates/leanweb/src/config.rs): profile, RTO knobs, cc, recovery...
    #[serde(default)]
    pub server_args: Vec<String>,
    /// Document root holding the files the GETs ask for.
    pub root: PathBuf,
    #[serde(default = "http_port")]
    pub port: u16,
    /// Server -> client: the direction of the responses (and of the background flows).
    pub data_link: LinkSpec,
    /// Client -> server: requests and ACKs.
    pub ack_link: LinkSpec,
    #[serde(default)]
    pub client: ClientSpec,
    /// The measured GETs, one after another (`gap_ms` after the previous one's last byte).
    pub gets: Vec<GetSpec>,
    #[serde(default)]
    pub gap_ms: f64,
    /// Background runs this long before the first measured GET.
    #[serde(default)]
    pub warmup_ms: f64,
    #[serde(default)]
    pub background: Vec<Background>,
    /// Virtual time after which the run stops, finished or not.
    #[serde(default = "limit_s")]
    pub limit_s: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// 0: no rate limit (serialization takes no time).
    #[serde(default)]
    pub rate_bps: u64,
    /// Drop-tail FIFO limit, packets (in service included), as the testbed's HTB leaf qdisc.
    #[serde(default = "queue_packets")]
    pub queue_packets: usize,
    #[serde(default)]
    pub delay_ms: f64,
    #[serde(default)]
    pub loss: f64,
}

/// The kernel client's TCP, as far as leantcp can stand in for it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    /// The window offered first: Linux's 64240 (tcp_rmem's default 131072, half of it
    /// offered, whole segments), as the testbed's client sends in its SYN.
    #[serde(default = "client_recv_buffer")]
    pub recv_buffer_bytes: usize,
    /// Grow the window by what arrives, up to `max_recv_buffer_bytes`, as the testbed's
    /// kernel client does (+3072 per ACK of 2 segments in its captures, 64240 to 500-620 KB
    /// over a 320 KiB GET). Off by default: without Linux's clamping of the window under
    /// loss, the bare server's go-back-N overflows a shallow queue again and again
    /// (docs/notes/simulation-vs-emulation.md measures both).
    #[serde(default)]
    pub grow_window: bool,
    /// tcp_rmem's maximum (6 MiB).
    #[serde(default = "client_max_recv_buffer")]
    pub max_recv_buffer_bytes: usize,
    #[serde(default = "client_window_scale")]
    pub window_scale: u8,
}

impl Default for ClientSpec {
    fn default() -> Self {
        ClientSpec {
            recv_buffer_bytes: client_recv_buffer(),
            grow_window: false,
            max_recv_buffer_bytes: client_max_recv_buffer(),
            window_scale: client_window_scale(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Family {
    #[serde(rename = "v4")]
    V4,
    #[serde(rename = "v6")]
    V6,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetSpec {
    pub family: Family,
    /// Request target, e.g. /320KiB.bin.
    pub path: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Background {
    /// A constant-rate datagram source on the server side toward the client side (MGEN's
    /// UDP classes): `frame_bytes` Ethernet frames at `rate_bps`.
    Udp { rate_bps: f64, frame_bytes: usize, family: Family },
    /// Competing lean flows: GETs of `path` from leanweb, one every `interval_ms` from time
    /// zero (open loop, as dualbench load), each on its own connection, at most `count`.
    Get { path: String, family: Family, interval_ms: f64, count: usize },
}

fn one() -> u64 {
    1
}
fn http_port() -> u16 {
    80
}
fn queue_packets() -> usize {
    1000
}
fn limit_s() -> f64 {
    120.0
}
fn client_recv_buffer() -> usize {
    64_240
}
fn client_max_recv_buffer() -> usize {
    6 * 1024 * 1024
}
fn client_window_scale() -> u8 {
    7
}
