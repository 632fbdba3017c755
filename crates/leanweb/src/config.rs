//! Command line and TOML config; every knob of the RFC 6298 timer is here.
//! Precedence: defaults < `--config FILE.toml` < command-line flags.
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use leantcp::cc::CcKind;
use leantcp::recovery::RecoveryKind;
use leantcp::{Profile, Push, RtoConfig, SamplingStrategy, TcpConfig, Weight};
use serde::Deserialize;
use smoltcp::wire::EthernetAddress;

use crate::stack::{Ipv4Id, StackConfig, SynCookieMode};

#[derive(Debug, Clone, Default, Parser, Deserialize)]
#[command(
    name = "leanweb",
    version,
    about = "The lean (bare PC) web server on a TAP device, with its own TCP/IP stack"
)]
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
    /// 0 would ask the kernel for a port, which a TAP stack has none to give.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// Server profile: `bare` (the studies' server: no congestion control, go-back-N after
    /// a 1 s minimum RTO) or `modern` (SACK recovery, RACK-TLP, timestamps, CUBIC, 200 ms
    /// minimum RTO). The flags below override single parts of it.
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
    /// Congestion control: none | reno (RFC 5681) | cubic (RFC 9438) | compound (bpf/ctcp.bpf.c).
    #[arg(long)]
    pub cc: Option<String>,
    /// Loss recovery: go-back-n | newreno (RFC 6582) | sack (RFC 6675).
    #[arg(long)]
    pub recovery: Option<String>,
    /// RFC 2018 SACK (negotiation, out-of-order queue, SACK blocks): on | off.
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new())]
    pub sack: Option<bool>,
    /// RFC 7323 timestamps: on | off.
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new())]
    pub timestamps: Option<bool>,
    /// RFC 8985 RACK-TLP: on | off (needs recovery newreno or sack).
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new())]
    pub rack_tlp: Option<bool>,
    /// RFC 3042 limited transmit: on | off.
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new())]
    pub limited_transmit: Option<bool>,
    /// Initial congestion window in segments (RFC 6928; reno, cubic, compound).
    #[arg(long)]
    pub initial_window_segments: Option<usize>,
    /// The sender's own cap on data in flight, in full segments (default: none, only the
    /// peer's window and the congestion window limit it).
    #[arg(long)]
    pub send_window_segments: Option<usize>,
    /// Pacing of the server's own, Mbit/s (default: none): data segments leave at most at
    /// this rate, each counted as its payload plus 40 bytes of header.
    #[arg(long)]
    pub pacing_mbps: Option<f64>,
    /// RFC 9406 HyStart++ in the initial slow start (reno, cubic): on | off.
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new())]
    pub hystart: Option<bool>,
    /// Slow start credits at most this many segments per ACK (RFC 3465's L, default 2);
    /// 0 = every acknowledged segment, as Linux's tcp_slow_start.
    #[arg(long)]
    pub abc_limit_segments: Option<usize>,
    /// Which data segments carry PSH: every-segment (bare) | end-of-data (modern: the one
    /// with the last byte the server has queued, as Linux).
    #[arg(long)]
    pub push: Option<String>,
    /// IPv4 identification of TCP segments: zero (bare) | per-connection (modern: a counter per
    /// connection, +1 per segment, as Linux numbers DF packets).
    #[arg(long)]
    pub ipv4_id: Option<String>,
    /// GSO super-frames through the TAP device (IFF_VNET_HDR): on (modern) | off (bare).
    /// Consecutive data segments of one connection go to the kernel as one frame only
    /// where its segmentation gives back exactly those segments.
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new())]
    pub gso: Option<bool>,
    #[arg(long)]
    pub send_buffer_bytes: Option<usize>,
    /// Send-buffer autotuning ceiling in bytes: the buffer grows to two windows up to this
    /// (Linux's tcp_sndbuf_expand and tcp_wmem[2]); 0 keeps it at --send-buffer-bytes.
    #[arg(long)]
    pub send_buffer_max_bytes: Option<usize>,
    #[arg(long)]
    pub recv_buffer_bytes: Option<usize>,
    /// RFC 7323 §2.3: a shift count above 14 is not allowed.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=14))]
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
    /// SYN cookies (RFC 4987 §3.6): auto (once the half-open table is full) | always | never.
    #[arg(long)]
    pub syn_cookies: Option<String>,
    /// JSON-lines log of RTT samples, SRTT, RTTVAR, RTO, retransmissions, timeouts, bytes.
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// TOML file with the same keys as the long options (kebab-case).
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Print the knobs' table (names, flags, accepted values) as JSON and exit
    /// (python/src/congestlab/spec/lean_knobs.json is this output).
    #[arg(long)]
    #[serde(skip)]
    pub knobs_json: bool,
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
        let mut base: Args =
            toml::from_str(&text).map_err(|e| bad(format!("config {}: {}", path.display(), e.message())))?;
        let top = self;
        overlay!(
            base,
            top,
            tap,
            addr4,
            addr6,
            gateway4,
            gateway6,
            root,
            port,
            profile,
            mac,
            mtu,
            rto_alpha,
            rto_beta,
            rto_k,
            rto_g_us,
            rto_min_ms,
            rto_max_ms,
            rto_initial_ms,
            sampling,
            weight,
            cc,
            recovery,
            sack,
            timestamps,
            rack_tlp,
            limited_transmit,
            initial_window_segments,
            send_window_segments,
            pacing_mbps,
            hystart,
            abc_limit_segments,
            push,
            ipv4_id,
            gso,
            send_buffer_bytes,
            send_buffer_max_bytes,
            recv_buffer_bytes,
            window_scale,
            time_wait_ms,
            max_connections,
            max_half_open,
            header_timeout_ms,
            idle_timeout_ms,
            syn_cookies,
            log,
            config
        );
        Ok(base)
    }

    pub fn profile(&self) -> Result<Profile, ConfigError> {
        match &self.profile {
            Some(name) => {
                Profile::parse(name).ok_or_else(|| bad(format!("--profile {name:?}: expected bare or modern")))
            }
            None => Ok(Profile::Bare),
        }
    }

    /// The RTO knobs on top of the profile's (`modern` lowers the minimum to 200 ms).
    pub fn rto_config(&self) -> Result<RtoConfig, ConfigError> {
        let mut rto = self.profile()?.config().rto;
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
            rto.sampling = SamplingStrategy::parse(s)
                .ok_or_else(|| bad(format!("--sampling {s:?}: expected all, one or some")))?;
        }
        rto.validate().map_err(bad)?;
        Ok(rto)
    }

    pub fn stack_config(&self, random: u64) -> Result<StackConfig, ConfigError> {
        let (addr4, prefix4) = parse_cidr::<Ipv4Addr>(self.addr4.as_deref(), "--addr4", 32)?;
        let (addr6, prefix6) = parse_cidr::<Ipv6Addr>(self.addr6.as_deref(), "--addr6", 128)?;
        let root = self.root.as_deref().ok_or_else(|| bad("--root DIR is required"))?;
        let root = canonical_dir(root)?;
        let base = self.profile()?.config();
        let cc = match &self.cc {
            Some(name) => CcKind::parse(name)
                .ok_or_else(|| bad(format!("--cc {name:?}: expected none, reno, cubic or compound")))?,
            None => base.cc,
        };
        let recovery = match &self.recovery {
            Some(name) => RecoveryKind::parse(name)
                .ok_or_else(|| bad(format!("--recovery {name:?}: expected go-back-n, newreno or sack")))?,
            None => base.recovery,
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
        let tcp = TcpConfig {
            mtu,
            send_buffer_bytes: self.send_buffer_bytes.unwrap_or(base.send_buffer_bytes).max(1),
            send_buffer_max_bytes: zero_means_none(self.send_buffer_max_bytes, base.send_buffer_max_bytes),
            recv_buffer_bytes: self.recv_buffer_bytes.unwrap_or(base.recv_buffer_bytes).clamp(1, 1 << 30),
            window_scale: self.window_scale.unwrap_or(base.window_scale),
            rto: self.rto_config()?,
            cc,
            recovery,
            sack: self.sack.unwrap_or(base.sack),
            timestamps: self.timestamps.unwrap_or(base.timestamps),
            rack_tlp: self.rack_tlp.unwrap_or(base.rack_tlp),
            limited_transmit: self.limited_transmit.unwrap_or(base.limited_transmit),
            initial_window_segments: self.initial_window_segments.unwrap_or(base.initial_window_segments),
            hystart: self.hystart.unwrap_or(base.hystart),
            abc_limit_segments: zero_means_none(self.abc_limit_segments, base.abc_limit_segments),
            send_window_segments: self.send_window_segments.or(base.send_window_segments),
            pacing_rate_bps: self.pacing_rate_bps()?.or(base.pacing_rate_bps),
            time_wait: Duration::from_millis(self.time_wait_ms.unwrap_or(1000)),
            max_timeouts: base.max_timeouts,
            push: match &self.push {
                Some(name) => Push::parse(name)
                    .ok_or_else(|| bad(format!("--push {name:?}: expected every-segment or end-of-data")))?,
                None => base.push,
            },
        };
        tcp.validate().map_err(|e| bad(format!("tcp options: {e}")))?;
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
            syn_cookies: self.syn_cookie_mode()?,
            ipv4_id: match &self.ipv4_id {
                Some(name) => Ipv4Id::parse(name)
                    .ok_or_else(|| bad(format!("--ipv4-id {name:?}: expected zero or per-connection")))?,
                None if self.profile()? == Profile::Modern => Ipv4Id::PerConnection,
                None => Ipv4Id::Zero,
            },
        })
    }

    /// Whether frames go to the TAP device as GSO super-frames (`modern`'s default).
    pub fn gso(&self) -> Result<bool, ConfigError> {
        Ok(self.gso.unwrap_or(self.profile()? == Profile::Modern))
    }

    fn pacing_rate_bps(&self) -> Result<Option<u64>, ConfigError> {
        match self.pacing_mbps {
            Some(mbps) if !(mbps.is_finite() && (0.001..=100_000.0).contains(&mbps)) => {
                Err(bad(format!("--pacing-mbps {mbps}: expected 0.001..100000")))
            }
            Some(mbps) => Ok(Some((mbps * 1e6).round() as u64)),
            None => Ok(None),
        }
    }

    pub fn syn_cookie_mode(&self) -> Result<SynCookieMode, ConfigError> {
        match &self.syn_cookies {
            Some(name) => SynCookieMode::parse(name)
                .ok_or_else(|| bad(format!("--syn-cookies {name:?}: expected auto, always or never"))),
            None => Ok(SynCookieMode::Auto),
        }
    }
}

fn parse_cidr<A: std::str::FromStr>(text: Option<&str>, flag: &str, max: u8) -> Result<(A, u8), ConfigError> {
    let text = text.ok_or_else(|| bad(format!("{flag} ADDR/LEN is required")))?;
    let (addr, len) = text.split_once('/').ok_or_else(|| bad(format!("{flag} {text:?}: expected ADDR/LEN")))?;
    let addr = addr.parse::<A>().map_err(|_| bad(format!("{flag} {text:?}: bad address")))?;
    let len = len
        .parse::<u8>()
        .ok()
        .filter(|l| *l <= max)
        .ok_or_else(|| bad(format!("{flag} {text:?}: bad prefix length")))?;
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

/// A flag where 0 switches the limit off (`None`); not given: the profile's value.
fn zero_means_none(flag: Option<usize>, profile: Option<usize>) -> Option<usize> {
    match flag {
        Some(0) => None,
        Some(n) => Some(n),
        None => profile,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        let mut argv =
            vec!["leanweb", "--tap", "t0", "--addr4", "10.0.0.1/24", "--addr6", "fd00::1/64", "--root", "/tmp"];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv).unwrap()
    }

    #[test]
    fn knobs_reach_the_rto_config() {
        let cfg =
            args(&["--weight", "W5", "--sampling", "one", "--rto-min-ms", "250", "--rto-g-us", "1000", "--rto-k", "2"])
                .stack_config(1)
                .unwrap();
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
    fn profiles_set_defaults_and_flags_override_single_parts() {
        let bare = args(&[]).stack_config(1).unwrap().tcp;
        assert_eq!(bare, TcpConfig { time_wait: Duration::from_millis(1000), ..TcpConfig::bare() });
        let modern = args(&["--profile", "modern"]).stack_config(1).unwrap().tcp;
        assert_eq!((modern.cc, modern.recovery), (CcKind::Cubic, RecoveryKind::Sack));
        assert_eq!(args(&["--cc", "compound"]).stack_config(1).unwrap().tcp.cc, CcKind::Compound);
        assert!(args(&["--cc", "vegas"]).stack_config(1).unwrap_err().0.contains("cubic or compound"));
        assert!(modern.sack && modern.timestamps && modern.rack_tlp && modern.limited_transmit);
        assert_eq!(modern.rto.min, Duration::from_millis(200));
        let mixed = args(&["--profile", "modern", "--timestamps", "off", "--rack-tlp", "false", "--rto-min-ms", "300"])
            .stack_config(1)
            .unwrap()
            .tcp;
        assert!(!mixed.timestamps && !mixed.rack_tlp && mixed.sack);
        assert_eq!(mixed.rto.min, Duration::from_millis(300));
        let newreno =
            args(&["--cc", "reno", "--recovery", "newreno", "--limited-transmit", "on"]).stack_config(1).unwrap().tcp;
        assert_eq!((newreno.recovery, newreno.limited_transmit, newreno.sack), (RecoveryKind::NewReno, true, false));
        let err = args(&["--recovery", "sack"]).stack_config(1).unwrap_err();
        assert!(err.0.contains("SACK"), "{err}");
        let err = args(&["--rack-tlp", "on"]).stack_config(1).unwrap_err();
        assert!(err.0.contains("RACK"), "{err}");
        let capped = args(&["--send-window-segments", "8"]).stack_config(1).unwrap().tcp;
        assert_eq!(capped.send_window_segments, Some(8));
        assert_eq!(bare.send_window_segments, None, "off by default");
        let err = args(&["--send-window-segments", "0"]).stack_config(1).unwrap_err();
        assert!(err.0.contains("send window"), "{err}");
        assert_eq!(args(&["--pacing-mbps", "4.5"]).stack_config(1).unwrap().tcp.pacing_rate_bps, Some(4_500_000));
        assert_eq!(bare.pacing_rate_bps, None, "off by default");
        assert!(args(&["--pacing-mbps", "0"]).stack_config(1).unwrap_err().0.contains("--pacing-mbps"));
        assert!(modern.hystart && !bare.hystart, "HyStart++ in modern only");
        assert_eq!(
            (modern.send_buffer_max_bytes, bare.send_buffer_max_bytes),
            (Some(4 << 20), None),
            "autotuning in modern only"
        );
        let fixed = args(&["--profile", "modern", "--hystart", "off", "--send-buffer-max-bytes", "0"])
            .stack_config(1)
            .unwrap()
            .tcp;
        assert_eq!((fixed.hystart, fixed.send_buffer_max_bytes), (false, None));
        let tuned = args(&["--hystart", "on", "--cc", "reno", "--send-buffer-max-bytes", "1048576"])
            .stack_config(1)
            .unwrap()
            .tcp;
        assert_eq!((tuned.hystart, tuned.send_buffer_max_bytes), (true, Some(1 << 20)));
        assert_eq!(bare.abc_limit_segments, Some(2), "RFC 3465's L = 2");
        assert_eq!(args(&["--abc-limit-segments", "0"]).stack_config(1).unwrap().tcp.abc_limit_segments, None);
        assert_eq!(args(&["--abc-limit-segments", "8"]).stack_config(1).unwrap().tcp.abc_limit_segments, Some(8));
        assert!(args(&["--profile", "fast"]).stack_config(1).unwrap_err().0.contains("--profile"));
        assert!(args(&["--recovery", "tahoe"]).stack_config(1).unwrap_err().0.contains("--recovery"));
    }

    #[test]
    fn wire_details_and_gso_follow_the_profile_and_flags_override_them() {
        let bare = args(&[]);
        let (cfg, gso) = (bare.stack_config(1).unwrap(), bare.gso().unwrap());
        assert_eq!((cfg.tcp.push, cfg.ipv4_id, gso), (Push::EverySegment, Ipv4Id::Zero, false));
        let modern = args(&["--profile", "modern"]);
        let (cfg, gso) = (modern.stack_config(1).unwrap(), modern.gso().unwrap());
        assert_eq!((cfg.tcp.push, cfg.ipv4_id, gso), (Push::EndOfData, Ipv4Id::PerConnection, true));
        let mixed = args(&["--profile", "modern", "--gso", "off", "--push", "every-segment", "--ipv4-id", "zero"]);
        let (cfg, gso) = (mixed.stack_config(1).unwrap(), mixed.gso().unwrap());
        assert_eq!((cfg.tcp.push, cfg.ipv4_id, gso), (Push::EverySegment, Ipv4Id::Zero, false));
        assert!(args(&["--push", "never"]).stack_config(1).unwrap_err().0.contains("--push"));
        assert!(args(&["--ipv4-id", "random"]).stack_config(1).unwrap_err().0.contains("--ipv4-id"));
    }

    #[test]
    fn toml_file_fills_unset_flags_and_flags_win() {
        let path = std::env::temp_dir().join(format!("leanweb-cfg-{}.toml", std::process::id()));
        let toml = "port = 8080\nweight = \"W9\"\nsampling = \"some\"\nrto-min-ms = 500\nprofile = \"modern\"\n";
        std::fs::write(&path, format!("{toml}rack-tlp = false\n")).unwrap();
        let mut a = args(&["--sampling", "all"]);
        a.config = Some(path.clone());
        let a = a.with_config_file().unwrap();
        let cfg = a.stack_config(1).unwrap();
        assert_eq!(cfg.port, 8080);
        assert_eq!(cfg.tcp.rto.sampling, SamplingStrategy::All);
        assert_eq!(cfg.tcp.rto.min, Duration::from_millis(500));
        assert_eq!((cfg.tcp.rto.alpha, cfg.tcp.rto.beta), (1.0 / 16.0, 1.0 / 8.0));
        assert!(cfg.tcp.sack && !cfg.tcp.rack_tlp, "profile and a bool from the file");
        std::fs::write(&path, "prot = 1\n").unwrap();
        let mut a = args(&[]);
        a.config = Some(path.clone());
        assert!(a.with_config_file().unwrap_err().0.contains("prot"));
        std::fs::remove_file(&path).unwrap();
    }
}
