//! One fetch: connect (timed), send the GET, read the head and exactly Content-Length body
//! bytes, all under one deadline, and classify how the connection closed (ANMA's NORMAL,
//! RESET, TIMEOUT, plus refused and other).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{timeout_at, Instant};

use crate::http::parse_head;

const READ_CHUNK: usize = 16 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The whole body (Content-Length bytes) of a 200 response arrived.
    Normal,
    /// The server reset the connection (RST: ECONNRESET, ECONNABORTED or EPIPE).
    Reset,
    /// The deadline passed; `connecting` when the handshake had not completed.
    Timeout { connecting: bool },
    /// The handshake was refused (RST to our SYN).
    Refused,
    /// Anything else, by a short kind name (status_404, short_body, emfile, ...).
    Other(String),
}

#[derive(Debug)]
pub struct FetchResult {
    pub outcome: Outcome,
    /// SYN sent (connect called) to connected; None when no new connection completed.
    pub connect: Option<Duration>,
    /// Connected (or reused connection taken) to the last body byte (NORMAL only).
    pub continuation: Option<Duration>,
    pub bytes_received: u64,
    pub body_bytes: u64,
    /// A connection the server keeps open, handed back for keep-alive reuse.
    pub reusable: Option<TcpStream>,
}

struct Exchange {
    bytes_received: u64,
    body_bytes: u64,
    status: u16,
    complete: bool,
    server_closes: bool,
}

#[derive(Debug)]
enum Failure {
    Io(io::Error),
    Protocol(&'static str),
    /// A reused keep-alive connection closed before any response byte: retry fresh.
    StaleReuse,
}

fn classify_io(err: &io::Error) -> Outcome {
    use io::ErrorKind::*;
    match err.kind() {
        ConnectionReset | ConnectionAborted | BrokenPipe => Outcome::Reset,
        ConnectionRefused => Outcome::Refused,
        _ => match err.raw_os_error() {
            Some(24) => Outcome::Other("emfile".into()), // EMFILE: open-file limit reached
            Some(99) => Outcome::Other("no_local_port".into()), // EADDRNOTAVAIL
            Some(101) | Some(113) => Outcome::Other("unreachable".into()),
            _ => Outcome::Other(format!("io_{:?}", err.kind()).to_lowercase()),
        },
    }
}

/// Fetch once. `reuse` is an open keep-alive connection to the same address, if any.
/// `buf` is the caller's scratch buffer (reused across fetches; its content is irrelevant).
pub async fn fetch(
    addr: SocketAddr,
    request: &[u8],
    deadline: Instant,
    keepalive: bool,
    reuse: Option<TcpStream>,
    buf: &mut Vec<u8>,
) -> FetchResult {
    let mut result = FetchResult {
        outcome: Outcome::Normal,
        connect: None,
        continuation: None,
        bytes_received: 0,
        body_bytes: 0,
        reusable: None,
    };
    let mut reuse = reuse;
    loop {
        let reused = reuse.is_some();
        let mut stream = match reuse.take() {
            Some(s) => s,
            None => {
                // the socket is made before the clock starts: establishment is connect() -> connected
                let socket = match if addr.is_ipv6() { TcpSocket::new_v6() } else { TcpSocket::new_v4() } {
                    Ok(s) => s,
                    Err(e) => {
                        result.outcome = match classify_io(&e) {
                            Outcome::Other(kind) => Outcome::Other(format!("connect_{kind}")),
                            o => o,
                        };
                        return result;
                    }
                };
                let t0 = Instant::now();
                match timeout_at(deadline, socket.connect(addr)).await {
                    Err(_) => {
                        result.outcome = Outcome::Timeout { connecting: true };
                        return result;
                    }
                    Ok(Err(e)) => {
                        result.outcome = match classify_io(&e) {
                            Outcome::Other(kind) => Outcome::Other(format!("connect_{kind}")),
                            o => o,
                        };
                        return result;
                    }
                    Ok(Ok(s)) => {
                        result.connect = Some(t0.elapsed());
                        let _ = s.set_nodelay(true); // the request goes out in one segment anyway
                        s
                    }
                }
            }
        };
        let connected = Instant::now();
        match timeout_at(deadline, exchange(&mut stream, request, buf, reused)).await {
            Err(_) => {
                result.outcome = Outcome::Timeout { connecting: false };
                return result;
            }
            Ok(Err(Failure::StaleReuse)) => continue, // the server closed an idle connection
            Ok(Err(Failure::Io(e))) => {
                result.outcome = classify_io(&e);
                return result;
            }
            Ok(Err(Failure::Protocol(kind))) => {
                result.outcome = Outcome::Other(kind.into());
                return result;
            }
            Ok(Ok(ex)) => {
                result.bytes_received = ex.bytes_received;
                result.body_bytes = ex.body_bytes;
                if ex.status != 200 {
                    result.outcome = Outcome::Other(format!("status_{}", ex.status));
                } else if !ex.complete {
                    result.outcome = Outcome::Other("short_body".into());
                } else {
                    result.continuation = Some(connected.elapsed());
                    if keepalive && !ex.server_closes {
                        result.reusable = Some(stream);
                    }
                }
                return result;
            }
        }
    }
}

async fn exchange(stream: &mut TcpStream, request: &[u8], buf: &mut Vec<u8>, reused: bool) -> Result<Exchange, Failure> {
    if let Err(e) = stream.write_all(request).await {
        return Err(if reused { Failure::StaleReuse } else { Failure::Io(e) });
    }
    // read straight into the caller's buffer (no copy): the head, then the body in
    // buffer-sized pieces that are counted and dropped
    buf.clear();
    if buf.capacity() < READ_CHUNK {
        buf.reserve(READ_CHUNK);
    }
    let head = loop {
        if buf.len() == buf.capacity() {
            buf.reserve(READ_CHUNK);
        }
        let n = match stream.read_buf(buf).await {
            Ok(n) => n,
            Err(e) if reused && buf.is_empty() && e.kind() == io::ErrorKind::ConnectionReset => {
                return Err(Failure::StaleReuse)
            }
            Err(e) => return Err(Failure::Io(e)),
        };
        if n == 0 {
            return Err(if reused && buf.is_empty() {
                Failure::StaleReuse
            } else if buf.is_empty() {
                Failure::Protocol("closed_without_response")
            } else {
                Failure::Protocol("short_head")
            });
        }
        if let Some(head) = parse_head(buf).map_err(Failure::Protocol)? {
            break head;
        }
    };
    let mut received = buf.len() as u64;
    if head.status != 200 {
        return Ok(Exchange { bytes_received: received, body_bytes: 0, status: head.status, complete: false,
                             server_closes: true });
    }
    let Some(length) = head.content_length else {
        return Err(Failure::Protocol("no_content_length"));
    };
    let mut body = (buf.len() - head.head_len) as u64;
    while body < length {
        buf.clear();
        let n = stream.read_buf(buf).await.map_err(Failure::Io)?;
        if n == 0 {
            break;
        }
        received += n as u64;
        body += n as u64;
    }
    Ok(Exchange {
        bytes_received: received,
        body_bytes: body.min(length),
        status: head.status,
        complete: body == length,
        // extra bytes past the body would desynchronise a reused connection
        server_closes: head.server_closes || body != length,
    })
}
