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
//! Timers live in one table ([`crate::timer::TimerTable`]). This file holds the connection's
//! state, its constructors and the owner's API; the paths are beside it: `send.rs`
//! (`poll_transmit`), `receive.rs` (`handle_segment`), `timers.rs` (`handle_timeout`); the
//! settings are in `crate::config`, the events in `crate::event`, reassembly in `crate::assembler`.
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
use crate::seq::Seq;
use crate::syncookie::{CookieOptions, SynCookies};
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
        None => (Seq(0), Some(seg.seq + seg.seq_len())),
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
            buf_seq: iss + 1,
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
        conn.rcv_nxt = syn.seq + 1;
        conn.apply_syn_options(syn);
        conn.snd_wnd = syn.window as usize;
        conn.snd_wl1 = syn.seq;
        Some(conn)
    }

    /// The SYN-ACK answering `syn` with the cookie `iss` (RFC 4987 §3.6), built without
    /// keeping a connection: the caller sends it and forgets the SYN.
    pub fn cookie_syn_ack(
        syn: &Segment,
        options: &CookieOptions,
        config: TcpConfig,
        iss: Seq,
        now: Instant,
    ) -> Option<Segment> {
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
    pub fn accept_cookie(
        ack: &Segment,
        options: &CookieOptions,
        config: TcpConfig,
        iss: Seq,
        now: Instant,
    ) -> Option<Self> {
        let syn = SynCookies::rebuilt_syn(ack, options);
        let mut conn = Connection::accept(&syn, config, iss)?;
        conn.snd_nxt = iss + 1;
        conn.snd_max = iss + 1;
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
        self.recovery =
            self.config.recovery.build(mss, self.sack_ok, self.config.limited_transmit, self.config.rack_tlp);
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
        self.snd_una != self.iss
            && matches!(
                self.state,
                State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck
            )
    }

    /// Free space in the send buffer.
    pub fn send_capacity(&self) -> usize {
        if self.fin_queued
            || !matches!(self.state, State::SynSent | State::SynReceived | State::Established | State::CloseWait)
        {
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
        self.buf_seq + self.send_buf.len()
    }

    fn fin_acked(&self) -> bool {
        self.fin_queued && self.snd_una == self.fin_seq() + 1
    }

    /// RFC 7323 §5.4: a 1 ms timestamp clock, offset per connection (§7.1).
    fn ts_clock(&self, now: Instant) -> u32 {
        ((now.as_micros() / 1000) as u32).wrapping_add(self.iss.0.rotate_left(16))
    }
}

mod receive;
mod send;
mod timers;

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
