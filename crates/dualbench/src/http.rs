//! The little HTTP/1.1 we speak: a GET with a Host header, the response head parsed by
//! httparse, the body counted against Content-Length.

use std::net::{IpAddr, SocketAddr};

use crate::addresses::parse_address_line;

/// An `http://IP[:port]/path` URL; hosts are IP literals only (no DNS, by design).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub addr: SocketAddr,
    pub path: String,
}

impl Url {
    pub fn host_header(&self) -> String {
        host_header(&self.addr)
    }
}

pub fn host_header(addr: &SocketAddr) -> String {
    match addr.ip() {
        IpAddr::V6(ip) => format!("[{ip}]:{}", addr.port()),
        IpAddr::V4(ip) => format!("{ip}:{}", addr.port()),
    }
}

pub fn parse_url(text: &str) -> Result<Url, String> {
    let rest = text.trim().strip_prefix("http://").ok_or_else(|| format!("not an http:// URL: {text:?}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains('#') || authority.contains('@') {
        return Err(format!("bad host in URL {text:?}"));
    }
    let addr = parse_address_line(authority, 80)
        .map_err(|e| format!("{e} (URL hosts must be IP literals)"))?
        .ok_or_else(|| format!("no host in URL {text:?}"))?;
    check_path(path)?;
    Ok(Url { addr, path: path.to_string() })
}

pub fn check_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!("bad request path {path:?} (must start with '/', no spaces or control bytes)"));
    }
    Ok(())
}

pub fn request_bytes(host: &str, path: &str, keepalive: bool) -> Vec<u8> {
    let connection = if keepalive { "keep-alive" } else { "close" };
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: dualbench/0.1\r\nAccept: */*\r\nConnection: {connection}\r\n\r\n")
        .into_bytes()
}

#[derive(Debug, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    pub head_len: usize,
    /// None when the server sent no Content-Length (e.g. chunked): we cannot check the length.
    pub content_length: Option<u64>,
    pub server_closes: bool,
}

pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Ok(None) while the head is incomplete; Err(kind) for a malformed or oversized head.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, &'static str> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(buf) {
        Ok(httparse::Status::Partial) => {
            if buf.len() > MAX_HEAD_BYTES {
                Err("head_too_large")
            } else {
                Ok(None)
            }
        }
        Ok(httparse::Status::Complete(head_len)) => {
            let mut content_length = None;
            let mut chunked = false;
            let mut server_closes = response.version == Some(0);
            for h in response.headers.iter() {
                let value = std::str::from_utf8(h.value).map_err(|_| "bad_header")?.trim();
                if h.name.eq_ignore_ascii_case("content-length") {
                    content_length = Some(value.parse::<u64>().map_err(|_| "bad_content_length")?);
                } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = true;
                } else if h.name.eq_ignore_ascii_case("connection") {
                    server_closes = value.eq_ignore_ascii_case("close");
                }
            }
            Ok(Some(Head {
                status: response.code.unwrap_or(0),
                head_len,
                content_length: if chunked { None } else { content_length },
                server_closes,
            }))
        }
        Err(_) => Err("bad_response"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = parse_url("http://[::1]:8080/4KiB.bin").unwrap();
        assert_eq!(u.addr, "[::1]:8080".parse().unwrap());
        assert_eq!(u.path, "/4KiB.bin");
        assert_eq!(u.host_header(), "[::1]:8080");
        let u = parse_url("http://127.0.0.1").unwrap();
        assert_eq!((u.addr.port(), u.path.as_str()), (80, "/"));
        for bad in ["https://127.0.0.1/", "http://example.com/", "http:///x", "http://1.2.3.4/a b", "127.0.0.1/"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn heads() {
        let full = b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\nConnection: close\r\n\r\nxx";
        let head = parse_head(full).unwrap().unwrap();
        assert_eq!(head, Head { status: 200, head_len: full.len() - 2, content_length: Some(4096), server_closes: true });
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap(), None);
        assert_eq!(parse_head(b"SSH-2.0-x\r\n\r\n").unwrap_err(), "bad_response");
        let chunked = parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n").unwrap();
        assert_eq!(chunked.unwrap().content_length, None);
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n").unwrap_err(), "bad_content_length");
        let huge = [b"HTTP/1.1 200 OK\r\nX: ".as_slice(), &[b'a'; MAX_HEAD_BYTES]].concat();
        assert_eq!(parse_head(&huge).unwrap_err(), "head_too_large");
    }
}
