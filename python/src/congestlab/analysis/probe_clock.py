"""The samplers' clock on the capture's clock.

The BPF programs stamp events with bpf_ktime_get_ns (CLOCK_MONOTONIC); tcpdump stamps
packets with the real-time clock. The sampler (bpf/clprobe.c) reads both clocks back to back
when it starts and when it stops (clock.jsonl); an event's epoch time is its monotonic time
plus the offset, interpolated linearly between the two readings, so a real-time clock slewed
by NTP during the repetition stays aligned. `drift_ns` (stop offset − start offset) is what
the interpolation corrected; a step of the real-time clock shows there too.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from congestlab.capture.probes import read_clock
from congestlab.errors import RunDirError


@dataclass(frozen=True)
class ProbeClock:
    start_mono_ns: int
    start_offset_ns: int  # realtime − monotonic at start
    stop_mono_ns: int
    stop_offset_ns: int
    read_ns: int  # the longer of the two back-to-back readings: their uncertainty

    @property
    def drift_ns(self) -> int:
        return self.stop_offset_ns - self.start_offset_ns

    def epoch_ns(self, mono_ns: int) -> int:
        """The capture-clock time of a monotonic timestamp."""
        span = self.stop_mono_ns - self.start_mono_ns
        if span <= 0:
            return mono_ns + self.start_offset_ns
        return mono_ns + self.start_offset_ns + (mono_ns - self.start_mono_ns) * self.drift_ns // span


def probe_clock(path: Path) -> ProbeClock:
    """The clock mapping of one repetition's sampler; without a stop line, the start offset alone."""
    start, stop = read_clock(path)
    end = stop or start
    return ProbeClock(start_mono_ns=int(start["monotonic_ns"]),
                      start_offset_ns=int(start["realtime_ns"]) - int(start["monotonic_ns"]),
                      stop_mono_ns=int(end["monotonic_ns"]),
                      stop_offset_ns=int(end["realtime_ns"]) - int(end["monotonic_ns"]),
                      read_ns=max(int(start.get("read_ns", 0)), int(end.get("read_ns", 0))))


def raw_probe_rows(raw_csv: Path, columns: list[str], what: str) -> Iterator[tuple[int, dict]]:
    """(line number, row) of one of the sampler's raw recordings, checked to have its columns;
    a line cut short by the sampler's end is skipped."""
    try:
        fh = open(raw_csv, newline="")
    except OSError as err:
        raise RunDirError(f"{raw_csv}: unreadable ({err.strerror})") from None
    with fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != columns:
            raise RunDirError(f"{raw_csv}: not a {what} recording (columns {reader.fieldnames})")
        for raw in reader:
            if None in raw or None in raw.values():
                continue
            yield reader.line_num, raw


def write_series_csv(path: Path, columns: list[str], rows: Iterable[dict]) -> int:
    """`columns` of each row as CSV (a missing or None value is empty); returns the rows written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(columns)
        for row in rows:
            out.writerow(["" if row.get(k) is None else row[k] for k in columns])
            count += 1
    return count
