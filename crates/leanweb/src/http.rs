//! A small HTTP/1.1 request parser and static-file resolver for GET and HEAD.
//! Nothing outside the root is served: `..` (also percent-encoded) is refused, and the
//! canonical path of every file (symlinks resolved) must lie under the canonical root.
use std::path::{Path, PathBuf};

/// Longest request line (method, target, version) accepted; longer is 414.
pub const MAX_REQUEST_LINE_BYTES: usize = 4096;
/// Largest request head (request line and headers) accepted; larger is 431.
pub const MAX_HEAD_BYTES: usize = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// Decoded path, always starting with '/'.
    pub path: String,
    pub keep_alive: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpError {
    BadRequest,
    NotFound,
    MethodNotAllowed,
    UriTooLong,
    HeadersTooLarge,
}

impl HttpError {
    pub fn status(self) -> (u16, &'static str) {
        match self {
            HttpError::BadRequest => (400, "Bad Request"),
            HttpError::NotFound => (404, "Not Found"),
            HttpError::MethodNotAllowed => (405, "Method Not Allowed"),
            HttpError::UriTooLong => (414, "URI Too Long"),
            HttpError::HeadersTooLarge => (431, "Request Header Fields Too Large"),
        }
    }
}

/// Outcome of looking at the bytes received so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Parse {
    /// Need more bytes.
    Incomplete,
    /// A full request; `consumed` bytes of the buffer belong to it.
    Complete { request: Request, consumed: usize },
    /// The request is bad; answer with this error and close.
    Error(HttpError),
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

pub fn parse_request(buf: &[u8]) -> Parse {
    let line_end = find(&buf[..buf.len().min(MAX_REQUEST_LINE_BYTES + 2)], b"\r\n");
    let Some(line_end) = line_end else {
        return if buf.len() > MAX_REQUEST_LINE_BYTES { Parse::Error(HttpError::UriTooLong) } else { Parse::Incomplete };
    };
    let head_end = match find(&buf[..buf.len().min(MAX_HEAD_BYTES)], b"\r\n\r\n") {
        Some(pos) => pos,
        None if buf.len() >= MAX_HEAD_BYTES => return Parse::Error(HttpError::HeadersTooLarge),
        None => return Parse::Incomplete,
    };
    let Ok(line) = std::str::from_utf8(&buf[..line_end]) else { return Parse::Error(HttpError::BadRequest) };
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Parse::Error(HttpError::BadRequest);
    };
    let mut keep_alive = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Parse::Error(HttpError::BadRequest),
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Parse::Error(HttpError::BadRequest);
    }
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => return Parse::Error(HttpError::MethodNotAllowed),
    };
    let headers = if head_end > line_end { &buf[line_end + 2..head_end] } else { &[][..] };
    for raw in headers.split(|&b| b == b'\n') {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.is_empty() {
            continue;
        }
        let Ok(header) = std::str::from_utf8(raw) else { return Parse::Error(HttpError::BadRequest) };
        let Some((name, value)) = header.split_once(':') else { return Parse::Error(HttpError::BadRequest) };
        if name.is_empty() || name.contains(' ') {
            return Parse::Error(HttpError::BadRequest);
        }
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || (name.eq_ignore_ascii_case("content-length") && value != "0")
        {
            // GET/HEAD with a body: refuse rather than guess the framing.
            return Parse::Error(HttpError::BadRequest);
        }
    }
    let path = match decode_target(target) {
        Ok(path) => path,
        Err(e) => return Parse::Error(e),
    };
    Parse::Complete { request: Request { method, path, keep_alive }, consumed: head_end + 4 }
}

/// Percent-decodes the path of an origin-form target and refuses `..` segments.
fn decode_target(target: &str) -> Result<String, HttpError> {
    let raw = target.split(['?', '#']).next().unwrap_or("");
    if !raw.starts_with('/') {
        return Err(HttpError::BadRequest);
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(HttpError::BadRequest)?;
            let text = std::str::from_utf8(hex).map_err(|_| HttpError::BadRequest)?;
            out.push(u8::from_str_radix(text, 16).map_err(|_| HttpError::BadRequest)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let path = String::from_utf8(out).map_err(|_| HttpError::BadRequest)?;
    if path.contains('\0') || path.contains('\\') || path.split('/').any(|seg| seg == "..") {
        return Err(HttpError::BadRequest);
    }
    Ok(path)
}

/// Resolves a decoded request path to a regular file under `root` (already canonical).
pub fn resolve(root: &Path, path: &str) -> Result<PathBuf, HttpError> {
    let mut candidate = root.to_path_buf();
    for segment in path.split('/').filter(|s| !s.is_empty() && *s != ".") {
        candidate.push(segment);
    }
    let mut real = candidate.canonicalize().map_err(|_| HttpError::NotFound)?;
    if real.is_dir() {
        real = real.join("index.html").canonicalize().map_err(|_| HttpError::NotFound)?;
    }
    if !real.starts_with(root) || !real.is_file() {
        return Err(HttpError::NotFound);
    }
    Ok(real)
}

pub fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" | "htm" => "text/html",
        "txt" => "text/plain",
        "css" => "text/css",
        "js" => "application/javascript",
        "json" => "application/json",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        _ => "application/octet-stream",
    }
}

pub fn response_head(status: (u16, &str), content_length: u64, content_type: &str, keep_alive: bool, extra: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {} {}\r\nServer: leanweb\r\nContent-Length: {}\r\nContent-Type: {}\r\nConnection: {}\r\n{}\r\n",
        status.0,
        status.1,
        content_length,
        content_type,
        if keep_alive { "keep-alive" } else { "close" },
        extra
    )
    .into_bytes()
}

/// A complete error response (small text body) for `error`.
pub fn error_response(error: HttpError, head_only: bool) -> Vec<u8> {
    let status = error.status();
    let body = format!("{} {}\n", status.0, status.1);
    let extra = if error == HttpError::MethodNotAllowed { "Allow: GET, HEAD\r\n" } else { "" };
    let mut out = response_head(status, body.len() as u64, "text/plain", false, extra);
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(text: &str) -> Parse {
        parse_request(text.as_bytes())
    }

    #[test]
    fn parses_get_and_head_with_keep_alive_rules() {
        let Parse::Complete { request, consumed } = req("GET /a%20b.bin?x=1 HTTP/1.1\r\nHost: x\r\n\r\nGET") else { panic!() };
        assert_eq!(request, Request { method: Method::Get, path: "/a b.bin".into(), keep_alive: true });
        assert_eq!(consumed, "GET /a%20b.bin?x=1 HTTP/1.1\r\nHost: x\r\n\r\n".len());
        let Parse::Complete { request, .. } = req("HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n") else { panic!() };
        assert!(request.method == Method::Head && !request.keep_alive);
        let Parse::Complete { request, .. } = req("GET / HTTP/1.0\r\n\r\n") else { panic!() };
        assert!(!request.keep_alive);
        assert_eq!(req("GET / HTTP/1.1\r\nHost: x\r\n"), Parse::Incomplete);
    }

    #[test]
    fn bad_requests_get_their_status() {
        assert_eq!(req("POST / HTTP/1.1\r\n\r\n"), Parse::Error(HttpError::MethodNotAllowed));
        assert_eq!(req("GET / HTTP/2.0\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET /x\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET /../etc/passwd HTTP/1.1\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET /%2e%2e/etc/passwd HTTP/1.1\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET /a/%2E%2E/%2e%2e/x HTTP/1.1\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET /%zz HTTP/1.1\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET / HTTP/1.1\r\nBroken\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_REQUEST_LINE_BYTES));
        assert_eq!(parse_request(long.as_bytes()), Parse::Error(HttpError::UriTooLong));
        let many = format!("GET / HTTP/1.1\r\n{}", "X-A: b\r\n".repeat(2000));
        assert_eq!(parse_request(many.as_bytes()), Parse::Error(HttpError::HeadersTooLarge));
    }

    #[test]
    fn resolve_stays_inside_root() {
        let base = std::env::temp_dir().join(format!("leanweb-http-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("f.bin"), b"x").unwrap();
        std::fs::write(root.join("sub/index.html"), b"i").unwrap();
        std::fs::write(base.join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), root.join("link")).unwrap();
        let root = root.canonicalize().unwrap();
        assert!(resolve(&root, "/f.bin").is_ok());
        assert!(resolve(&root, "/sub/").unwrap().ends_with("sub/index.html"));
        assert_eq!(resolve(&root, "/link"), Err(HttpError::NotFound), "symlink out of root");
        assert_eq!(resolve(&root, "/missing"), Err(HttpError::NotFound));
        assert_eq!(resolve(&root, "/"), Err(HttpError::NotFound), "no index.html at top");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
