//! One TCP connection as a sans-IO state machine (RFC 9293).
//!
//! The `bare` profile ([`TcpConfig::bare`], the default) is the studies' stack: no
//! congestion control, no SACK, no fast retransmit, go-back-N after a timeout, immediate
//! ACKs, out-of-order segments dropped. The `modern` profile ([`TcpConfig::modern`]) adds
//! what the seeds' server lacked, each part switchable on its own:
//!
//! - congestion control (`crate::cc`, built once the handshake fixed the MSS): Reno (RFC 5681);
//! - loss recovery (`crate::recovery`): NewReno (RFC 6582) with limited transmit (RFC 3042),
//!   or SACK-based recovery (RFC 6675) over a sender scoreboard;
//! - SACK (RFC 2018): an out-of-order reassembly queue and SACK blocks on our ACKs;
//! - RACK-TLP (RFC 8985): time-based loss detection and tail loss probes;
//! - timestamps (RFC 7323): RTT samples also for ACKs of retransmitted data.
//!
//! Timers live in one table ([`crate::timer::TimerTable`]).
//! Reading list: RFC 9293, RFC 6298, RFC 5681, RFC 6582, RFC 3042, RFC 2018, RFC 6675,
//! RFC 8985, RFC 7323, RFC 6928, RFC 5961, RFC 1122 §4.2.2.17.
use core::time::Duration;
use std::collections::VecDeque;
use std::net::SocketAddr;

use crate::assembler::Assembler;
use crate::cc::{Acked, CongestionControl, Phase, RttStats, SlowStart};
use crate::recovery::go_back_n::GoBackN;
use crate::recovery::rack::Rack;
use crate::recovery::{AckInfo, Delivered, LossRecovery, RtoAction, Scoreboard};
use crate::rto::{RtoEstimator, RttSampler};
use crate::segment::{Segment, Timestamp, MAX_SACK_BLOCKS};
use crate::syncookie::{CookieOptions, SynCookies};
use crate::seq::Seq;
use crate::time::Instant;
use crate::timer::{Timer, TimerTable};

pub use crate::config::{Profile, Push, TcpConfig};
pub use crate::event::{ConnectionStats, Event, RetransmitKind, State, Transmission};

/// Events queued for the owner (the JSON log of leanweb is built from these).
const MAX_QUEUED_EVENTS: usize = 4096;
/// Bytes the timestamps option takes on every segment once negotiated (10, padded to 12).
const TIMESTAMP_OPTION_BYTES: usize = 12;

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
    /// The send buffer's size now (grows with autotuning, never shrinks).
    send_buffer_limit: usize,
    buf_seq: Seq,
    fin_queued: bool,
    // Receive sequence space.
    irs: Seq,
    rcv_nxt: Seq,
    rcv_wscale: u8,
    recv_buf: VecDeque<u8>,
    fin_received: bool,
    last_advertised_window: usize,
    /// Out-of-order data and a FIN beyond a hole (RFC 2018 receiver).
    assembler: Assembler,
    // Options agreed in the handshake.
    sack_ok: bool,
    ts_ok: bool,
    ts_recent: u32,
    last_ack_sent: Seq,
    // Timers, RTT, congestion control and loss recovery.
    timers: TimerTable,
    rto: RtoEstimator,
    sampler: RttSampler,
    rtt_latest: Option<Duration>,
    rtt_min: Option<Duration>,
    /// The smallest Karn-safe RTT sample of the ACK being processed (for HyStart++).
    ack_rtt_sample: Option<Duration>,
    /// Built when the handshake fixes the MSS.
    cc: Option<Box<dyn CongestionControl>>,
    cc_phase: Option<Phase>,
    recovery: Box<dyn LossRecovery>,
    scoreboard: Scoreboard,
    rack: Option<Rack>,
    delivered: Vec<Delivered>,
    /// End of the highest retransmitted range (whether an ACK covers retransmitted data).
    retransmitted_below: Seq,
    /// Send the next lost segment even if the window is full (the fast retransmit itself).
    force_retransmit: bool,
    tlp_pending: bool,
    /// With pacing: no data segment before this.
    next_send_at: Instant,
    persist_shift: u32,
    probe_pending: bool,
    consecutive_timeouts: u32,
    duplicate_acks_in_row: u32,
    ack_pending: bool,
    rst_out: Option<Segment>,
    last_transmission: Option<Transmission>,
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
        sack_permitted: false,
        sack_blocks: Vec::new(),
        timestamp: None,
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
            send_buffer_limit: config.send_buffer_bytes,
            buf_seq: iss.add(1),
            fin_queued: false,
            irs: Seq(0),
            rcv_nxt: Seq(0),
            rcv_wscale: 0,
            recv_buf: VecDeque::new(),
            fin_received: false,
            last_advertised_window: 0,
            assembler: Assembler::new(MAX_SACK_BLOCKS + 1),
            sack_ok: false,
            ts_ok: false,
            ts_recent: 0,
            last_ack_sent: Seq(0),
            timers: TimerTable::default(),
            rto: RtoEstimator::new(config.rto),
            sampler: RttSampler::new(config.rto.sampling),
            rtt_latest: None,
            rtt_min: None,
            ack_rtt_sample: None,
            cc: None,
            cc_phase: None,
            recovery: Box::new(GoBackN),
            scoreboard: Scoreboard::default(),
            rack: None,
            delivered: Vec::new(),
            retransmitted_below: iss,
            force_retransmit: false,
            tlp_pending: false,
            next_send_at: Instant::ZERO,
            persist_shift: 0,
            probe_pending: false,
            consecutive_timeouts: 0,
            duplicate_acks_in_row: 0,
            ack_pending: false,
            rst_out: None,
            last_transmission: None,
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

    /// The SYN-ACK answering `syn` with the cookie `iss` (RFC 4987 §3.6), built without
    /// keeping a connection: the caller sends it and forgets the SYN.
    pub fn cookie_syn_ack(syn: &Segment, options: &CookieOptions, config: TcpConfig, iss: Seq, now: Instant) -> Option<Segment> {
        if !syn.syn || syn.ack.is_some() || syn.rst || syn.fin {
            return None;
        }
        let rounded = Segment {
            mss: Some(options.mss),
            window_scale: options.window_scale,
            sack_permitted: options.sack_permitted,
            timestamp: if options.timestamps { syn.timestamp } else { None },
            payload: Vec::new(),
            ..syn.clone()
        };
        let mut conn = Connection::accept(&rounded, config, iss)?;
        conn.poll_transmit(now)
    }

    /// Passive open from the ACK that returns a valid cookie: the connection the SYN would
    /// have made, with the SYN-ACK counted as sent, then fed `ack` (which may carry data).
    /// `None` if the ACK does not complete the handshake.
    pub fn accept_cookie(ack: &Segment, options: &CookieOptions, config: TcpConfig, iss: Seq, now: Instant) -> Option<Self> {
        let syn = SynCookies::rebuilt_syn(ack, options);
        let mut conn = Connection::accept(&syn, config, iss)?;
        conn.snd_nxt = iss.add(1);
        conn.snd_max = iss.add(1);
        conn.handle_segment(ack, now);
        (conn.state == State::Established).then_some(conn)
    }

    /// The peer's SYN fixes the MSS and the options: build the controller and the policy.
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
        self.sack_ok = self.config.sack && syn.sack_permitted;
        self.ts_ok = self.config.timestamps && syn.timestamp.is_some();
        if let (true, Some(ts)) = (self.ts_ok, syn.timestamp) {
            self.ts_recent = ts.tsval;
        }
        let mss = self.data_mss();
        let slow_start = SlowStart { hystart: self.config.hystart, ack_limit_segments: self.config.abc_limit_segments };
        let cc = self.config.cc.build(mss, self.config.initial_window_segments, slow_start);
        self.cc_phase = Some(cc.phase());
        self.cc = Some(cc);
        self.recovery = self.config.recovery.build(mss, self.sack_ok, self.config.limited_transmit, self.config.rack_tlp);
        self.rack = (self.config.rack_tlp && self.recovery.uses_scoreboard()).then(Rack::default);
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
    pub fn timers(&self) -> &TimerTable {
        &self.timers
    }
    /// The peer's MSS (clamped to ours): payload of a full segment without options.
    pub fn send_mss(&self) -> usize {
        self.send_mss
    }
    /// Payload of a full data segment: the MSS less the options every segment carries.
    pub fn data_mss(&self) -> usize {
        self.send_mss.saturating_sub(if self.ts_ok { TIMESTAMP_OPTION_BYTES } else { 0 }).max(1)
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
    /// Congestion window in bytes (`usize::MAX` without congestion control or before the handshake).
    pub fn cwnd(&self) -> usize {
        self.cc.as_ref().map_or(usize::MAX, |cc| cc.window())
    }
    pub fn ssthresh(&self) -> usize {
        self.cc.as_ref().map_or(usize::MAX, |cc| cc.ssthresh())
    }
    /// The controller's phase (`None` before the handshake).
    pub fn cc_phase(&self) -> Option<Phase> {
        self.cc.as_ref().map(|cc| cc.phase())
    }
    /// The send buffer's size now (`send_buffer_bytes`, or more once autotuning grew it).
    pub fn send_buffer_bytes(&self) -> usize {
        self.send_buffer_limit
    }
    pub fn in_recovery(&self) -> bool {
        self.recovery.in_recovery()
    }
    pub fn recovery_name(&self) -> &'static str {
        self.recovery.name()
    }
    pub fn sack_in_use(&self) -> bool {
        self.sack_ok
    }
    pub fn timestamps_in_use(&self) -> bool {
        self.ts_ok
    }
    /// The sender's scoreboard (empty for go-back-N).
    pub fn scoreboard(&self) -> &Scoreboard {
        &self.scoreboard
    }
    /// Out-of-order blocks held by the receiver, as (start, end).
    pub fn out_of_order_blocks(&self) -> Vec<(Seq, Seq)> {
        self.assembler.ranges().collect()
    }
    pub fn rtt_stats(&self) -> RttStats {
        RttStats { latest: self.rtt_latest, min: self.rtt_min, srtt: self.rto.srtt(), rttvar: self.rto.rttvar() }
    }

    /// The segment the last `poll_transmit` returned, if it carried sequence space.
    pub fn last_transmission(&self) -> Option<Transmission> {
        self.last_transmission
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
                self.stop_loss_timers();
                self.timers.set(Timer::TimeWait, now + self.config.time_wait);
            }
            State::Closed => self.timers.stop_all(),
            _ => {}
        }
        self.event(Event::StateChanged { from, to });
    }

    fn stop_loss_timers(&mut self) {
        for timer in [Timer::Retransmission, Timer::Persist, Timer::RackReorder, Timer::TailLossProbe] {
            self.timers.stop(timer);
        }
    }

    fn can_send_data(&self) -> bool {
        self.snd_una != self.iss && matches!(self.state, State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck)
    }

    /// Free space in the send buffer.
    pub fn send_capacity(&self) -> usize {
        if self.fin_queued || !matches!(self.state, State::SynSent | State::SynReceived | State::Established | State::CloseWait) {
            return 0;
        }
        self.send_buffer_limit.saturating_sub(self.send_buf.len())
    }

    /// Send-buffer autotuning: room for two windows (the congestion window, or the peer's if
    /// that is smaller), as Linux's `tcp_sndbuf_expand` (net/ipv4/tcp_input.c) reserves
    /// 2·cwnd segments; grows only, up to `send_buffer_max_bytes`.
    fn expand_send_buffer(&mut self) {
        if let Some(max) = self.config.send_buffer_max_bytes {
            let window = self.cwnd().min(self.snd_wnd);
            let want = window.saturating_mul(2).min(max);
            self.send_buffer_limit = self.send_buffer_limit.max(want);
        }
    }

    /// Logs a phase change of the controller after an ACK; loss responses only record theirs.
    fn note_cc_phase(&mut self, log: bool) {
        let phase = self.cc_phase();
        if phase != self.cc_phase {
            self.cc_phase = phase;
            if let (true, Some(phase)) = (log, phase) {
                let (cwnd_bytes, ssthresh_bytes) = (self.cwnd(), self.ssthresh());
                self.event(Event::CcPhase { phase: phase.name(), cwnd_bytes, ssthresh_bytes });
            }
        }
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

    /// The receive buffer the window is offered from; a receiver may grow it as Linux's
    /// autotuning does (crates/leansim's stand-in for the kernel client).
    pub fn recv_buffer_bytes(&self) -> usize {
        self.config.recv_buffer_bytes
    }

    pub fn set_recv_buffer_bytes(&mut self, bytes: usize) {
        self.config.recv_buffer_bytes = bytes.clamp(1, 1 << 30);
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

    /// RFC 7323 §5.4: a 1 ms timestamp clock, offset per connection (§7.1).
    fn ts_clock(&self, now: Instant) -> u32 {
        ((now.as_micros() / 1000) as u32).wrapping_add(self.iss.0.rotate_left(16))
    }

    /// RFC 2018 §4: the block holding the most recently received segment first, then the
    /// other most recently changed ones; at most as many as fit beside `payload_len`.
    fn sack_blocks(&self, payload_len: usize) -> Vec<(Seq, Seq)> {
        if !self.sack_ok || self.assembler.is_empty() {
            return Vec::new();
        }
        let ts = if self.ts_ok { 10 } else { 0 };
        // Options plus payload stay within the MSS the peer announced (RFC 6691).
        let room = self.send_mss.saturating_sub(payload_len);
        let max_blocks = (0..=MAX_SACK_BLOCKS).rev().find(|n| (ts + 2 + 8 * n).div_ceil(4) * 4 <= room || *n == 0).unwrap_or(0);
        self.assembler.sack_blocks(max_blocks)
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
        let offering = syn && self.state == State::SynSent;
        // TSval is set in `stamp` at send time.
        let tsecr = if self.ts_ok { self.ts_recent } else { 0 };
        let timestamp = (!rst && (self.ts_ok || (offering && self.config.timestamps))).then_some(Timestamp { tsval: 0, tsecr });
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
            sack_permitted: syn && (self.sack_ok || (offering && self.config.sack)),
            sack_blocks: if syn || rst { Vec::new() } else { self.sack_blocks(payload.len()) },
            timestamp,
            payload,
        }
    }

    fn stamp(&self, seg: &mut Segment, now: Instant) {
        if let Some(ts) = seg.timestamp.as_mut() {
            ts.tsval = self.ts_clock(now);
        }
    }

    /// The retransmission timer, unless it (or the persist timer standing in for it) runs.
    fn arm_retx_timer(&mut self, now: Instant) {
        if !self.timers.is_armed(Timer::Retransmission) && !self.timers.is_armed(Timer::Persist) {
            self.timers.set(Timer::Retransmission, now + self.rto.rto());
        }
    }

    fn persist_interval(&self) -> Duration {
        let factor = 1u32.checked_shl(self.persist_shift).unwrap_or(u32::MAX);
        self.rto.rto().saturating_mul(factor).min(self.config.rto.max)
    }

    fn unsent_bytes(&self) -> usize {
        self.send_buf.len().saturating_sub(self.snd_nxt.since(self.buf_seq))
    }

    fn record_sent(&mut self, seg: &mut Segment, now: Instant, kind: RetransmitKind) {
        self.stamp(seg, now);
        let start = seg.seq;
        let end = seg.seq.add(seg.seq_len());
        let retransmission = start < self.snd_max;
        self.stats.segments_sent += 1;
        self.stats.bytes_sent += seg.payload.len() as u64;
        if seg.seq_len() > 0 {
            self.sampler.on_send(start, end, now, retransmission);
            self.last_transmission = Some(Transmission {
                seq: start.0,
                payload_len: seg.payload.len(),
                syn: seg.syn,
                fin: seg.fin,
                retransmission,
                kind,
                sent_at: now,
                srtt_us: self.rto.srtt().map(|d| d.as_micros() as u64),
                rttvar_us: self.rto.rttvar().as_micros() as u64,
                rto_unfloored_us: self.rto.unfloored_rto_us(),
                rto_us: self.rto.rto().as_micros() as u64,
            });
            if retransmission {
                self.stats.retransmissions += 1;
                self.stats.bytes_retransmitted += seg.payload.len() as u64;
                self.event(Event::Retransmit { seq: start.0, len: seg.seq_len(), kind });
                if end > self.retransmitted_below {
                    self.retransmitted_below = end;
                }
            }
            if end > self.snd_max {
                self.snd_max = end;
            }
            if self.recovery.uses_scoreboard() && !seg.syn {
                self.scoreboard.on_sent(start, end, now);
            }
            let in_flight = self.bytes_in_flight();
            if let Some(cc) = self.cc.as_mut() {
                cc.on_sent(now, seg.seq_len(), in_flight);
            }
            self.arm_retx_timer(now);
            if !retransmission {
                self.arm_tail_loss_probe(now);
            }
        }
        if seg.ack.is_some() {
            self.last_ack_sent = self.rcv_nxt;
        }
        self.last_advertised_window = self.receive_window();
        self.ack_pending = false;
    }

    /// The next segment to put on the wire, if any. Call until `None`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Segment> {
        self.last_transmission = None;
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
                let mut seg = self.make_segment(self.iss, true, false, false, Vec::new());
                self.snd_nxt = self.iss.add(1);
                self.record_sent(&mut seg, now, RetransmitKind::Handshake);
                return Some(seg);
            }
            _ => {}
        }
        if self.can_send_data() && !self.pacing_holds(now) {
            if let Some(seg) = self.next_data_segment(now) {
                self.paced(now, seg.payload.len());
                return Some(seg);
            }
        }
        if self.ack_pending && self.state != State::SynSent {
            let mut seg = self.make_segment(self.snd_nxt, false, false, false, Vec::new());
            self.record_sent(&mut seg, now, RetransmitKind::Recovery);
            return Some(seg);
        }
        None
    }

    fn next_data_segment(&mut self, now: Instant) -> Option<Segment> {
        if self.probe_pending {
            self.probe_pending = false;
            if let Some(seg) = self.segment_at(self.snd_una, 1, usize::MAX, RetransmitKind::WindowProbe, now) {
                return Some(seg);
            }
        }
        if self.tlp_pending {
            self.tlp_pending = false;
            if let Some(seg) = self.tail_loss_probe(now) {
                return Some(seg);
            }
        }
        let in_flight = self.bytes_in_flight();
        let cwnd = self.cwnd();
        let uses_scoreboard = self.recovery.uses_scoreboard();
        if uses_scoreboard {
            if let Some((start, end)) = self.scoreboard.next_lost() {
                let pipe = self.recovery.pipe(&self.scoreboard, in_flight);
                let room = cwnd.saturating_add(self.recovery.extra_window()).saturating_sub(pipe);
                if self.force_retransmit || end.since(start) <= room {
                    self.force_retransmit = false;
                    let kind = if self.consecutive_timeouts > 0 { RetransmitKind::Timeout } else { RetransmitKind::Recovery };
                    return self.retransmit(start, end, kind, now);
                }
                return None; // lost segments go first (RFC 6675 NextSeg rule 1)
            }
            self.force_retransmit = false;
        }
        let pipe = self.recovery.pipe(&self.scoreboard, in_flight);
        let cwnd_room = cwnd.saturating_add(self.recovery.extra_window()).saturating_sub(pipe);
        let usable = self.snd_wnd.saturating_sub(in_flight).min(cwnd_room).min(self.send_window_room(in_flight));
        if uses_scoreboard && cwnd_room < self.data_mss().min(self.unsent_bytes()) {
            return None; // no runt segments because of the congestion window
        }
        let kind = if self.snd_nxt < self.snd_max { RetransmitKind::GoBackN } else { RetransmitKind::Recovery };
        self.segment_at(self.snd_nxt, self.data_mss(), usable, kind, now)
    }

    /// With pacing: true (and the pacing timer armed) while the next data segment is not due.
    fn pacing_holds(&mut self, now: Instant) -> bool {
        if self.config.pacing_rate_bps.is_none() || now >= self.next_send_at {
            return false;
        }
        self.timers.set(Timer::Pacing, self.next_send_at);
        true
    }

    /// With pacing: the next data segment is due once this one's bytes left at the rate.
    fn paced(&mut self, now: Instant, payload_bytes: usize) {
        let Some(rate_bps) = self.config.pacing_rate_bps else { return };
        if payload_bytes == 0 {
            return;
        }
        let wire_ns = (payload_bytes as u64 + 40) * 8 * 1_000_000_000 / rate_bps;
        self.next_send_at = self.next_send_at.max(now) + Duration::from_nanos(wire_ns);
    }

    /// Bytes the sender's own window (`send_window_segments`) still allows in flight.
    fn send_window_room(&self, in_flight: usize) -> usize {
        self.config.send_window_segments
            .map_or(usize::MAX, |segments| segments.saturating_mul(self.data_mss()).saturating_sub(in_flight))
    }

    /// Sends recorded segment `start..end` again (its FIN too, if it carried one).
    fn retransmit(&mut self, start: Seq, end: Seq, kind: RetransmitKind, now: Instant) -> Option<Segment> {
        let fin_seq = self.fin_seq();
        let data_end = if self.fin_queued && end > fin_seq { fin_seq } else { end };
        let len = data_end.since(start).min(self.data_mss());
        self.segment_at(start, len, usize::MAX, kind, now)
    }

    /// RFC 8985 §7.3: one new segment if the peer's window allows, else the last one again.
    fn tail_loss_probe(&mut self, now: Instant) -> Option<Segment> {
        let in_flight = self.bytes_in_flight();
        let rwnd_room = self.snd_wnd.saturating_sub(in_flight).min(self.send_window_room(in_flight));
        let (seg, retransmission) = if self.unsent_bytes() > 0 && rwnd_room > 0 {
            (self.segment_at(self.snd_nxt, self.data_mss(), rwnd_room, RetransmitKind::TailLossProbe, now), false)
        } else {
            let last = self.scoreboard.last().filter(|s| !s.sacked).map(|s| (s.start, s.end));
            let (start, end) = last?;
            (self.retransmit(start, end, RetransmitKind::TailLossProbe, now), true)
        };
        let seg = seg?;
        self.stats.tail_loss_probes += 1;
        self.event(Event::TailLossProbe { seq: seg.seq.0, retransmission });
        let snd_max = self.snd_max;
        if let Some(rack) = self.rack.as_mut() {
            rack.tlp_end = Some(snd_max);
            rack.tlp_is_retrans = retransmission;
        }
        // One probe at a time (§7.3): sending new data above re-armed the probe timer.
        self.timers.stop(Timer::TailLossProbe);
        // §7.3: the RTO is restarted after the probe.
        self.timers.stop(Timer::Retransmission);
        self.arm_retx_timer(now);
        Some(seg)
    }

    /// Builds a data (and/or FIN) segment starting at `seq`; advances SND.NXT past it.
    fn segment_at(&mut self, seq: Seq, max_len: usize, usable: usize, kind: RetransmitKind, now: Instant) -> Option<Segment> {
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
        let mut seg = self.make_segment(seq, false, fin, false, payload);
        if self.config.push == Push::EndOfData {
            seg.psh = len > 0 && len == available;
        }
        let end = seq.add(seg.seq_len());
        if end > self.snd_nxt {
            self.snd_nxt = end;
        }
        self.record_sent(&mut seg, now, kind);
        Some(seg)
    }

    fn arm_persist_timer(&mut self, now: Instant) {
        let persisting = self.can_send_data()
            && !self.timers.is_armed(Timer::Retransmission)
            && !self.timers.is_armed(Timer::Persist)
            && self.snd_wnd == 0
            && self.unsent_bytes() > 0
            && self.snd_una == self.snd_max;
        if persisting {
            self.timers.set(Timer::Persist, now + self.persist_interval());
        }
    }

    /// RFC 8985 §7.2: (re)start the probe timer while data is outstanding, no recovery is
    /// in progress and nothing is SACKed or marked lost; stop it otherwise.
    fn arm_tail_loss_probe(&mut self, now: Instant) {
        let Some(rack) = self.rack.as_ref() else { return };
        let outstanding = self.snd_max.since(self.snd_una);
        let eligible = self.can_send_data()
            && outstanding > 0
            && rack.tlp_end.is_none()
            && !self.recovery.in_recovery()
            && self.consecutive_timeouts == 0
            && self.scoreboard.sacked_segments() == 0
            && !self.scoreboard.has_lost();
        let rto_at = self.timers.get(Timer::Retransmission);
        match (eligible, rto_at) {
            (true, Some(rto_at)) => {
                // Capped by the RTO: a probe due with the timeout is sent instead of it (§7.2).
                let pto = Rack::pto(&self.rtt_stats(), outstanding <= self.data_mss(), rto_at.saturating_since(now));
                self.timers.set(Timer::TailLossProbe, now + pto);
            }
            _ => self.timers.stop(Timer::TailLossProbe),
        }
    }

    /// When the owner must call [`Connection::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_timeout()
    }

    /// True when `poll_transmit` has something to send right now.
    pub fn wants_transmit(&self) -> bool {
        self.ack_pending || self.rst_out.is_some() || self.probe_pending || self.tlp_pending || self.force_retransmit
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.timers.is_expired(Timer::Pacing, now) {
            self.timers.stop(Timer::Pacing); // the next poll_transmit sends
        }
        if self.timers.is_expired(Timer::TimeWait, now) {
            self.set_state(State::Closed, now);
            return;
        }
        if self.timers.is_expired(Timer::TailLossProbe, now) {
            self.timers.stop(Timer::TailLossProbe);
            let probe_out = self.rack.as_ref().is_some_and(|r| r.tlp_end.is_some());
            if self.can_send_data() && self.snd_max > self.snd_una && !probe_out {
                self.tlp_pending = true;
                if self.timers.is_expired(Timer::Retransmission, now) {
                    // The probe goes out instead of the timeout; the RTO restarts after it.
                    self.timers.set(Timer::Retransmission, now + self.rto.rto());
                }
            }
        }
        if self.timers.is_expired(Timer::Retransmission, now) || self.timers.is_expired(Timer::Persist, now) {
            self.timers.stop(Timer::Retransmission);
            self.timers.stop(Timer::Persist);
            self.on_retransmission_timeout(now);
            return;
        }
        if self.timers.is_expired(Timer::RackReorder, now) {
            self.timers.stop(Timer::RackReorder);
            self.rack_detect_loss(now);
        }
    }

    fn on_retransmission_timeout(&mut self, now: Instant) {
        let outstanding = self.snd_max.since(self.snd_una);
        if self.can_send_data() && self.snd_wnd == 0 && outstanding <= 1 && self.unsent_bytes() + outstanding > 0 {
            // Zero-window probe (RFC 9293 §3.8.6.1): one byte, backed off, never a timeout.
            self.persist_shift = (self.persist_shift + 1).min(16);
            self.probe_pending = true;
            self.event(Event::ZeroWindowProbe { seq: self.snd_una.0 });
            self.timers.set(Timer::Persist, now + self.persist_interval());
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
        let first = self.consecutive_timeouts == 1;
        if let Some(cc) = self.cc.as_mut() {
            cc.on_rto_expired(now, outstanding, first);
        }
        self.note_cc_phase(false);
        self.event(Event::Timeout {
            rto_us: self.rto.rto().as_micros() as u64,
            backoff_shift: self.rto.backoff_shift(),
            outstanding_bytes: outstanding,
        });
        // Before the handshake completes only the SYN is outstanding: send it again.
        let action = if self.snd_una == self.iss { RtoAction::GoBackN } else { self.recovery.on_rto(&mut self.scoreboard, self.snd_max) };
        if let Some(rack) = self.rack.as_mut() {
            rack.on_rto();
        }
        self.timers.stop(Timer::TailLossProbe);
        self.timers.stop(Timer::RackReorder);
        self.force_retransmit = false;
        if action == RtoAction::GoBackN {
            self.snd_nxt = self.snd_una;
            self.sampler.on_retransmit_all();
        }
        self.arm_retx_timer(now);
    }

    /// A congestion event: the controller reduces its window once; the first lost segment
    /// goes out at once even if the reduced window is full.
    fn congestion_event(&mut self, now: Instant) {
        let in_flight = self.snd_max.since(self.snd_una);
        let rtt = self.rtt_stats();
        if let Some(cc) = self.cc.as_mut() {
            cc.on_congestion_event(now, in_flight, &rtt);
        }
        self.note_cc_phase(false);
        self.stats.recoveries += 1;
        self.force_retransmit = self.scoreboard.has_lost();
        self.timers.stop(Timer::TailLossProbe);
        let (cwnd_bytes, ssthresh_bytes) = (self.cwnd(), self.ssthresh());
        self.event(Event::Recovery { entered: true, cwnd_bytes, ssthresh_bytes });
    }

    /// RFC 8985 §6.2 step 5 (also on the reordering timer).
    fn rack_detect_loss(&mut self, now: Instant) {
        let Some(rack) = self.rack.as_ref() else { return };
        let rtt = self.rtt_stats();
        let reo_wnd = rack.reo_wnd(self.recovery.in_recovery(), self.scoreboard.sacked_segments(), &rtt);
        let (marked, timer) = rack.detect_loss(&mut self.scoreboard, now, reo_wnd);
        match timer {
            Some(at) => self.timers.set(Timer::RackReorder, at),
            None => self.timers.stop(Timer::RackReorder),
        }
        if marked > 0 {
            self.stats.rack_marked_lost += marked as u64;
            if self.recovery.on_loss_detected(self.snd_una, self.snd_max) {
                self.congestion_event(now);
            }
        }
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
                    self.timers.set(Timer::TimeWait, now + self.config.time_wait);
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
        self.update_ts_recent(seg);
        let window_before = self.snd_wnd;
        let acked_bytes = ack.since(self.snd_una);
        self.delivered.clear();
        self.ack_rtt_sample = None;
        if ack > self.snd_una {
            self.on_new_ack(ack, seg.timestamp, now);
        }
        if self.snd_wl1 < seg.seq || (self.snd_wl1 == seg.seq && self.snd_wl2 <= ack) {
            self.snd_wnd = (seg.window as usize) << self.snd_wscale;
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = ack;
            if self.snd_wnd > 0 {
                self.persist_shift = 0;
                if self.snd_una == self.snd_max {
                    // a persist timer, not a retransmission timer
                    self.timers.stop(Timer::Retransmission);
                    self.timers.stop(Timer::Persist);
                }
            }
        }
        let is_duplicate = ack == self.snd_una && seg.payload.is_empty() && !seg.fin
            && self.snd_max > self.snd_una && self.snd_wnd == window_before;
        if is_duplicate {
            self.stats.duplicate_acks += 1;
            self.duplicate_acks_in_row += 1;
        }
        self.after_ack(seg, ack, acked_bytes, is_duplicate, now);
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

    /// RFC 7323 §4.3: remember the peer's TSval of the segment that covers Last.ACK.sent.
    fn update_ts_recent(&mut self, seg: &Segment) {
        if let (true, Some(ts)) = (self.ts_ok, seg.timestamp) {
            if seg.seq <= self.last_ack_sent && ts.tsval.wrapping_sub(self.ts_recent) as i32 >= 0 {
                self.ts_recent = ts.tsval;
            }
        }
    }

    /// Loss detection and window growth for one ACK (scoreboard policies; go-back-N only
    /// tells the controller about new data).
    fn after_ack(&mut self, seg: &Segment, ack: Seq, acked_bytes: usize, duplicate: bool, now: Instant) {
        let rtt = self.rtt_stats();
        if !self.recovery.uses_scoreboard() {
            if acked_bytes > 0 {
                let acked = Acked { ack, acked_bytes, bytes_in_flight: self.bytes_in_flight(), in_recovery: false, snd_max: self.snd_max, rtt_sample: self.ack_rtt_sample };
                if let Some(cc) = self.cc.as_mut() {
                    cc.on_ack(now, acked, &rtt);
                }
                self.note_cc_phase(true);
            }
            self.expand_send_buffer();
            return;
        }
        let mut newly_sacked_bytes = 0;
        if self.sack_ok && !seg.sack_blocks.is_empty() {
            let (una, max) = (self.snd_una, self.snd_max);
            let blocks: Vec<(Seq, Seq)> = seg.sack_blocks.iter().copied().filter(|&(l, r)| una <= l && l < r && r <= max).collect();
            newly_sacked_bytes = self.scoreboard.on_sack(&blocks, &mut self.delivered);
        }
        if let Some(rack) = self.rack.as_mut() {
            rack.on_delivered(&self.delivered, now, &rtt);
        }
        let info = AckInfo {
            ack,
            acked_bytes,
            duplicate,
            dup_acks: self.duplicate_acks_in_row,
            newly_sacked_bytes,
            snd_max: self.snd_max,
            mss: self.data_mss(),
        };
        let outcome = self.recovery.on_ack(&mut self.scoreboard, &info);
        if outcome.recovery_ended {
            if let Some(cc) = self.cc.as_mut() {
                cc.on_recovery_end(now);
            }
            let (cwnd_bytes, ssthresh_bytes) = (self.cwnd(), self.ssthresh());
            self.event(Event::Recovery { entered: false, cwnd_bytes, ssthresh_bytes });
        }
        let mut reduced = outcome.congestion_event;
        if outcome.congestion_event {
            self.congestion_event(now);
        }
        if self.rack.is_some() {
            let recoveries = self.stats.recoveries;
            self.rack_detect_loss(now);
            reduced |= self.stats.recoveries > recoveries;
            // §7.4: the ACK of a probe that resent data means the probe repaired a loss.
            let tlp = self.rack.as_ref().and_then(|r| r.tlp_end.map(|end| (end, r.tlp_is_retrans)));
            if let Some((end, is_retrans)) = tlp {
                if ack >= end {
                    if let Some(rack) = self.rack.as_mut() {
                        rack.tlp_end = None;
                    }
                    if is_retrans && !reduced && !self.recovery.in_recovery() {
                        let in_flight = self.snd_max.since(self.snd_una);
                        if let Some(cc) = self.cc.as_mut() {
                            cc.on_congestion_event(now, in_flight, &rtt);
                        }
                        self.note_cc_phase(false);
                    }
                }
            }
        }
        if acked_bytes > 0 {
            let acked = Acked {
                ack,
                acked_bytes,
                bytes_in_flight: self.bytes_in_flight(),
                in_recovery: self.recovery.in_recovery(),
                snd_max: self.snd_max,
                rtt_sample: self.ack_rtt_sample,
            };
            if let Some(cc) = self.cc.as_mut() {
                cc.on_ack(now, acked, &rtt);
            }
            self.note_cc_phase(true);
            self.arm_tail_loss_probe(now);
        }
        self.expand_send_buffer();
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

    fn on_new_ack(&mut self, ack: Seq, timestamp: Option<Timestamp>, now: Instant) {
        let covers_retransmission = self.snd_una < self.retransmitted_below;
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
        if self.recovery.uses_scoreboard() {
            self.scoreboard.on_cumulative_ack(ack, &mut self.delivered);
        }
        let cwnd_bytes = Some(self.cwnd()).filter(|&w| w != usize::MAX);
        self.event(Event::NewAck { ack: ack.0, at: now, cwnd_bytes });
        let mut samples = self.sampler.on_ack(ack, now);
        // RFC 7323 §4.1: the echoed timestamp times an ACK of retransmitted data, where
        // Karn's rule (RFC 6298 §3) leaves the sampler without a sample.
        let mut from_timestamp = false;
        if let (true, true, true, Some(ts)) = (self.ts_ok, samples.is_empty(), covers_retransmission, timestamp) {
            let ticks = self.ts_clock(now).wrapping_sub(ts.tsecr);
            if ts.tsecr != 0 && (ticks as i32) >= 0 {
                // Below the clock's resolution counts as one tick (0 would drag SRTT to zero).
                samples.push(Duration::from_millis(ticks.max(1) as u64));
                from_timestamp = true;
            }
        }
        for rtt in &samples {
            self.rto.on_sample(*rtt);
            self.stats.rtt_samples += 1;
            self.rtt_latest = Some(*rtt);
            if !from_timestamp {
                // Timestamps tick in whole milliseconds: too coarse for the minimum.
                self.rtt_min = Some(self.rtt_min.map_or(*rtt, |m| m.min(*rtt)));
                self.ack_rtt_sample = Some(self.ack_rtt_sample.map_or(*rtt, |m| m.min(*rtt)));
            }
            let event = Event::RttSample {
                rtt_us: rtt.as_micros() as u64,
                srtt_us: self.rto.srtt().unwrap_or_default().as_micros() as u64,
                rttvar_us: self.rto.rttvar().as_micros() as u64,
                rto_us: self.rto.rto().as_micros() as u64,
            };
            self.event(event);
        }
        if from_timestamp {
            self.stats.timestamp_rtt_samples += 1;
        }
        self.timers.stop(Timer::Retransmission);
        self.timers.stop(Timer::Persist);
        if self.snd_max > self.snd_una {
            self.arm_retx_timer(now);
        } else {
            self.timers.stop(Timer::TailLossProbe);
            self.timers.stop(Timer::RackReorder);
        }
    }

    /// RFC 2018 receiver: keeps data beyond a hole (inside our window) for reassembly.
    fn store_out_of_order(&mut self, seq: Seq, data: &[u8]) {
        let window_end = self.rcv_nxt.add(self.receive_window());
        if self.assembler.insert(seq, data, window_end) {
            self.stats.out_of_order_segments += 1;
        }
    }

    /// Moves out-of-order data that the in-order stream has reached into the receive buffer.
    fn drain_out_of_order(&mut self) {
        let taken = self.assembler.drain_into(self.rcv_nxt, &mut self.recv_buf, self.config.recv_buffer_bytes);
        self.rcv_nxt = self.rcv_nxt.add(taken);
        self.stats.bytes_received += taken as u64;
    }

    fn on_data_and_fin(&mut self, seg: &Segment, now: Instant) {
        let mut fin_in_order = seg.fin && seg.seq.add(seg.payload.len()) == self.rcv_nxt;
        let accepts_data = matches!(self.state, State::Established | State::FinWait1 | State::FinWait2);
        let reassembles = self.sack_ok || self.config.sack;
        if accepts_data && reassembles && seg.fin && seg.payload.is_empty() && seg.seq > self.rcv_nxt {
            self.assembler.set_fin(seg.seq);
            self.ack_pending = true;
            return;
        }
        if accepts_data && !seg.payload.is_empty() {
            if seg.seq > self.rcv_nxt {
                // Out of order: the bare stack keeps no reassembly queue; a duplicate ACK asks again.
                if reassembles {
                    self.store_out_of_order(seg.seq, &seg.payload);
                    let fin_at = seg.seq.add(seg.payload.len());
                    if seg.fin && self.assembler.holds(seg.seq, fin_at) {
                        self.assembler.set_fin(fin_at);
                    }
                }
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
            if !fin_in_order && !self.assembler.is_empty() {
                self.drain_out_of_order();
            }
            if !fin_in_order && self.assembler.fin() == Some(self.rcv_nxt) {
                fin_in_order = true;
            }
        }
        if fin_in_order && !self.fin_received {
            self.fin_received = true;
            self.rcv_nxt = self.rcv_nxt.add(1);
            self.ack_pending = true;
            self.assembler.clear();
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
                self.delivered.clear();
                self.on_new_ack(ack, seg.timestamp, now);
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
