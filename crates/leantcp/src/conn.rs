//! One TCP connection as a sans-IO state machine (RFC 9293), with the studies' bare
//! behaviour by default: no congestion control, no SACK, no fast retransmit, go-back-N
//! after a timeout, immediate ACKs, out-of-order segments dropped.
use core::time::Duration;
use std::collections::VecDeque;
use std::net::SocketAddr;

use crate::cc::{CcKind, CongestionControl};
use crate::recovery::{LossRecovery, RecoveryAction, RecoveryKind};
use crate::rto::{RtoConfig, RtoEstimator, RttSampler};
use crate::segment::Segment;
use crate::seq::Seq;
use crate::time::Instant;

/// Events queued for the owner (the JSON log of leanweb is built from these).
const MAX_QUEUED_EVENTS: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    SynSent,
    SynReceived,
    Established,
    FinWait1,
    FinWait2,
    CloseWait,
    Closing,
    LastAck,
    TimeWait,
    Closed,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::SynSent => "SYN-SENT",
            State::SynReceived => "SYN-RECEIVED",
            State::Established => "ESTABLISHED",
            State::FinWait1 => "FIN-WAIT-1",
            State::FinWait2 => "FIN-WAIT-2",
            State::CloseWait => "CLOSE-WAIT",
            State::Closing => "CLOSING",
            State::LastAck => "LAST-ACK",
            State::TimeWait => "TIME-WAIT",
            State::Closed => "CLOSED",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpConfig {
    /// Link MTU; the MSS we advertise is MTU minus IP and TCP headers.
    pub mtu: usize,
    pub send_buffer_bytes: usize,
    pub recv_buffer_bytes: usize,
    /// Our window-scale shift (RFC 7323), used when the peer offers scaling too.
    pub window_scale: u8,
    pub rto: RtoConfig,
    pub cc: CcKind,
    pub recovery: RecoveryKind,
    pub time_wait: Duration,
    /// Consecutive retransmission timeouts after which the connection is aborted.
    pub max_timeouts: u32,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mtu: 1500,
            send_buffer_bytes: 256 * 1024,
            recv_buffer_bytes: 64 * 1024,
            window_scale: 2,
            rto: RtoConfig::default(),
            cc: CcKind::None,
            recovery: RecoveryKind::GoBackN,
            time_wait: Duration::from_secs(60),
            max_timeouts: 12,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    StateChanged { from: State, to: State },
    RttSample { rtt_us: u64, srtt_us: u64, rttvar_us: u64, rto_us: u64 },
    Timeout { rto_us: u64, backoff_shift: u32, outstanding_bytes: usize },
    Retransmit { seq: u32, len: usize, go_back_n: bool },
    ZeroWindowProbe { seq: u32 },
    ResetReceived,
    Aborted { reason: &'static str },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    pub segments_sent: u64,
    pub segments_received: u64,
    pub bytes_sent: u64,
    pub bytes_retransmitted: u64,
    pub retransmissions: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub timeouts: u64,
    pub rtt_samples: u64,
    pub duplicate_acks: u64,
    pub events_dropped: u64,
}

#[derive(Debug)]
pub struct Connection {
    local: SocketAddr,
    remote: SocketAddr,
    state: State,
    config: TcpConfig,
    // Send sequence space.
    iss: Seq,
    snd_una: Seq,
    snd_nxt: Seq,
    snd_max: Seq,
    snd_wnd: usize,
    snd_wl1: Seq,
    snd_wl2: Seq,
    snd_wscale: u8,
    send_mss: usize,
    send_buf: VecDeque<u8>,
    buf_seq: Seq,
    fin_queued: bool,
    // Receive sequence space.
    irs: Seq,
    rcv_nxt: Seq,
    rcv_wscale: u8,
    recv_buf: VecDeque<u8>,
    fin_received: bool,
    last_advertised_window: usize,
    // Timers and loss recovery.
    rto: RtoEstimator,
    sampler: RttSampler,
    cc: Box<dyn CongestionControl>,
    recovery: Box<dyn LossRecovery>,
    retx_deadline: Option<Instant>,
    time_wait_deadline: Option<Instant>,
    persist_shift: u32,
    probe_pending: bool,
    resend_first_pending: bool,
    consecutive_timeouts: u32,
    duplicate_acks_in_row: u32,
    ack_pending: bool,
    rst_out: Option<Segment>,
    events: VecDeque<Event>,
    stats: ConnectionStats,
}

/// Bytes `offset..offset + len` of a ring buffer, copied slice-wise (not byte by byte).
fn copy_range(buf: &VecDeque<u8>, offset: usize, len: usize) -> Vec<u8> {
    let (front, back) = buf.as_slices();
    let mut out = Vec::with_capacity(len);
    let end = offset + len;
    if offset < front.len() {
        out.extend_from_slice(&front[offset..end.min(front.len())]);
    }
    if end > front.len() {
        out.extend_from_slice(&back[offset.saturating_sub(front.len())..end - front.len()]);
    }
    out
}

/// The RST answering a segment that reached no connection (RFC 9293 §3.10.7.1).
pub fn reset_for(seg: &Segment) -> Option<Segment> {
    if seg.rst {
        return None;
    }
    let (seq, ack) = match seg.ack {
        Some(ack) => (ack, None),
        None => (Seq(0), Some(seg.seq.add(seg.seq_len()))),
    };
    Some(Segment {
        src: seg.dst,
        dst: seg.src,
        seq,
        ack,
        syn: false,
        fin: false,
        rst: true,
        psh: false,
        window: 0,
        mss: None,
        window_scale: None,
        payload: Vec::new(),
    })
}

impl Connection {
    fn new(local: SocketAddr, remote: SocketAddr, config: TcpConfig, iss: Seq, state: State) -> Self {
        let header_bytes = if local.is_ipv4() { 40 } else { 60 };
        let default_mss = if local.is_ipv4() { 536 } else { 1220 };
        Connection {
            local,
            remote,
            state,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            snd_wl1: Seq(0),
            snd_wl2: iss,
            snd_wscale: 0,
            send_mss: default_mss.min(config.mtu.saturating_sub(header_bytes)).max(1),
            send_buf: VecDeque::new(),
            buf_seq: iss.add(1),
            fin_queued: false,
            irs: Seq(0),
            rcv_nxt: Seq(0),
            rcv_wscale: 0,
            recv_buf: VecDeque::new(),
            fin_received: false,
            last_advertised_window: 0,
            rto: RtoEstimator::new(config.rto),
            sampler: RttSampler::new(config.rto.sampling),
            cc: config.cc.build(config.mtu.saturating_sub(header_bytes)),
            recovery: config.recovery.build(),
            retx_deadline: None,
            time_wait_deadline: None,
            persist_shift: 0,
            probe_pending: false,
            resend_first_pending: false,
            consecutive_timeouts: 0,
            duplicate_acks_in_row: 0,
            ack_pending: false,
            rst_out: None,
            events: VecDeque::new(),
            stats: ConnectionStats::default(),
            config,
        }
    }

    /// Active open: the first `poll_transmit` yields the SYN.
    pub fn connect(local: SocketAddr, remote: SocketAddr, config: TcpConfig, iss: Seq) -> Self {
        let mut conn = Connection::new(local, remote, config, iss, State::SynSent);
        conn.rcv_wscale = config.window_scale.min(14);
        conn
    }

    /// Passive open from a received SYN; `None` if `syn` is not a plain SYN.
    pub fn accept(syn: &Segment, config: TcpConfig, iss: Seq) -> Option<Self> {
        if !syn.syn || syn.ack.is_some() || syn.rst || syn.fin {
            return None;
        }
        let mut conn = Connection::new(syn.dst, syn.src, config, iss, State::SynReceived);
        conn.irs = syn.seq;
        conn.rcv_nxt = syn.seq.add(1);
        conn.apply_syn_options(syn);
        conn.snd_wnd = syn.window as usize;
        conn.snd_wl1 = syn.seq;
        Some(conn)
    }

    fn apply_syn_options(&mut self, syn: &Segment) {
        if let Some(mss) = syn.mss {
            let header_bytes = if self.local.is_ipv4() { 40 } else { 60 };
            self.send_mss = (mss as usize).min(self.config.mtu.saturating_sub(header_bytes)).max(1);
        }
        match syn.window_scale {
            Some(shift) => {
                self.snd_wscale = shift.min(14);
                self.rcv_wscale = self.config.window_scale.min(14);
            }
            None => {
                self.snd_wscale = 0;
                self.rcv_wscale = 0;
            }
        }
    }

    pub fn local(&self) -> SocketAddr {
        self.local
    }
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }
    pub fn state(&self) -> State {
        self.state
    }
    pub fn stats(&self) -> ConnectionStats {
        self.stats
    }
    pub fn rto(&self) -> &RtoEstimator {
        &self.rto
    }
    pub fn send_mss(&self) -> usize {
        self.send_mss
    }
    /// The peer's window in bytes (scaled).
    pub fn peer_window(&self) -> usize {
        self.snd_wnd
    }
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }
    /// The peer has sent its FIN and everything before it was read.
    pub fn peer_finished(&self) -> bool {
        self.fin_received && self.recv_buf.is_empty()
    }
    pub fn bytes_in_flight(&self) -> usize {
        self.snd_nxt.since(self.snd_una)
    }
    /// Bytes queued but not yet acknowledged.
    pub fn send_queue_len(&self) -> usize {
        self.send_buf.len()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn event(&mut self, event: Event) {
        if self.events.len() >= MAX_QUEUED_EVENTS {
            self.stats.events_dropped += 1;
        } else {
            self.events.push_back(event);
        }
    }

    fn set_state(&mut self, to: State, now: Instant) {
        if self.state == to {
            return;
        }
        let from = self.state;
        self.state = to;
        match to {
            State::TimeWait => {
                self.retx_deadline = None;
                self.time_wait_deadline = Some(now + self.config.time_wait);
            }
            State::Closed => {
                self.retx_deadline = None;
                self.time_wait_deadline = None;
            }
            _ => {}
        }
        self.event(Event::StateChanged { from, to });
    }

    fn can_send_data(&self) -> bool {
        self.snd_una != self.iss && matches!(self.state, State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck)
    }

    /// Free space in the send buffer.
    pub fn send_capacity(&self) -> usize {
        if self.fin_queued || !matches!(self.state, State::SynSent | State::SynReceived | State::Established | State::CloseWait) {
            return 0;
        }
        self.config.send_buffer_bytes.saturating_sub(self.send_buf.len())
    }

    /// Queues application data; returns how many bytes were taken.
    pub fn send(&mut self, data: &[u8]) -> usize {
        let take = data.len().min(self.send_capacity());
        self.send_buf.extend(&data[..take]);
        take
    }

    /// Takes up to `max` received bytes; opens the window (and announces it if it was small).
    pub fn recv(&mut self, max: usize) -> Vec<u8> {
        let take = max.min(self.recv_buf.len());
        let out: Vec<u8> = self.recv_buf.drain(..take).collect();
        if take > 0 && self.last_advertised_window < self.send_mss && self.receive_window() >= self.send_mss {
            self.ack_pending = true;
        }
        out
    }

    pub fn recv_queue_len(&self) -> usize {
        self.recv_buf.len()
    }

    /// No more data from us: queue a FIN after the buffered data.
    pub fn close(&mut self, now: Instant) {
        match self.state {
            State::SynSent => self.set_state(State::Closed, now),
            State::SynReceived | State::Established => {
                self.fin_queued = true;
                self.set_state(State::FinWait1, now);
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.set_state(State::LastAck, now);
            }
            _ => {}
        }
    }

    /// Drop the connection and tell the peer with a RST.
    pub fn abort(&mut self, now: Instant) {
        if !matches!(self.state, State::Closed | State::SynSent | State::TimeWait) {
            self.rst_out = Some(self.make_segment(self.snd_nxt, false, false, true, Vec::new()));
        }
        self.set_state(State::Closed, now);
    }

    fn receive_window(&self) -> usize {
        self.config.recv_buffer_bytes.saturating_sub(self.recv_buf.len())
    }

    fn fin_seq(&self) -> Seq {
        self.buf_seq.add(self.send_buf.len())
    }

    fn fin_acked(&self) -> bool {
        self.fin_queued && self.snd_una == self.fin_seq().add(1)
    }

    fn make_segment(&self, seq: Seq, syn: bool, fin: bool, rst: bool, payload: Vec<u8>) -> Segment {
        let ack = if self.state == State::SynSent && !rst { None } else { Some(self.rcv_nxt) };
        let window = if syn {
            self.receive_window().min(65535)
        } else {
            (self.receive_window() >> self.rcv_wscale).min(65535)
        };
        let header_bytes = if self.local.is_ipv4() { 40 } else { 60 };
        let offer_scale = syn && (self.state == State::SynSent || self.rcv_wscale > 0 || self.snd_wscale > 0);
        Segment {
            src: self.local,
            dst: self.remote,
            seq,
            ack: if rst && self.state == State::SynSent { None } else { ack },
            syn,
            fin,
            rst,
            psh: !payload.is_empty(),
            window: window as u16,
            mss: syn.then(|| self.config.mtu.saturating_sub(header_bytes).min(65535) as u16),
            window_scale: if offer_scale { Some(self.rcv_wscale) } else { None },
            payload,
        }
    }

    fn arm_retx_timer(&mut self, now: Instant) {
        if self.retx_deadline.is_none() {
            self.retx_deadline = Some(now + self.rto.rto());
        }
    }

    fn persist_interval(&self) -> Duration {
        let factor = 1u32.checked_shl(self.persist_shift).unwrap_or(u32::MAX);
        self.rto.rto().saturating_mul(factor).min(self.config.rto.max)
    }

    fn unsent_bytes(&self) -> usize {
        self.send_buf.len().saturating_sub(self.snd_nxt.since(self.buf_seq))
    }

    fn record_sent(&mut self, seg: &Segment, now: Instant, go_back_n: bool) {
        let start = seg.seq;
        let end = seg.seq.add(seg.seq_len());
        let retransmission = start < self.snd_max;
        self.stats.segments_sent += 1;
        self.stats.bytes_sent += seg.payload.len() as u64;
        if seg.seq_len() > 0 {
            self.sampler.on_send(start, end, now, retransmission);
            if retransmission {
                self.stats.retransmissions += 1;
                self.stats.bytes_retransmitted += seg.payload.len() as u64;
                self.event(Event::Retransmit { seq: start.0, len: seg.seq_len(), go_back_n });
            }
            if end > self.snd_max {
                self.snd_max = end;
            }
            self.arm_retx_timer(now);
        }
        self.last_advertised_window = self.receive_window();
        self.ack_pending = false;
    }

    /// The next segment to put on the wire, if any. Call until `None`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Segment> {
        if let Some(rst) = self.rst_out.take() {
            self.stats.segments_sent += 1;
            return Some(rst);
        }
        let seg = self.next_segment(now);
        if seg.is_none() {
            self.arm_persist_timer(now);
        }
        seg
    }

    fn next_segment(&mut self, now: Instant) -> Option<Segment> {
        match self.state {
            State::Closed => return None,
            // The SYN (or SYN-ACK) is unsent or was rewound; also after close() in SYN-RECEIVED.
            State::SynSent | State::SynReceived | State::FinWait1 if self.snd_nxt == self.iss => {
                let seg = self.make_segment(self.iss, true, false, false, Vec::new());
                self.snd_nxt = self.iss.add(1);
                self.record_sent(&seg, now, false); // a resent SYN is a retransmission, not go-back-N
                return Some(seg);
            }
            _ => {}
        }
        if self.can_send_data() {
            if self.probe_pending || self.resend_first_pending {
                let max_len = if self.probe_pending { 1 } else { self.send_mss };
                self.probe_pending = false;
                self.resend_first_pending = false;
                if let Some(seg) = self.segment_at(self.snd_una, max_len, usize::MAX, false, now) {
                    return Some(seg);
                }
            }
            let in_flight = self.bytes_in_flight();
            let window = self.snd_wnd.min(self.cc.window());
            let usable = window.saturating_sub(in_flight);
            let rewound = self.snd_nxt < self.snd_max;
            if let Some(seg) = self.segment_at(self.snd_nxt, self.send_mss, usable, rewound, now) {
                return Some(seg);
            }
        }
        if self.ack_pending && self.state != State::SynSent {
            let seg = self.make_segment(self.snd_nxt, false, false, false, Vec::new());
            self.record_sent(&seg, now, false);
            return Some(seg);
        }
        None
    }

    /// Builds a data (and/or FIN) segment starting at `seq`; advances SND.NXT past it.
    fn segment_at(&mut self, seq: Seq, max_len: usize, usable: usize, go_back_n: bool, now: Instant) -> Option<Segment> {
        let offset = seq.since(self.buf_seq);
        if seq < self.buf_seq || offset > self.send_buf.len() {
            return None; // only the FIN is left and it was sent already
        }
        let available = self.send_buf.len() - offset;
        let len = available.min(max_len).min(usable);
        // The FIN rides on the segment that reaches the end of the data (again after a rewind).
        let fin = self.fin_queued && len == available && seq.add(len) == self.fin_seq();
        if len == 0 && !fin {
            return None;
        }
        let payload = copy_range(&self.send_buf, offset, len);
        let seg = self.make_segment(seq, false, fin, false, payload);
        let end = seq.add(seg.seq_len());
        if end > self.snd_nxt {
            self.snd_nxt = end;
        }
        self.record_sent(&seg, now, go_back_n);
        Some(seg)
    }

    fn arm_persist_timer(&mut self, now: Instant) {
        let persisting = self.can_send_data()
            && self.retx_deadline.is_none()
            && self.snd_wnd == 0
            && self.unsent_bytes() > 0
            && self.snd_una == self.snd_max;
        if persisting {
            self.retx_deadline = Some(now + self.persist_interval());
        }
    }

    /// When the owner must call [`Connection::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.retx_deadline, self.time_wait_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// True when `poll_transmit` has something to send right now.
    pub fn wants_transmit(&self) -> bool {
        self.ack_pending || self.rst_out.is_some() || self.probe_pending || self.resend_first_pending
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if matches!(self.time_wait_deadline, Some(t) if t <= now) {
            self.set_state(State::Closed, now);
            return;
        }
        let Some(deadline) = self.retx_deadline else { return };
        if deadline > now {
            return;
        }
        self.retx_deadline = None;
        let outstanding = self.snd_max.since(self.snd_una);
        if self.can_send_data() && self.snd_wnd == 0 && outstanding <= 1 && self.unsent_bytes() + outstanding > 0 {
            // Zero-window probe (RFC 9293 §3.8.6.1): one byte, backed off, never a timeout.
            self.persist_shift = (self.persist_shift + 1).min(16);
            self.probe_pending = true;
            self.event(Event::ZeroWindowProbe { seq: self.snd_una.0 });
            self.retx_deadline = Some(now + self.persist_interval());
            return;
        }
        if outstanding == 0 {
            return;
        }
        self.consecutive_timeouts += 1;
        self.stats.timeouts += 1;
        if self.consecutive_timeouts > self.config.max_timeouts {
            self.event(Event::Aborted { reason: "too many retransmission timeouts" });
            self.abort(now);
            return;
        }
        self.rto.on_timeout();
        self.cc.on_timeout(now);
        self.event(Event::Timeout {
            rto_us: self.rto.rto().as_micros() as u64,
            backoff_shift: self.rto.backoff_shift(),
            outstanding_bytes: outstanding,
        });
        let action = self.recovery.on_timeout();
        self.apply_recovery(action, now);
    }

    fn apply_recovery(&mut self, action: RecoveryAction, now: Instant) {
        match action {
            RecoveryAction::None => {}
            RecoveryAction::GoBackN => {
                self.snd_nxt = self.snd_una;
                self.sampler.on_retransmit_all();
            }
            RecoveryAction::RetransmitFirst => self.resend_first_pending = true,
        }
        self.arm_retx_timer(now);
    }

    /// Feeds one received segment addressed to this connection.
    pub fn handle_segment(&mut self, seg: &Segment, now: Instant) {
        self.stats.segments_received += 1;
        match self.state {
            State::Closed => return,
            State::SynSent => return self.on_segment_syn_sent(seg, now),
            _ => {}
        }
        if self.state == State::SynReceived && seg.syn && !seg.rst && seg.ack.is_none() && seg.seq == self.irs {
            self.snd_nxt = self.iss; // the peer lost our SYN-ACK: send it again
            return;
        }
        if !self.acceptable(seg) {
            if !seg.rst {
                self.ack_pending = true;
                if self.state == State::TimeWait && seg.fin {
                    self.time_wait_deadline = Some(now + self.config.time_wait);
                }
            }
            return;
        }
        if seg.rst {
            if seg.seq == self.rcv_nxt {
                self.event(Event::ResetReceived);
                self.set_state(State::Closed, now);
            } else {
                self.ack_pending = true; // RFC 5961 challenge ACK
            }
            return;
        }
        if seg.syn {
            self.ack_pending = true; // RFC 5961 challenge ACK
            return;
        }
        let Some(ack) = seg.ack else { return };
        if self.state == State::SynReceived {
            if self.snd_una < ack && ack <= self.snd_max {
                self.set_state(State::Established, now);
            } else {
                self.rst_out = reset_for(seg);
                return;
            }
        }
        if ack > self.snd_max {
            self.ack_pending = true;
            return;
        }
        let window_before = self.snd_wnd;
        if ack > self.snd_una {
            self.on_new_ack(ack, now);
        }
        if self.snd_wl1 < seg.seq || (self.snd_wl1 == seg.seq && self.snd_wl2 <= ack) {
            self.snd_wnd = (seg.window as usize) << self.snd_wscale;
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = ack;
            if self.snd_wnd > 0 {
                self.persist_shift = 0;
                if self.snd_una == self.snd_max {
                    self.retx_deadline = None; // a persist timer, not a retransmission timer
                }
            }
        }
        let is_duplicate = ack == self.snd_una && seg.payload.is_empty() && !seg.fin
            && self.snd_max > self.snd_una && self.snd_wnd == window_before;
        if is_duplicate {
            self.stats.duplicate_acks += 1;
            self.duplicate_acks_in_row += 1;
            self.cc.on_duplicate_ack(now, self.bytes_in_flight());
            let action = self.recovery.on_duplicate_ack(self.duplicate_acks_in_row);
            if action != RecoveryAction::None {
                self.apply_recovery(action, now);
            }
        }
        if self.fin_acked() {
            match self.state {
                State::FinWait1 => self.set_state(State::FinWait2, now),
                State::Closing => self.set_state(State::TimeWait, now),
                State::LastAck => {
                    self.set_state(State::Closed, now);
                    return;
                }
                _ => {}
            }
        }
        self.on_data_and_fin(seg, now);
    }

    fn acceptable(&self, seg: &Segment) -> bool {
        let window = self.receive_window();
        let in_window = |s: Seq| self.rcv_nxt <= s && s.diff(self.rcv_nxt) < window as i64;
        match (seg.seq_len(), window) {
            (0, 0) => seg.seq == self.rcv_nxt,
            (0, _) => in_window(seg.seq),
            // Zero window: the ACK is processed, the data is refused (trimmed to nothing).
            (_, 0) => seg.seq == self.rcv_nxt,
            (len, _) => in_window(seg.seq) || in_window(seg.seq.add(len - 1)),
        }
    }

    fn on_new_ack(&mut self, ack: Seq, now: Instant) {
        self.snd_una = ack;
        if self.snd_nxt < self.snd_una {
            self.snd_nxt = self.snd_una;
        }
        let data_acked = ack.since(self.buf_seq).min(self.send_buf.len());
        self.send_buf.drain(..data_acked);
        self.buf_seq = self.buf_seq.add(data_acked);
        self.stats.bytes_acked += data_acked as u64;
        self.consecutive_timeouts = 0;
        self.duplicate_acks_in_row = 0;
        let samples = self.sampler.on_ack(ack, now);
        for rtt in &samples {
            self.rto.on_sample(*rtt);
            self.stats.rtt_samples += 1;
            let event = Event::RttSample {
                rtt_us: rtt.as_micros() as u64,
                srtt_us: self.rto.srtt().unwrap_or_default().as_micros() as u64,
                rttvar_us: self.rto.rttvar().as_micros() as u64,
                rto_us: self.rto.rto().as_micros() as u64,
            };
            self.event(event);
        }
        let in_flight = self.bytes_in_flight();
        self.cc.on_ack(now, data_acked, in_flight, samples.last().copied());
        self.recovery.on_new_ack();
        self.retx_deadline = None;
        if self.snd_max > self.snd_una {
            self.arm_retx_timer(now);
        }
    }

    fn on_data_and_fin(&mut self, seg: &Segment, now: Instant) {
        let mut fin_in_order = seg.fin && seg.seq.add(seg.payload.len()) == self.rcv_nxt;
        let accepts_data = matches!(self.state, State::Established | State::FinWait1 | State::FinWait2);
        if accepts_data && !seg.payload.is_empty() {
            if seg.seq > self.rcv_nxt {
                // Out of order: the bare stack keeps no reassembly queue; a duplicate ACK asks again.
                self.ack_pending = true;
                return;
            }
            let already = self.rcv_nxt.since(seg.seq);
            let fresh = &seg.payload[already.min(seg.payload.len())..];
            let take = fresh.len().min(self.receive_window());
            self.recv_buf.extend(&fresh[..take]);
            self.rcv_nxt = self.rcv_nxt.add(take);
            self.stats.bytes_received += take as u64;
            self.ack_pending = true;
            fin_in_order = seg.fin && take == fresh.len();
        }
        if fin_in_order && !self.fin_received {
            self.fin_received = true;
            self.rcv_nxt = self.rcv_nxt.add(1);
            self.ack_pending = true;
            match self.state {
                State::SynReceived | State::Established => self.set_state(State::CloseWait, now),
                State::FinWait1 if self.fin_acked() => self.set_state(State::TimeWait, now),
                State::FinWait1 => self.set_state(State::Closing, now),
                State::FinWait2 => self.set_state(State::TimeWait, now),
                _ => {}
            }
        }
    }

    fn on_segment_syn_sent(&mut self, seg: &Segment, now: Instant) {
        let ack_ok = match seg.ack {
            Some(ack) => self.iss < ack && ack <= self.snd_max,
            None => true,
        };
        if !ack_ok {
            self.rst_out = reset_for(seg);
            return;
        }
        if seg.rst {
            if seg.ack.is_some() {
                self.event(Event::ResetReceived);
                self.set_state(State::Closed, now);
            }
            return;
        }
        if !seg.syn {
            return;
        }
        self.irs = seg.seq;
        self.rcv_nxt = seg.seq.add(1);
        self.apply_syn_options(seg);
        self.snd_wnd = seg.window as usize;
        self.snd_wl1 = seg.seq;
        match seg.ack {
            Some(ack) => {
                self.snd_wl2 = ack;
                self.on_new_ack(ack, now);
                self.set_state(State::Established, now);
                self.ack_pending = true;
            }
            None => {
                // Simultaneous open: answer with SYN-ACK.
                self.set_state(State::SynReceived, now);
                self.snd_nxt = self.iss;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_range_spans_both_halves_of_the_ring() {
        let mut buf: VecDeque<u8> = VecDeque::with_capacity(8);
        buf.extend(0..6u8);
        buf.drain(..4);
        buf.extend(6..12u8); // wraps: the ring now holds 4..12 in two slices
        assert!(!buf.as_slices().1.is_empty(), "test needs a wrapped ring");
        for offset in 0..buf.len() {
            for len in 0..=buf.len() - offset {
                let expected: Vec<u8> = buf.range(offset..offset + len).copied().collect();
                assert_eq!(copy_range(&buf, offset, len), expected, "{offset}+{len}");
            }
        }
    }
}
