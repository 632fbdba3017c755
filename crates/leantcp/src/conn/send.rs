//! The send path: which segment goes next (new data, a retransmission, a probe, a pure
//! ACK), within the peer's, the congestion and the sender's own windows; pacing; the
//! options each segment carries (SACK blocks, timestamps).
use super::*;

impl Connection {
    /// RFC 2018 §4: the block holding the most recently received segment first, then the
    /// other most recently changed ones; at most as many as fit beside `payload_len`.
    pub(super) fn sack_blocks(&self, payload_len: usize) -> Vec<(Seq, Seq)> {
        if !self.sack_ok || self.assembler.is_empty() {
            return Vec::new();
        }
        let ts = if self.ts_ok { 10 } else { 0 };
        // Options plus payload stay within the MSS the peer announced (RFC 6691).
        let room = self.send_mss.saturating_sub(payload_len);
        let max_blocks =
            (0..=MAX_SACK_BLOCKS).rev().find(|n| (ts + 2 + 8 * n).div_ceil(4) * 4 <= room || *n == 0).unwrap_or(0);
        self.assembler.sack_blocks(max_blocks)
    }

    pub(super) fn make_segment(&self, seq: Seq, syn: bool, fin: bool, rst: bool, payload: Vec<u8>) -> Segment {
        let ack = if self.state == State::SynSent && !rst { None } else { Some(self.rcv_nxt) };
        let window =
            if syn { self.receive_window().min(65535) } else { (self.receive_window() >> self.rcv_wscale).min(65535) };
        let header_bytes = if self.local.is_ipv4() { 40 } else { 60 };
        let offer_scale = syn && (self.state == State::SynSent || self.rcv_wscale > 0 || self.snd_wscale > 0);
        let offering = syn && self.state == State::SynSent;
        // TSval is set in `stamp` at send time.
        let tsecr = if self.ts_ok { self.ts_recent } else { 0 };
        let timestamp =
            (!rst && (self.ts_ok || (offering && self.config.timestamps))).then_some(Timestamp { tsval: 0, tsecr });
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

    pub(super) fn stamp(&self, seg: &mut Segment, now: Instant) {
        if let Some(ts) = seg.timestamp.as_mut() {
            ts.tsval = self.ts_clock(now);
        }
    }

    /// The retransmission timer, unless it (or the persist timer standing in for it) runs.
    pub(super) fn arm_retx_timer(&mut self, now: Instant) {
        if !self.timers.is_armed(Timer::Retransmission) && !self.timers.is_armed(Timer::Persist) {
            self.timers.set(Timer::Retransmission, now + self.rto.rto());
        }
    }

    pub(super) fn persist_interval(&self) -> Duration {
        let factor = 1u32.checked_shl(self.persist_shift).unwrap_or(u32::MAX);
        self.rto.rto().saturating_mul(factor).min(self.config.rto.max)
    }

    pub(super) fn unsent_bytes(&self) -> usize {
        self.send_buf.len().saturating_sub(self.snd_nxt.since(self.buf_seq))
    }

    pub(super) fn record_sent(&mut self, seg: &mut Segment, now: Instant, kind: RetransmitKind) {
        self.stamp(seg, now);
        let start = seg.seq;
        let end = seg.seq + seg.seq_len();
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

    pub(super) fn next_segment(&mut self, now: Instant) -> Option<Segment> {
        match self.state {
            State::Closed => return None,
            // The SYN (or SYN-ACK) is unsent or was rewound; also after close() in SYN-RECEIVED.
            State::SynSent | State::SynReceived | State::FinWait1 if self.snd_nxt == self.iss => {
                let mut seg = self.make_segment(self.iss, true, false, false, Vec::new());
                self.snd_nxt = self.iss + 1;
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

    pub(super) fn next_data_segment(&mut self, now: Instant) -> Option<Segment> {
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
                    let kind =
                        if self.consecutive_timeouts > 0 { RetransmitKind::Timeout } else { RetransmitKind::Recovery };
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
    pub(super) fn pacing_holds(&mut self, now: Instant) -> bool {
        if self.config.pacing_rate_bps.is_none() || now >= self.next_send_at {
            return false;
        }
        self.timers.set(Timer::Pacing, self.next_send_at);
        true
    }

    /// With pacing: the next data segment is due once this one's bytes left at the rate.
    pub(super) fn paced(&mut self, now: Instant, payload_bytes: usize) {
        let Some(rate_bps) = self.config.pacing_rate_bps else { return };
        if payload_bytes == 0 {
            return;
        }
        let wire_ns = (payload_bytes as u64 + 40) * 8 * 1_000_000_000 / rate_bps;
        self.next_send_at = self.next_send_at.max(now) + Duration::from_nanos(wire_ns);
    }

    /// Bytes the sender's own window (`send_window_segments`) still allows in flight.
    pub(super) fn send_window_room(&self, in_flight: usize) -> usize {
        self.config
            .send_window_segments
            .map_or(usize::MAX, |segments| segments.saturating_mul(self.data_mss()).saturating_sub(in_flight))
    }

    /// Sends recorded segment `start..end` again (its FIN too, if it carried one).
    pub(super) fn retransmit(&mut self, start: Seq, end: Seq, kind: RetransmitKind, now: Instant) -> Option<Segment> {
        let fin_seq = self.fin_seq();
        let data_end = if self.fin_queued && end > fin_seq { fin_seq } else { end };
        let len = data_end.since(start).min(self.data_mss());
        self.segment_at(start, len, usize::MAX, kind, now)
    }

    /// RFC 8985 §7.3: one new segment if the peer's window allows, else the last one again.
    pub(super) fn tail_loss_probe(&mut self, now: Instant) -> Option<Segment> {
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
    pub(super) fn segment_at(
        &mut self,
        seq: Seq,
        max_len: usize,
        usable: usize,
        kind: RetransmitKind,
        now: Instant,
    ) -> Option<Segment> {
        let offset = seq.since(self.buf_seq);
        if seq < self.buf_seq || offset > self.send_buf.len() {
            return None; // only the FIN is left and it was sent already
        }
        let available = self.send_buf.len() - offset;
        let len = available.min(max_len).min(usable);
        // The FIN rides on the segment that reaches the end of the data (again after a rewind).
        let fin = self.fin_queued && len == available && seq + len == self.fin_seq();
        if len == 0 && !fin {
            return None;
        }
        let payload = copy_range(&self.send_buf, offset, len);
        let mut seg = self.make_segment(seq, false, fin, false, payload);
        if self.config.push == Push::EndOfData {
            seg.psh = len > 0 && len == available;
        }
        let end = seq + seg.seq_len();
        if end > self.snd_nxt {
            self.snd_nxt = end;
        }
        self.record_sent(&mut seg, now, kind);
        Some(seg)
    }

    pub(super) fn arm_persist_timer(&mut self, now: Instant) {
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
    pub(super) fn arm_tail_loss_probe(&mut self, now: Instant) {
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
}
