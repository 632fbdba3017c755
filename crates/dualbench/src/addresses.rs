//! The ANMA address-list file: one IP literal per line; its family decides the request's
//! family, and the share of entries of each family sets the ratio.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV4};
use std::path::Path;

use serde::Serialize;

use crate::error::InputError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Family {
    #[serde(rename = "v6")]
    V6,
    #[serde(rename = "v4")]
    V4,
}

impl Family {
    pub fn of(addr: &SocketAddr) -> Family {
        if addr.is_ipv6() {
            Family::V6
        } else {
            Family::V4
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Family::V6 => "v6",
            Family::V4 => "v4",
        }
    }
    pub fn index(self) -> usize {
        match self {
            Family::V6 => 0,
            Family::V4 => 1,
        }
    }
}

/// One line: `addr`, `[v6addr]`, `[v6addr]:port` or `v4addr:port`; `#` starts a comment.
/// Only IP literals: dualbench never resolves names (it must not reach beyond what it is told).
pub fn parse_address_line(line: &str, default_port: u16) -> Result<Option<SocketAddr>, String> {
    let text = line.split('#').next().unwrap_or("").trim();
    if text.is_empty() {
        return Ok(None);
    }
    let addr = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or_else(|| format!("missing ']' in {text:?}"))?;
        let ip: Ipv6Addr = inside.parse().map_err(|_| format!("not an IPv6 address: {inside:?}"))?;
        let port = match after {
            "" => default_port,
            p => parse_port(p.strip_prefix(':').ok_or_else(|| format!("junk after ']' in {text:?}"))?)?,
        };
        SocketAddr::new(IpAddr::V6(ip), port)
    } else if let Ok(ip) = text.parse::<IpAddr>() {
        SocketAddr::new(ip, default_port)
    } else if let Ok(sa) = text.parse::<SocketAddrV4>() {
        SocketAddr::V4(sa)
    } else {
        return Err(format!("not an IP address (IPv4, IPv6, [IPv6]:port or IPv4:port): {text:?}"));
    };
    if addr.port() == 0 {
        return Err(format!("port 0 in {text:?}"));
    }
    Ok(Some(addr))
}

fn parse_port(text: &str) -> Result<u16, String> {
    text.parse::<u16>().map_err(|_| format!("not a port number: {text:?}"))
}

pub fn parse_address_list(text: &str, file: &str, default_port: u16) -> Result<Vec<SocketAddr>, InputError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match parse_address_line(line, default_port) {
            Ok(Some(addr)) => out.push(addr),
            Ok(None) => {}
            Err(problem) => return Err(InputError::BadLine { file: file.to_string(), line: i + 1, problem }),
        }
    }
    if out.is_empty() {
        return Err(InputError::BadFile { file: file.to_string(), problem: "no addresses in the file".into() });
    }
    Ok(out)
}

pub fn load_address_file(path: &Path, default_port: u16) -> Result<Vec<SocketAddr>, InputError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| InputError::BadFile { file: file.clone(), problem: e.to_string() })?;
    let text = String::from_utf8(bytes)
        .map_err(|_| InputError::BadFile { file: file.clone(), problem: "not UTF-8 text".into() })?;
    parse_address_list(&text, &file, default_port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let p = |s| parse_address_line(s, 80).unwrap().unwrap();
        assert_eq!(p("127.0.0.1"), "127.0.0.1:80".parse().unwrap());
        assert_eq!(p("  ::1  # loopback"), "[::1]:80".parse().unwrap());
        assert_eq!(p("[::1]"), "[::1]:80".parse().unwrap());
        assert_eq!(p("[fd00::1]:8080"), "[fd00::1]:8080".parse().unwrap());
        assert_eq!(p("10.0.0.1:81"), "10.0.0.1:81".parse().unwrap());
        assert_eq!(parse_address_line("# only a comment", 80).unwrap(), None);
        assert_eq!(parse_address_line("", 80).unwrap(), None);
    }

    #[test]
    fn bad_lines_name_the_line() {
        for bad in ["example.com", "[::1", "[::1]x", "1.2.3.4:0", "1.2.3.4:99999", "::1:80x"] {
            let text = format!("127.0.0.1\n# c\n{bad}\n");
            let err = parse_address_list(&text, "a.txt", 80).unwrap_err().to_string();
            assert!(err.starts_with("a.txt:3: "), "{bad}: {err}");
        }
        assert!(parse_address_list("# nothing\n", "a.txt", 80).unwrap_err().to_string().contains("no addresses"));
    }
}
