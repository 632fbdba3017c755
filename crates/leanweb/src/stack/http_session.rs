//! HTTP/1.1 on one connection: requests parsed from the received bytes
//! (crates/leanweb/src/http.rs), answered from the `Application` and fed into the
//! connection's send buffer; keep-alive, pipelining, the slowloris and idle limits.
use std::io::Read;
use std::time::Duration;

use leantcp::{Connection, Instant, State};
use serde_json::{json, Value};

use super::events;
use super::Counters;
use crate::app::{Application, Resource};
use crate::http::{self, Method, Parse, WallClock};
use crate::log::EventLog;

const FILE_CHUNK_BYTES: usize = 64 * 1024;
/// Requests answered per connection per turn at most (fairness between connections).
const MAX_RESPONSES_PER_TURN: usize = 64;

struct Response<B> {
    head: Vec<u8>,
    head_sent: usize,
    body: Option<B>,
    remaining: u64,
    close_after: bool,
}

impl<B> Response<B> {
    fn error(head: Vec<u8>) -> Self {
        Response { head, head_sent: 0, body: None, remaining: 0, close_after: true }
    }

    fn done(&self) -> bool {
        self.head_sent == self.head.len() && self.remaining == 0
    }
}

/// The HTTP state of one connection.
pub(super) struct Exchange<B> {
    request_buf: Vec<u8>,
    response: Option<Response<B>>,
    closing: bool,
    /// Since when we wait for (the rest of) a request.
    waiting_since: Instant,
}

/// What answering a connection needs besides the connection itself.
pub(super) struct Serving<'a, A: Application> {
    pub(super) app: &'a mut A,
    /// Body bytes on their way into a send buffer: the stack's one buffer, grown once,
    /// not 64 KiB allocated and freed per call.
    pub(super) chunk: &'a mut Vec<u8>,
    /// For the `Date` of responses; none: responses carry no `Date`.
    pub(super) wall_clock: Option<WallClock>,
    pub(super) counters: &'a mut Counters,
    pub(super) log: &'a mut EventLog,
}

impl<B> Exchange<B> {
    pub(super) fn new(now: Instant) -> Self {
        Exchange { request_buf: Vec::new(), response: None, closing: false, waiting_since: now }
    }
}

impl<B: Read> Exchange<B> {
    /// Application work for the connection `id`: read requests, queue responses.
    pub(super) fn serve<A: Application<Body = B>>(
        &mut self,
        id: u64,
        conn: &mut Connection,
        ctx: &mut Serving<'_, A>,
        now: Instant,
    ) {
        for _ in 0..MAX_RESPONSES_PER_TURN {
            if self.closing {
                break;
            }
            self.fill_request_buf(conn, now);
            if self.response.is_none() && !self.start_response(id, conn, ctx, now) {
                break;
            }
            if !self.feed_response(conn, ctx.chunk, now) {
                break;
            }
            if let Some(r) = &self.response {
                if r.done() {
                    let close_after = r.close_after;
                    self.response = None;
                    self.waiting_since = now;
                    if close_after {
                        conn.close(now);
                        self.closing = true;
                    }
                    continue;
                }
            }
            break;
        }
        if !self.closing && self.response.is_none() && self.request_buf.is_empty() && conn.peer_finished() {
            conn.close(now);
            self.closing = true;
        }
    }

    /// Moves received bytes into the request buffer, never more than one maximal head (the
    /// parser answers 414/431 beyond it); the rest waits in the TCP receive buffer, so
    /// pipelined requests are flow-controlled, never cut.
    fn fill_request_buf(&mut self, conn: &mut Connection, now: Instant) {
        let room = (http::MAX_HEAD_BYTES + 1).saturating_sub(self.request_buf.len());
        let incoming = conn.recv(room);
        if !incoming.is_empty() {
            if self.request_buf.is_empty() && self.response.is_none() {
                self.waiting_since = now;
            }
            self.request_buf.extend_from_slice(&incoming);
        }
    }

    /// Parses the next request if one is complete; false if there is nothing to answer yet.
    fn start_response<A: Application<Body = B>>(
        &mut self,
        id: u64,
        conn: &Connection,
        ctx: &mut Serving<'_, A>,
        now: Instant,
    ) -> bool {
        if !matches!(conn.state(), State::Established | State::CloseWait) {
            return false;
        }
        let date = ctx.wall_clock.map(|clock| clock.date_at(now));
        let date = date.as_deref();
        let (response, log_fields) = match http::parse_request(&self.request_buf) {
            Parse::Incomplete => return false,
            Parse::Error(error) => {
                self.request_buf.clear();
                (Response::error(http::error_response(error, false, date)), json!({"status": error.status().0}))
            }
            Parse::Complete { request, consumed } => {
                self.request_buf.drain(..consumed);
                let head_only = request.method == Method::Head;
                let method = if head_only { "HEAD" } else { "GET" };
                match ctx.app.open(&request.path) {
                    Ok(Resource { body, len, content_type }) => {
                        let head = http::response_head((200, "OK"), len, content_type, request.keep_alive, date, "");
                        let (body, remaining) = if head_only { (None, 0) } else { (Some(body), len) };
                        let close_after = !request.keep_alive;
                        let fields: Value =
                            json!({"status": 200, "method": method, "path": request.path, "bytes": len});
                        (Response { head, head_sent: 0, body, remaining, close_after }, fields)
                    }
                    Err(error) => {
                        let fields = json!({"status": error.status().0, "method": method, "path": request.path});
                        (Response::error(http::error_response(error, head_only, date)), fields)
                    }
                }
            }
        };
        ctx.counters.requests += 1;
        events::log_request(ctx.log, id, log_fields, now);
        self.response = Some(response);
        true
    }

    /// Moves response bytes into the connection's send buffer; false if it made no progress.
    fn feed_response(&mut self, conn: &mut Connection, chunk: &mut Vec<u8>, now: Instant) -> bool {
        let Some(r) = self.response.as_mut() else { return false };
        let mut progressed = false;
        if r.head_sent < r.head.len() {
            let n = conn.send(&r.head[r.head_sent..]);
            r.head_sent += n;
            progressed |= n > 0;
            if r.head_sent < r.head.len() {
                return progressed;
            }
        }
        while r.remaining > 0 {
            let room = conn.send_capacity().min(FILE_CHUNK_BYTES).min(r.remaining as usize);
            if room == 0 {
                break;
            }
            if chunk.len() < room {
                chunk.resize(room, 0);
            }
            let Some(body) = r.body.as_mut() else { break };
            match body.read(&mut chunk[..room]) {
                Ok(0) | Err(_) => {
                    // The file shrank or failed under us: the promised length cannot be kept.
                    r.remaining = 0;
                    conn.abort(now);
                    return true;
                }
                Ok(n) => {
                    let taken = conn.send(&chunk[..n]);
                    debug_assert_eq!(taken, n);
                    r.remaining -= n as u64;
                    progressed = true;
                }
            }
        }
        progressed || r.done()
    }

    /// The slowloris and idle limits (and a peer gone mid-response); true if it closed.
    pub(super) fn enforce_limits(
        &mut self,
        conn: &mut Connection,
        limits: Limits,
        last_rx: Instant,
        now: Instant,
    ) -> bool {
        let waited = now.saturating_since(self.waiting_since);
        let silent = now.saturating_since(last_rx);
        let stuck_in_handshake = conn.state() == State::SynReceived && silent > limits.header_timeout;
        if self.response.is_none() && !self.closing {
            if !self.request_buf.is_empty() && waited > limits.header_timeout || stuck_in_handshake {
                conn.abort(now);
                return true;
            } else if self.request_buf.is_empty() && waited > limits.idle_timeout {
                conn.close(now);
                self.closing = true;
                return true;
            }
        } else if silent > limits.idle_timeout.saturating_mul(2) && conn.state() != State::TimeWait {
            // Peer vanished mid-response or while we close: free the state.
            conn.abort(now);
            return true;
        }
        false
    }
}

/// How long a connection may keep us waiting.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// A started request head must be complete within this (slowloris).
    pub(super) header_timeout: Duration,
    /// An idle keep-alive connection is closed after this.
    pub(super) idle_timeout: Duration,
}
