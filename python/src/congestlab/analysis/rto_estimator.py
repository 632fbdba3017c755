"""leantcp's RTO estimator and RTT sampler (crates/leantcp/src/rto.rs), step for step, for
the offline replay (analysis/rto_replay.py).

The estimator does the same double-precision operations in the same order as rto.rs, so a
replay with the live settings reproduces leanweb's logged RTO to the microsecond. The
sampler keeps rto.rs's rules (`all`, `one`, `some`, Karn) over unwrapped sequence numbers,
and carries with each timed segment what the caller attached when it was sent.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from fractions import Fraction

# Seed 000 Table 5 (α, β); unit tests check it against Weight::alpha_beta in rto.rs.
WEIGHTS: dict[str, tuple[Fraction, Fraction]] = {
    "W1": (Fraction(1, 8), Fraction(1, 4)),
    "W2": (Fraction(1, 8), Fraction(3, 8)),
    "W3": (Fraction(1, 8), Fraction(1, 8)),
    "W4": (Fraction(3, 16), Fraction(1, 4)),
    "W5": (Fraction(3, 16), Fraction(3, 8)),
    "W6": (Fraction(3, 16), Fraction(1, 8)),
    "W7": (Fraction(1, 16), Fraction(1, 4)),
    "W8": (Fraction(1, 16), Fraction(3, 8)),
    "W9": (Fraction(1, 16), Fraction(1, 8)),
}
SAMPLINGS = ("all", "one", "some")


def weight_of(alpha: float, beta: float) -> str | None:
    """The Table 5 name of (α, β), None for other weights."""
    for name, (a, b) in WEIGHTS.items():
        if float(a) == alpha and float(b) == beta:
            return name
    return None


def duration_us_as_f64(us: int) -> float:
    """Duration::from_micros(us).as_secs_f64() * 1e6, as Rust computes it (secs + nanos / 1e9)."""
    secs, rest_us = divmod(int(us), 1_000_000)
    return (float(secs) + float(rest_us * 1000) / 1e9) * 1e6


def _round_half_away(x: float) -> int:
    """f64::round for x >= 0 (Python's round() rounds half to even)."""
    floor = math.floor(x)
    return int(floor) + (1 if x - floor >= 0.5 else 0)


@dataclass(frozen=True)
class RtoSettings:
    alpha: float
    beta: float
    k: float = 4.0
    g_us: int = 250
    initial_us: int = 1_000_000
    min_us: int = 1_000_000
    max_us: int = 60_000_000


class Estimator:
    """RtoEstimator of rto.rs without backoff (the replay only asks for the RTO after samples)."""

    def __init__(self, settings: RtoSettings):
        self.s = settings
        self.srtt_us: float | None = None
        self.rttvar_us = 0.0
        self._g = duration_us_as_f64(settings.g_us)

    def on_sample(self, rtt_us: int) -> None:
        r = duration_us_as_f64(rtt_us)
        if self.srtt_us is None:
            self.srtt_us = r
            self.rttvar_us = r / 2.0
        else:
            a, b = self.s.alpha, self.s.beta
            self.rttvar_us = (1.0 - b) * self.rttvar_us + b * abs(self.srtt_us - r)
            self.srtt_us = (1.0 - a) * self.srtt_us + a * r

    def unfloored_us(self) -> float | None:
        """SRTT + max(G, K·RTTVAR): no floor, no cap (seed 000 Table 6's RTO)."""
        if self.srtt_us is None:
            return None
        return self.srtt_us + max(self._g, self.s.k * self.rttvar_us)

    def rto_us(self, min_us: int | None = None) -> int:
        """The RTO in force after the last sample, floored and capped, in whole µs as leanweb logs it."""
        unfloored = self.unfloored_us()
        floor_ns = (self.s.min_us if min_us is None else min_us) * 1000
        cap_ns = self.s.max_us * 1000
        if unfloored is None:
            nanos = self.s.initial_us * 1000
        else:
            nanos = min(max(_round_half_away(unfloored * 1000.0), floor_ns), cap_ns)
        return min(max(nanos, floor_ns), cap_ns) // 1000


@dataclass
class _Record:
    start: int
    end: int
    sent_us: int
    retransmitted: bool
    tag: object


class Sampler:
    """RttSampler of rto.rs. `on_ack` returns (rtt µs, sent µs, tag of the timed segment)."""

    def __init__(self, strategy: str):
        if strategy not in SAMPLINGS:
            raise ValueError(f"sampling {strategy!r} is not one of {', '.join(SAMPLINGS)}")
        self.strategy = strategy
        self.records: deque[_Record] = deque()
        self.timed: _Record | None = None
        self.new_data_acks = 0

    def on_send(self, start: int, end: int, now_us: int, retransmission: bool, tag: object = None) -> None:
        def overlaps(a_start: int, a_end: int) -> bool:
            return a_end > start and a_start < end

        if self.strategy == "one":
            if retransmission:
                if self.timed is not None and overlaps(self.timed.start, self.timed.end):
                    self.timed = None
            elif self.timed is None:
                self.timed = _Record(start, end, now_us, False, tag)
            return
        if retransmission:
            for record in self.records:
                if overlaps(record.start, record.end):
                    record.retransmitted = True
        if not self.records or self.records[-1].end < end:
            if self.records and self.records[-1].end > start:
                start = self.records[-1].end
            self.records.append(_Record(start, end, now_us, retransmission, tag))

    def on_retransmit_all(self) -> None:
        self.timed = None
        for record in self.records:
            record.retransmitted = True

    def on_ack(self, ack: int, now_us: int) -> list[tuple[int, int, object]]:
        if self.strategy == "one":
            timed = self.timed
            if timed is not None and timed.end <= ack:
                self.timed = None
                return [(max(0, now_us - timed.sent_us), timed.sent_us, timed.tag)]
            return []
        samples = []
        self.new_data_acks += 1
        newest_clean = None
        while self.records and self.records[0].end <= ack:
            record = self.records.popleft()
            if not record.retransmitted:
                if self.strategy == "all":
                    samples.append((max(0, now_us - record.sent_us), record.sent_us, record.tag))
                newest_clean = record
        if self.strategy == "some" and self.new_data_acks % 2 == 1 and newest_clean is not None:
            samples.append((max(0, now_us - newest_clean.sent_us), newest_clean.sent_us, newest_clean.tag))
        return samples
