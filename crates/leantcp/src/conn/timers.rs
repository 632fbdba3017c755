//! The timer path: the retransmission timeout (RFC 6298 §5, go-back-N or marking all
//! lost), persist probes, TIME-WAIT, RACK's reorder window and the tail loss probe.
use super::*;

impl Connection {
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

    pub(super) fn on_retransmission_timeout(&mut self, now: Instant) {
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
        let action = if self.snd_una == self.iss {
            RtoAction::GoBackN
        } else {
            self.recovery.on_rto(&mut self.scoreboard, self.snd_max)
        };
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
    pub(super) fn congestion_event(&mut self, now: Instant) {
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
    pub(super) fn rack_detect_loss(&mut self, now: Instant) {
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
}
