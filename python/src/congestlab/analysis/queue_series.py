"""The shaped egresses' queues over time, on the capture's clock (docs/data-format.md,
bottleneck-queue.csv), from the sampler's probes/queue-probe.csv (bpf/clprobe.bpf.c: the HTB
root's backlog and drops at its dequeues, at most one row per interval per queue)."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from congestlab.analysis.probe_clock import ProbeClock, raw_probe_rows, write_series_csv
from congestlab.errors import RunDirError

QUEUE_COLUMNS = ["ts_ns", "link", "backlog_bytes", "backlog_pkts", "max_backlog_bytes", "max_backlog_pkts", "drops",
                 "dequeues"]
RAW_QUEUE_COLUMNS = ["mono_ns", "link", "backlog_bytes", "backlog_pkts", "max_backlog_bytes", "max_backlog_pkts",
                     "drops", "dequeues"]
_COUNTS = RAW_QUEUE_COLUMNS[2:]


def queue_rows(raw_csv: Path, clock: ProbeClock) -> list[dict]:
    """Aligned rows in time order; `drops` counted from each queue's first row (the qdisc's
    counter runs since the testbed made it)."""
    rows = []
    first_drops: dict[str, int] = {}
    for line, raw in raw_probe_rows(raw_csv, RAW_QUEUE_COLUMNS, "queue probe"):
        try:
            row = {"ts_ns": clock.epoch_ns(int(raw["mono_ns"])), "link": raw["link"]} | {
                k: int(raw[k]) for k in _COUNTS}
        except ValueError:
            raise RunDirError(f"{raw_csv}: line {line}: not a number where one belongs") from None
        base = first_drops.setdefault(row["link"], row["drops"])
        row["drops"] = (row["drops"] - base) % 2**32  # the kernel's u32 counter may wrap
        rows.append(row)
    rows.sort(key=lambda r: r["ts_ns"])
    return rows


def write_queue_series(path: Path, rows: Iterable[dict]) -> int:
    return write_series_csv(path, QUEUE_COLUMNS, rows)


def read_queue_series(path: Path) -> list[dict]:
    """bottleneck-queue.csv as typed rows."""
    with open(path, newline="") as fh:
        return [{k: v if k == "link" else int(v) for k, v in row.items()} for row in csv.DictReader(fh)]
