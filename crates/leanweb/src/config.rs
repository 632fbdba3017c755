//! Command line and TOML config; every knob of the RFC 6298 timer is here.
//! Precedence: defaults < `--config FILE.toml` < command-line flags.
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use leantcp::cc::CcKind;
use leantcp::{RtoConfig, SamplingStrategy, TcpConfig, Weight};
use serde::Deserialize;
use smoltcp::wire::EthernetAddress;

use crate::stack::StackConfig;

#[derive(Debug, Clone, Default, Parser, Deserialize)]
#[command(name = "leanweb", version, about = "The lean (bare PC) web server on a TAP device, with its own TCP/IP stack")]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Args {
    /// Existing TAP device to attach to.
    #[arg(long)]
    pub tap: Option<String>,
    /// IPv4 address with prefix length, e.g. 10.0.1.10/24.
    #[arg(long)]
    pub addr4: Option<String>,
    /// IPv6 address with prefix length, e.g. fd00:1::10/64.
    #[arg(long)]
    pub addr6: Option<String>,
    #[arg(long)]
    pub gateway4: Option<Ipv4Addr>,
    #[arg(long)]
    pub gateway6: Option<Ipv6Addr>,
    /// Document root: files under it are served, nothing else.
    #[arg(long)]
    pub root: Option<PathBuf>,
    #[arg(long)]
    pub port: Option<u16>,
    /// Server profile; only `bare` exists (no congestion control, go-back-N on timeout).
    #[arg(long)]
    pub profile: Option<String>,
    /// Our MAC address on the TAP link (default: random, locally administered).
    #[arg(long)]
    pub mac: Option<String>,
    #[arg(long)]
    pub mtu: Option<usize>,
    #[arg(long)]
    pub rto_alpha: Option<f64>,
    #[arg(long)]
    pub rto_beta: Option<f64>,
    #[arg(long)]
    pub rto_k: Option<f64>,
    /// Clock granularity G in microseconds.
    #[arg(long)]
    pub rto_g_us: Option<u64>,
    #[arg(long)]
    pub rto_min_ms: Option<u64>,
    #[arg(long)]
    pub rto_max_ms: Option<u64>,
    #[arg(long)]
    pub rto_initial_ms: Option<u64>,
    /// RTT sampling strategy: all | one | some.
    #[arg(long)]
    pub sampling: Option<String>,
    /// Weight preset W1..W9 of Table 5 (sets alpha and beta; conflicts with --rto-alpha/--rto-beta).
    #[arg(long)]
    pub weight: Option<String>,
    /// Congestion control: none.
    #[arg(long)]
    pub cc: Option<String>,
    #[arg(long)]
    pub send_buffer_bytes: Option<usize>,
    #[arg(long)]
    pub recv_buffer_bytes: Option<usize>,
    #[arg(long)]
    pub window_scale: Option<u8>,
    #[arg(long)]
    pub time_wait_ms: Option<u64>,
    #[arg(long)]
    pub max_connections: Option<usize>,
    #[arg(long)]
    pub max_half_open: Option<usize>,
    #[arg(long)]
    pub header_timeout_ms: Option<u64>,
    #[arg(long)]
    pub idle_timeout_ms: Option<u64>,
    /// JSON-lines log of RTT samples, SRTT, RTTVAR, RTO, retransmissions, timeouts, bytes.
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// TOML file with the same keys as the long options (kebab-case).
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
}

/// A user mistake: one line, exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn bad(msg: impl Into<String>) -> ConfigError {
    ConfigError(msg.into())
}

macro_rules! overlay {
    ($base:ident, $top:ident, $($field:ident),*) => {
        $( if $top.$field.is_some() { $base.$field = $top.$field.clone(); } )*
    };
}

impl Args {
    /// Fills unset flags from the TOML file named by `--config`.
    pub fn with_config_file(self) -> Result<Args, ConfigError> {
        let Some(path) = self.config.clone() else { return Ok(self) };
        let text = std::fs::read_to_string(&path).map_err(|e| bad(format!("config {}: {e}", path.display())))?;
        let mut base: Args = toml::from_str(&text).map_err(|e| bad(format!("config {}: {}", path.display(), e.message())))?;
        let top = self;
        overlay!(base, top, tap, addr4, addr6, gateway4, gateway6, root, port, profile, mac, mtu, rto_alpha, rto_beta, rto_k,
            rto_g_us, rto_min_ms, rto_max_ms, rto_initial_ms, sampling, weight, cc, send_buffer_bytes, recv_buffer_bytes,
            window_scale, time_wait_ms, max_connections, max_half_open, header_timeout_ms, idle_timeout_ms, log, config);
        Ok(base)
    }

    pub fn rto_config(&self) -> Result<RtoConfig, ConfigError> {
        let mut rto = RtoConfig::default();
        if let Some(weight) = &self.weight {
            if self.rto_alpha.is_some() || self.rto_beta.is_some() {
                return Err(bad("--weight conflicts with --rto-alpha/--rto-beta: give one or the other"));
            }
            let weight = Weight::parse(weight).ok_or_else(|| bad(format!("--weight {weight:?}: expected W1..W9")))?;
            rto = rto.with_weight(weight);
        }
        if let Some(a) = self.rto_alpha {
            rto.alpha = a;
        }
        if let Some(b) = self.rto_beta {
            rto.beta = b;
        }
        if let Some(k) = self.rto_k {
            rto.k = k;
        }
        if let Some(g) = self.rto_g_us {
            rto.granularity = Duration::from_micros(g);
        }
        if let Some(ms) = self.rto_min_ms {
            rto.min = Duration::from_millis(ms);
        }
        if let Some(ms) = self.rto_max_ms {
            rto.max = Duration::from_millis(ms);
        }
        if let Some(ms) = self.rto_initial_ms {
            rto.initial = Duration::from_millis(ms);
        }
        if let Some(s) = &self.sampling {
            rto.sampling = SamplingStrategy::parse(s).ok_or_else(|| bad(format!("--sampling {s:?}: expected all, one or some")))?;
        }
        rto.validate().map_err(bad)?;
        Ok(rto)
    }

    pub fn stack_config(&self, random: u64) -> Result<StackConfig, ConfigError> {
        let (addr4, prefix4) = parse_cidr::<Ipv4Addr>(self.addr4.as_deref(), "--addr4", 32)?;
        let (addr6, prefix6) = parse_cidr::<Ipv6Addr>(self.addr6.as_deref(), "--addr6", 128)?;
        let root = self.root.as_deref().ok_or_else(|| bad("--root DIR is required"))?;
        let root = canonical_dir(root)?;
        if let Some(profile) = &self.profile {
            if profile != "bare" {
                return Err(bad(format!("--profile {profile:?}: only `bare` exists")));
            }
        }
        let cc = match &self.cc {
            Some(name) => CcKind::parse(name).ok_or_else(|| bad(format!("--cc {name:?}: only `none` exists yet")))?,
            None => CcKind::None,
        };
        let mac = match &self.mac {
            Some(text) => parse_mac(text)?,
            None => {
                let b = random.to_le_bytes();
                EthernetAddress([0x02, b[0], b[1], b[2], b[3], b[4]])
            }
        };
        let mtu = self.mtu.unwrap_or(1500);
        if !(1280..=9000).contains(&mtu) {
            return Err(bad(format!("--mtu {mtu}: expected 1280..9000")));
        }
        let defaults = TcpConfig::default();
        let tcp = TcpConfig {
            mtu,
            send_buffer_bytes: self.send_buffer_bytes.unwrap_or(defaults.send_buffer_bytes).max(1),
            recv_buffer_bytes: self.recv_buffer_bytes.unwrap_or(defaults.recv_buffer_bytes).clamp(1, 1 << 30),
            window_scale: self.window_scale.unwrap_or(defaults.window_scale).min(14),
            rto: self.rto_config()?,
            cc,
            recovery: defaults.recovery,
            time_wait: Duration::from_millis(self.time_wait_ms.unwrap_or(1000)),
            max_timeouts: defaults.max_timeouts,
        };
        Ok(StackConfig {
            mac,
            addr4,
            prefix4,
            addr6,
            prefix6,
            gateway4: self.gateway4,
            gateway6: self.gateway6,
            port: self.port.unwrap_or(80),
            root,
            tcp,
            max_connections: self.max_connections.unwrap_or(1024).max(1),
            max_half_open: self.max_half_open.unwrap_or(256).max(1),
            header_timeout: Duration::from_millis(self.header_timeout_ms.unwrap_or(10_000)),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms.unwrap_or(30_000)),
        })
    }
}

fn parse_cidr<A: std::str::FromStr>(text: Option<&str>, flag: &str, max: u8) -> Result<(A, u8), ConfigError> {
    let text = text.ok_or_else(|| bad(format!("{flag} ADDR/LEN is required")))?;
    let (addr, len) = text.split_once('/').ok_or_else(|| bad(format!("{flag} {text:?}: expected ADDR/LEN")))?;
    let addr = addr.parse::<A>().map_err(|_| bad(format!("{flag} {text:?}: bad address")))?;
    let len = len.parse::<u8>().ok().filter(|l| *l <= max).ok_or_else(|| bad(format!("{flag} {text:?}: bad prefix length")))?;
    Ok((addr, len))
}

fn parse_mac(text: &str) -> Result<EthernetAddress, ConfigError> {
    let parts: Vec<u8> = text.split(':').filter_map(|p| u8::from_str_radix(p, 16).ok()).collect();
    if parts.len() != 6 || text.split(':').count() != 6 {
        return Err(bad(format!("--mac {text:?}: expected six hex bytes")));
    }
    let mac = EthernetAddress::from_bytes(&parts);
    if !mac.is_unicast() {
        return Err(bad(format!("--mac {text:?}: must be unicast")));
    }
    Ok(mac)
}

fn canonical_dir(path: &Path) -> Result<PathBuf, ConfigError> {
    let real = path.canonicalize().map_err(|e| bad(format!("--root {}: {e}", path.display())))?;
    if !real.is_dir() {
        return Err(bad(format!("--root {}: not a directory", path.display())));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut argv = vec!["leanweb", "--tap", "t0", "--addr4", "10.0.0.1/24", "--addr6", "fd00::1/64", "--root", "/tmp"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv).unwrap()
    }

    #[test]
    fn knobs_reach_the_rto_config() {
        let cfg = args(&["--weight", "W5", "--sampling", "one", "--rto-min-ms", "250", "--rto-g-us", "1000", "--rto-k", "2"]).stack_config(1).unwrap();
        let rto = cfg.tcp.rto;
        assert_eq!((rto.alpha, rto.beta), (3.0 / 16.0, 3.0 / 8.0));
        assert_eq!(rto.sampling, SamplingStrategy::One);
        assert_eq!(rto.min, Duration::from_millis(250));
        assert_eq!(rto.granularity, Duration::from_millis(1));
        assert_eq!(rto.k, 2.0);
        assert_eq!(cfg.prefix4, 24);
        assert_eq!(cfg.mac.0[0], 0x02);
    }

    #[test]
    fn mistakes_are_one_clear_line() {
        let err = args(&["--weight", "W1", "--rto-alpha", "0.2"]).stack_config(1).unwrap_err();
        assert!(err.0.contains("conflicts"), "{err}");
        let err = args(&["--sampling", "most"]).stack_config(1).unwrap_err();
        assert!(err.0.contains("--sampling"), "{err}");
        let mut a = args(&[]);
        a.addr4 = Some("10.0.0.1".into());
        assert!(a.stack_config(1).unwrap_err().0.contains("ADDR/LEN"));
        a.addr4 = Some("10.0.0.1/33".into());
        assert!(a.stack_config(1).unwrap_err().0.contains("prefix"));
    }

    #[test]
    fn toml_file_fills_unset_flags_and_flags_win() {
        let path = std::env::temp_dir().join(format!("leanweb-cfg-{}.toml", std::process::id()));
        std::fs::write(&path, "port = 8080\nweight = \"W9\"\nsampling = \"some\"\nrto-min-ms = 500\n").unwrap();
        let mut a = args(&["--sampling", "all"]);
        a.config = Some(path.clone());
        let a = a.with_config_file().unwrap();
        let cfg = a.stack_config(1).unwrap();
        assert_eq!(cfg.port, 8080);
        assert_eq!(cfg.tcp.rto.sampling, SamplingStrategy::All);
        assert_eq!(cfg.tcp.rto.min, Duration::from_millis(500));
        assert_eq!((cfg.tcp.rto.alpha, cfg.tcp.rto.beta), (1.0 / 16.0, 1.0 / 8.0));
        std::fs::write(&path, "prot = 1\n").unwrap();
        let mut a = args(&[]);
        a.config = Some(path.clone());
        assert!(a.with_config_file().unwrap_err().0.contains("prot"));
        std::fs::remove_file(&path).unwrap();
    }
}
