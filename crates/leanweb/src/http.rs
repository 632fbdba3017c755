//! A small HTTP/1.1 request parser and static-file resolver for GET and HEAD.
//! The request head is parsed by `httparse` (RFC 9112 §2–§5: request line, field syntax,
//! no whitespace before a field's colon, no obs-fold, no bare CR), the request target by
//! `http::Uri` (origin-form and absolute-form, RFC 9112 §3.2); this file adds the rules of
//! a server on top: `Host` (§3.2), framing (§6.3), persistence (§9.3), limits.
//! Nothing outside the root is served: `..` (also percent-encoded) is refused, and the
//! canonical path of every file (symlinks resolved) must lie under the canonical root.
//! What leanweb's HTTP does and refuses, case by case: docs/leanweb.md.
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, UNIX_EPOCH};

use leantcp::Instant;

/// Longest request line (method, target, version) accepted; longer is 414.
pub const MAX_REQUEST_LINE_BYTES: usize = 4096;
/// Largest request head (request line and headers) accepted; larger is 431.
pub const MAX_HEAD_BYTES: usize = 8192;
/// Most header field lines in one request; more is 431.
pub const MAX_HEADER_FIELDS: usize = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

/// Methods RFC 9110 §9 defines (and PATCH): known, so 405 with `Allow`; any other token is 501.
const KNOWN_METHODS: [&str; 7] = ["POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"];

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
    NotImplemented,
    VersionNotSupported,
}

impl HttpError {
    pub fn status(self) -> (u16, &'static str) {
        match self {
            HttpError::BadRequest => (400, "Bad Request"),
            HttpError::NotFound => (404, "Not Found"),
            HttpError::MethodNotAllowed => (405, "Method Not Allowed"),
            HttpError::UriTooLong => (414, "URI Too Long"),
            HttpError::HeadersTooLarge => (431, "Request Header Fields Too Large"),
            HttpError::NotImplemented => (501, "Not Implemented"),
            HttpError::VersionNotSupported => (505, "HTTP Version Not Supported"),
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

/// The limits on a head that is not complete yet: a request line with no end within
/// `MAX_REQUEST_LINE_BYTES` is 414, a head with no end within `MAX_HEAD_BYTES` is 431.
fn over_limit(buf: &[u8]) -> Option<HttpError> {
    let line_window = &buf[..buf.len().min(MAX_REQUEST_LINE_BYTES + 2)];
    if buf.len() > MAX_REQUEST_LINE_BYTES && !line_window.contains(&b'\n') {
        Some(HttpError::UriTooLong)
    } else if buf.len() >= MAX_HEAD_BYTES {
        Some(HttpError::HeadersTooLarge)
    } else {
        None
    }
}

/// What a version `httparse` refuses (it reads only HTTP/1.0 and 1.1) is.
#[derive(Debug, PartialEq, Eq)]
enum OtherVersion {
    /// `HTTP/1.y`, y > 1: treated as HTTP/1.1 (RFC 9110 §2.5); the minor digit's offset.
    LaterMinor(usize),
    /// `HTTP/x.y` with another major version: 505 (RFC 9110 §15.6.6).
    OtherMajor,
    /// Not `HTTP/digit.digit`: a malformed request line.
    Malformed,
}

fn other_version(buf: &[u8]) -> OtherVersion {
    // httparse skips empty lines before the request line (RFC 9112 §2.2); so does this
    let start = buf.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(buf.len());
    let line_end = buf[start..].iter().position(|&b| b == b'\n').map_or(buf.len(), |i| start + i);
    let end = if line_end > start && buf[line_end - 1] == b'\r' { line_end - 1 } else { line_end };
    // method SP target SP version, single spaces (as httparse reads it)
    let mut parts = buf[start..end].split(|&b| b == b' ');
    let (Some(_), Some(_), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return OtherVersion::Malformed;
    };
    match version {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor] if minor.is_ascii_digit() && *minor > b'1' => {
            OtherVersion::LaterMinor(end - 1)
        }
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() && *major != b'1' =>
        {
            OtherVersion::OtherMajor
        }
        _ => OtherVersion::Malformed,
    }
}

/// The fields of a request head that leanweb acts on.
#[derive(Default)]
struct Fields {
    hosts: usize,
    host_valid: bool,
    close: bool,
    keep_alive: bool,
    /// A body announced (Transfer-Encoding, or a Content-Length other than 0): leanweb
    /// serves GET and HEAD, which carry none, and reads no request body.
    body: bool,
    /// A Content-Length that is not a number: the framing is invalid, whatever the method
    /// (RFC 9112 §6.3: 400).
    bad_length: bool,
}

fn read_fields(headers: &[httparse::Header<'_>]) -> Fields {
    let mut fields = Fields::default();
    for header in headers {
        let value = std::str::from_utf8(header.value).map(str::trim);
        let name = header.name;
        if name.eq_ignore_ascii_case("host") {
            fields.hosts += 1;
            fields.host_valid = value.is_ok_and(valid_host);
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.unwrap_or("").split(',').map(str::trim) {
                fields.close |= token.eq_ignore_ascii_case("close");
                fields.keep_alive |= token.eq_ignore_ascii_case("keep-alive");
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            fields.body = true;
        } else if name.eq_ignore_ascii_case("content-length") {
            match value {
                Ok(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                    fields.body |= digits != "0";
                }
                _ => fields.bad_length = true,
            }
        }
    }
    fields
}

/// `Host = uri-host [ ":" port ]` (RFC 9110 §7.2): an authority without userinfo whose
/// port, if any, is digits; empty is allowed (a target without an authority).
fn valid_host(value: &str) -> bool {
    if value.is_empty() {
        return true;
    }
    let Ok(authority) = http::uri::Authority::from_str(value) else { return false };
    let Some(port) = authority.as_str().strip_prefix(authority.host()) else { return false };
    port.is_empty() || port.strip_prefix(':').is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
}

pub fn parse_request(buf: &[u8]) -> Parse {
    parse_head(buf, true)
}

/// `later_minor_as_http11`: read `HTTP/1.y` (y > 1) as HTTP/1.1, once.
fn parse_head(buf: &[u8], later_minor_as_http11: bool) -> Parse {
    if let Some(error) = over_limit(buf).filter(|e| *e == HttpError::UriTooLong) {
        return Parse::Error(error); // also when the rest of the head is already here
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADER_FIELDS];
    let mut head = httparse::Request::new(&mut headers);
    let consumed = match head.parse(&buf[..buf.len().min(MAX_HEAD_BYTES)]) {
        Ok(httparse::Status::Complete(consumed)) => consumed,
        Ok(httparse::Status::Partial) => return over_limit(buf).map_or(Parse::Incomplete, Parse::Error),
        Err(httparse::Error::TooManyHeaders) => return Parse::Error(HttpError::HeadersTooLarge),
        Err(httparse::Error::Version) => {
            return match other_version(buf) {
                // the same head read as HTTP/1.1 (same length, so `consumed` holds)
                OtherVersion::LaterMinor(at) if later_minor_as_http11 => {
                    let mut as_http11 = buf[..buf.len().min(MAX_HEAD_BYTES)].to_vec();
                    as_http11[at] = b'1';
                    parse_head(&as_http11, false)
                }
                OtherVersion::LaterMinor(_) => Parse::Error(HttpError::BadRequest),
                OtherVersion::OtherMajor => Parse::Error(HttpError::VersionNotSupported),
                OtherVersion::Malformed => Parse::Error(HttpError::BadRequest),
            };
        }
        Err(_) => return Parse::Error(HttpError::BadRequest),
    };
    let (Some(method), Some(target), Some(minor)) = (head.method, head.path, head.version) else {
        return Parse::Error(HttpError::BadRequest);
    };
    let fields = read_fields(head.headers);
    // RFC 9112 §3.2: 400 for an HTTP/1.1 request without Host, and for any request with
    // more than one Host field line or an invalid Host value.
    let host_ok = match fields.hosts {
        0 => minor == 0,
        1 => fields.host_valid,
        _ => false,
    };
    if !host_ok || fields.bad_length {
        return Parse::Error(HttpError::BadRequest);
    }
    // Another method is refused whether or not it carries a body (RFC 9110 §15.5.6 and
    // §15.6.2); the body stays unread, as the connection closes after every error.
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        known if KNOWN_METHODS.contains(&known) => return Parse::Error(HttpError::MethodNotAllowed),
        _ => return Parse::Error(HttpError::NotImplemented),
    };
    if fields.body {
        // GET/HEAD with a body (RFC 9112 §6.3): refused rather than guess where the next
        // request starts
        return Parse::Error(HttpError::BadRequest);
    }
    let path = match target_path(target).and_then(decode_path) {
        Ok(path) => path,
        Err(e) => return Parse::Error(e),
    };
    // RFC 9112 §9.3: HTTP/1.1 persists unless "close"; HTTP/1.0 only with "keep-alive".
    let keep_alive = !fields.close && (minor == 1 || fields.keep_alive);
    Parse::Complete { request: Request { method, path, keep_alive }, consumed }
}

/// The path of an origin-form (`/f?q`) or absolute-form (`http://host/f`, RFC 9112
/// §3.2.2: a server MUST accept it) target, still percent-encoded, without the query.
fn target_path(target: &str) -> Result<&str, HttpError> {
    if target.starts_with('/') {
        // `http::Uri` would take `//host/f` for a path too; the query goes either way
        return Ok(target.split(['?', '#']).next().unwrap_or(""));
    }
    let uri = http::Uri::from_str(target).map_err(|_| HttpError::BadRequest)?;
    let authority = uri.authority().ok_or(HttpError::BadRequest)?;
    // userinfo in an http(s) URI is an error (RFC 9110 §4.2.4)
    if !matches!(uri.scheme_str(), Some("http" | "https")) || authority.as_str().contains('@') {
        return Err(HttpError::BadRequest);
    }
    // `scheme "://" authority` then the path: its bytes inside `target`, so the result
    // borrows the request buffer
    let scheme_len = uri.scheme_str().map_or(0, str::len);
    let rest = target.get(scheme_len + 3 + authority.as_str().len()..).ok_or(HttpError::BadRequest)?;
    let path = rest.split(['?', '#']).next().unwrap_or("");
    Ok(if path.is_empty() { "/" } else { path })
}

/// Percent-decodes a target's path and refuses `..` segments.
fn decode_path(raw: &str) -> Result<String, HttpError> {
    if !raw.starts_with('/') {
        return Err(HttpError::BadRequest);
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex =
                bytes.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit)).ok_or(HttpError::BadRequest)?;
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

/// The wall clock as data: the UNIX time at one stack instant, handed in by the binary
/// with its `now` (crates/leanweb/src/main.rs), so the sans-IO stack never reads the
/// system clock. A stack without one sends no `Date`: RFC 9110 §6.6.1 forbids a server
/// without a clock to make one up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallClock {
    at: Instant,
    unix: Duration,
}

impl WallClock {
    /// `unix` (time since the UNIX epoch) was the wall-clock time at stack time `at`.
    pub fn new(at: Instant, unix: Duration) -> Self {
        WallClock { at, unix }
    }

    /// The `Date` field value at stack time `now` (IMF-fixdate, RFC 9110 §5.6.7).
    pub fn date_at(&self, now: Instant) -> String {
        httpdate::fmt_http_date(UNIX_EPOCH + self.unix + now.saturating_since(self.at))
    }
}

/// The head of a response; `date` is the `Date` field value, if the server has a clock.
pub fn response_head(
    status: (u16, &str),
    content_length: u64,
    content_type: &str,
    keep_alive: bool,
    date: Option<&str>,
    extra: &str,
) -> Vec<u8> {
    let date = date.map(|d| format!("Date: {d}\r\n")).unwrap_or_default();
    format!(
        "HTTP/1.1 {} {}\r\n{}Server: leanweb\r\nContent-Length: {}\r\nContent-Type: {}\r\nConnection: {}\r\n{}\r\n",
        status.0,
        status.1,
        date,
        content_length,
        content_type,
        if keep_alive { "keep-alive" } else { "close" },
        extra
    )
    .into_bytes()
}

/// A complete error response (small text body) for `error`; the connection closes after it.
pub fn error_response(error: HttpError, head_only: bool, date: Option<&str>) -> Vec<u8> {
    let status = error.status();
    let body = format!("{} {}\n", status.0, status.1);
    let extra = if error == HttpError::MethodNotAllowed { "Allow: GET, HEAD\r\n" } else { "" };
    let mut out = response_head(status, body.len() as u64, "text/plain", false, date, extra);
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

    fn path_of(text: &str) -> String {
        match req(text) {
            Parse::Complete { request, .. } => request.path,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn parses_get_and_head_with_keep_alive_rules() {
        let Parse::Complete { request, consumed } = req("GET /a%20b.bin?x=1 HTTP/1.1\r\nHost: x\r\n\r\nGET") else {
            panic!()
        };
        assert_eq!(request, Request { method: Method::Get, path: "/a b.bin".into(), keep_alive: true });
        assert_eq!(consumed, "GET /a%20b.bin?x=1 HTTP/1.1\r\nHost: x\r\n\r\n".len());
        let Parse::Complete { request, .. } = req("HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") else {
            panic!()
        };
        assert!(request.method == Method::Head && !request.keep_alive);
        let Parse::Complete { request, .. } = req("GET / HTTP/1.0\r\n\r\n") else { panic!() };
        assert!(!request.keep_alive);
        let Parse::Complete { request, .. } = req("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n") else { panic!() };
        assert!(request.keep_alive, "HTTP/1.0 persists when asked");
        let Parse::Complete { request, .. } = req("GET / HTTP/1.1\r\nHost: x\r\nConnection: close, keep-alive\r\n\r\n")
        else {
            panic!()
        };
        assert!(!request.keep_alive, "close wins, wherever it stands");
        assert_eq!(req("GET / HTTP/1.1\r\nHost: x\r\n"), Parse::Incomplete);
        // RFC 9112 §2.2: empty lines before the request line are skipped
        assert_eq!(path_of("\r\nGET /e HTTP/1.1\r\nHost: x\r\n\r\n"), "/e");
    }

    #[test]
    fn http11_without_host_or_with_two_hosts_is_400() {
        // RFC 9112 §3.2
        assert_eq!(req("GET / HTTP/1.1\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(
            req("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n"),
            Parse::Error(HttpError::BadRequest),
            "two Hosts in any version"
        );
        for bad in ["a b", "user@host", "host:80x", "[fd09::1", "h:1:2", "h/x"] {
            assert_eq!(
                req(&format!("GET / HTTP/1.1\r\nHost: {bad}\r\n\r\n")),
                Parse::Error(HttpError::BadRequest),
                "{bad}"
            );
        }
        for good in ["x", "10.9.0.1:80", "[fd09::1]", "[fd09::1]:8080", "example.com:", ""] {
            assert_eq!(path_of(&format!("GET /g HTTP/1.1\r\nHost: {good}\r\n\r\n")), "/g", "{good}");
        }
        assert_eq!(path_of("GET /old HTTP/1.0\r\n\r\n"), "/old", "HTTP/1.0 needs no Host");
    }

    #[test]
    fn absolute_form_targets_serve_their_path() {
        // RFC 9112 §3.2.2: a server MUST accept the absolute form
        assert_eq!(path_of("GET http://host/f HTTP/1.1\r\nHost: host\r\n\r\n"), "/f");
        assert_eq!(path_of("GET http://f.example:8080/f%20g?x=/y HTTP/1.1\r\nHost: other\r\n\r\n"), "/f g");
        assert_eq!(path_of("GET HTTP://[fd09::1]/a/b HTTP/1.1\r\nHost: [fd09::1]\r\n\r\n"), "/a/b");
        assert_eq!(path_of("HEAD https://h HTTP/1.1\r\nHost: h\r\n\r\n"), "/");
        assert_eq!(path_of("GET http://h/x HTTP/1.0\r\n\r\n"), "/x");
        for bad in ["ftp://h/f", "http://u@h/f", "http:/f", "http://h/../etc/passwd", "*", "h:80", "f"] {
            assert_eq!(
                req(&format!("GET {bad} HTTP/1.1\r\nHost: h\r\n\r\n")),
                Parse::Error(HttpError::BadRequest),
                "{bad}"
            );
        }
        assert_eq!(
            req("GET http://h/f HTTP/1.1\r\n\r\n"),
            Parse::Error(HttpError::BadRequest),
            "Host is still required"
        );
    }

    #[test]
    fn field_syntax_and_framing_errors_are_400() {
        for bad in [
            "GET / HTTP/1.1\r\nHost : x\r\n\r\n", // whitespace before the colon (RFC 9112 §5.1)
            "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", // obs-fold (§5.2)
            "GET / HTTP/1.1\r\n Host: x\r\n\r\n", // whitespace before the first field (§2.2)
            "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", // bare CR (§2.2)
            "GET / HTTP/1.1\r\nHost: x\r\nBroken\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", // §6.3
            "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
            "GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /x\r\n\r\n",
        ] {
            assert_eq!(req(bad), Parse::Error(HttpError::BadRequest), "{bad:?}");
        }
        assert_eq!(path_of("GET /z HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"), "/z");
    }

    #[test]
    fn bad_requests_get_their_status() {
        assert_eq!(req("POST / HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Error(HttpError::MethodNotAllowed));
        // with a body too (RFC 9110 §15.5.6), also one leanweb could not frame; not a GET's 400
        for body in ["Content-Length: 5\r\n\r\nhello", "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"] {
            assert_eq!(
                req(&format!("POST /f HTTP/1.1\r\nHost: x\r\n{body}")),
                Parse::Error(HttpError::MethodNotAllowed)
            );
            assert_eq!(
                req(&format!("PUT /f HTTP/1.1\r\nHost: x\r\n{body}")),
                Parse::Error(HttpError::MethodNotAllowed)
            );
            assert_eq!(req(&format!("BREW /f HTTP/1.1\r\nHost: x\r\n{body}")), Parse::Error(HttpError::NotImplemented));
        }
        // what is 400 for every method: an invalid Content-Length (RFC 9112 §6.3), the Host rules (§3.2)
        assert_eq!(
            req("POST /f HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"),
            Parse::Error(HttpError::BadRequest)
        );
        assert_eq!(req("POST /f HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("BREW /f HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(
            req("get / HTTP/1.1\r\nHost: x\r\n\r\n"),
            Parse::Error(HttpError::NotImplemented),
            "methods are case-sensitive"
        );
        assert_eq!(req("BREW / HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Error(HttpError::NotImplemented));
        assert_eq!(req("GET / HTTP/2.0\r\n\r\n"), Parse::Error(HttpError::VersionNotSupported));
        assert_eq!(req("GET / HTTP/1.x\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET / HTTP/1.1x\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET / HTTP/12.0\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        // RFC 9110 §2.5: a later minor version is served as the highest one known
        let Parse::Complete { request, consumed } = req("\r\nGET /v HTTP/1.2\r\nHost: x\r\n\r\n") else { panic!() };
        assert_eq!((request.path.as_str(), request.keep_alive, consumed), ("/v", true, 30));
        assert_eq!(req("GET /v HTTP/1.9\r\n\r\n"), Parse::Error(HttpError::BadRequest), "as 1.1, so Host is required");
        assert_eq!(req("GET /v HTTP/1.2\r\nHost: x\r\n"), Parse::Incomplete);
        // found by the fuzzer: the version httparse refuses is not the line's last word
        assert_eq!(req("GET / HTTP/1.2 HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET / HTTP/1.1x HTTP/1.2\r\nHost: x\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET /../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET /%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET /a/%2E%2E/%2e%2e/x HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        assert_eq!(req("GET /%+5 HTTP/1.1\r\nHost: x\r\n\r\n"), Parse::Error(HttpError::BadRequest));
        let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(MAX_REQUEST_LINE_BYTES));
        assert_eq!(parse_request(long.as_bytes()), Parse::Error(HttpError::UriTooLong));
        assert_eq!(parse_request(&long.as_bytes()[..MAX_REQUEST_LINE_BYTES + 1]), Parse::Error(HttpError::UriTooLong));
        let many = format!("GET / HTTP/1.1\r\n{}", "X-A: b\r\n".repeat(2000));
        assert_eq!(parse_request(many.as_bytes()), Parse::Error(HttpError::HeadersTooLarge));
        let fields = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", "X-A: b\r\n".repeat(MAX_HEADER_FIELDS));
        assert_eq!(parse_request(fields.as_bytes()), Parse::Error(HttpError::HeadersTooLarge));
    }

    #[test]
    fn date_is_imf_fixdate_from_the_given_wall_clock() {
        // RFC 9110 §5.6.7; 1_700_000_000 s after the epoch was a Tuesday
        let clock = WallClock::new(Instant::from_millis(5_000), Duration::from_secs(1_700_000_000));
        assert_eq!(clock.date_at(Instant::from_millis(5_000)), "Tue, 14 Nov 2023 22:13:20 GMT");
        assert_eq!(clock.date_at(Instant::from_millis(66_999)), "Tue, 14 Nov 2023 22:14:21 GMT");
        assert_eq!(clock.date_at(Instant::ZERO), "Tue, 14 Nov 2023 22:13:20 GMT", "no time before the reading");
        let head = String::from_utf8(error_response(HttpError::NotFound, false, Some("Tue, 14 Nov 2023 22:13:20 GMT")))
            .unwrap();
        assert!(head.starts_with("HTTP/1.1 404 Not Found\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\n"), "{head}");
        let head = String::from_utf8(response_head((200, "OK"), 1, "text/plain", true, None, "")).unwrap();
        assert!(!head.contains("Date:"), "no clock, no Date (RFC 9110 §6.6.1)");
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
