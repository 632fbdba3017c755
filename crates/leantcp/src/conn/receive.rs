//! The receive path (RFC 9293 §3.10.7): acceptability, ACK processing (RTT samples,
//! the scoreboard, congestion control, loss recovery), data and FIN in order or through
//! the assembler, and the SYN-SENT handshake.
use super::*;

impl Connection {
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
        let is_duplicate = ack == self.snd_una
            && seg.payload.is_empty()
            && !seg.fin
            && self.snd_max > self.snd_una
            && self.snd_wnd == window_before;
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
    pub(super) fn update_ts_recent(&mut self, seg: &Segment) {
        if let (true, Some(ts)) = (self.ts_ok, seg.timestamp) {
            if seg.seq <= self.last_ack_sent && ts.tsval.wrapping_sub(self.ts_recent) as i32 >= 0 {
                self.ts_recent = ts.tsval;
            }
        }
    }

    /// Loss detection and window growth for one ACK (scoreboard policies; go-back-N only
    /// tells the controller about new data).
    pub(super) fn after_ack(&mut self, seg: &Segment, ack: Seq, acked_bytes: usize, duplicate: bool, now: Instant) {
        let rtt = self.rtt_stats();
        if !self.recovery.uses_scoreboard() {
            if acked_bytes > 0 {
                let acked = Acked {
                    ack,
                    acked_bytes,
                    bytes_in_flight: self.bytes_in_flight(),
                    in_recovery: false,
                    snd_max: self.snd_max,
                    rtt_sample: self.ack_rtt_sample,
                };
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
            let blocks: Vec<(Seq, Seq)> =
                seg.sack_blocks.iter().copied().filter(|&(l, r)| una <= l && l < r && r <= max).collect();
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

    pub(super) fn acceptable(&self, seg: &Segment) -> bool {
        let window = self.receive_window();
        let in_window = |s: Seq| self.rcv_nxt <= s && s.diff(self.rcv_nxt) < window as i64;
        match (seg.seq_len(), window) {
            (0, 0) => seg.seq == self.rcv_nxt,
            (0, _) => in_window(seg.seq),
            // Zero window: the ACK is processed, the data is refused (trimmed to nothing).
            (_, 0) => seg.seq == self.rcv_nxt,
            (len, _) => in_window(seg.seq) || in_window(seg.seq + (len - 1)),
        }
    }

    pub(super) fn on_new_ack(&mut self, ack: Seq, timestamp: Option<Timestamp>, now: Instant) {
        let covers_retransmission = self.snd_una < self.retransmitted_below;
        self.snd_una = ack;
        if self.snd_nxt < self.snd_una {
            self.snd_nxt = self.snd_una;
        }
        let data_acked = ack.since(self.buf_seq).min(self.send_buf.len());
        self.send_buf.drain(..data_acked);
        self.buf_seq = self.buf_seq + data_acked;
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
    pub(super) fn store_out_of_order(&mut self, seq: Seq, data: &[u8]) {
        let window_end = self.rcv_nxt + self.receive_window();
        if self.assembler.insert(seq, data, window_end) {
            self.stats.out_of_order_segments += 1;
        }
    }

    /// Moves out-of-order data that the in-order stream has reached into the receive buffer.
    pub(super) fn drain_out_of_order(&mut self) {
        let taken = self.assembler.drain_into(self.rcv_nxt, &mut self.recv_buf, self.config.recv_buffer_bytes);
        self.rcv_nxt = self.rcv_nxt + taken;
        self.stats.bytes_received += taken as u64;
    }

    pub(super) fn on_data_and_fin(&mut self, seg: &Segment, now: Instant) {
        let mut fin_in_order = seg.fin && seg.seq + seg.payload.len() == self.rcv_nxt;
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
                    let fin_at = seg.seq + seg.payload.len();
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
            self.rcv_nxt = self.rcv_nxt + take;
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
            self.rcv_nxt = self.rcv_nxt + 1;
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

    pub(super) fn on_segment_syn_sent(&mut self, seg: &Segment, now: Instant) {
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
        self.rcv_nxt = seg.seq + 1;
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
