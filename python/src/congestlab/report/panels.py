"""Why a GET took as long as it did: per cell (a point's GETs to one server over one family),
the panels of its median and its slowest repetition, on one time axis (ms since each GET's
first segment, the same scale in both columns):

1. time-sequence graph (tcptrace's): data segments sent (retransmissions in red), the
   client's cumulative ACK, its receive window's right edge, SACK blocks (for an HTTP/3 GET:
   response stream bytes, the client's ACK ranges above its contiguous ACK, its
   MAX_STREAM_DATA; no line when the capture holds none);
2. the window: the capture's bytes in flight, and the server's cwnd, ssthresh and in-flight
   when its own view was recorded (ngtcp2's qlog for HTTP/3: no ssthresh);
3. RTT: the capture's samples (Karn's rule) and the server's smoothed RTT;
4. the bottleneck queues: backlog (packets) per shaped egress and their drops.

RTOs (the server's own record) are dashed lines across every panel. Series come from
report/request_series.py; a panel without its data says so instead of drawing nothing.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from congestlab.report.data import RunData
from congestlab.report.figures import PALETTE, SVG_METADATA
from congestlab.report.request_series import GetSeries, load_get
from congestlab.rundir import open_out_file
from congestlab.stats.outcomes import COMPLETE, TIMED_OUT

ROWS = ("time-sequence", "window", "RTT", "queue")
KIB = 1024.0


@dataclass
class Cell:
    """A point's GETs to one server over one family, and the two of them the panels show."""

    point_id: str
    server: str
    family: str
    axes: dict
    rows: list[dict]           # every GET of the cell (results/request.csv rows)
    median: dict | None        # the GET of the median repetition (lower median), by delay
    slowest: dict | None

    @property
    def key(self) -> str:
        return f"{self.point_id}-{self.server}-{self.family}"

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.+-]", "_", self.key)

    @property
    def title(self) -> str:
        where = ", ".join(f"{k} {v}" for k, v in self.axes.items() if v not in ("", None) and k != "server")
        return f"{self.server} · {self.family}" + (f" · {where}" if where else "")


def _slowness(row: dict) -> float:
    """A complete GET by its delay; a timed-out one is slower than every complete one."""
    if row.get("outcome") == TIMED_OUT:
        return math.inf
    try:
        return float(row.get("delay_ms") or "nan")
    except ValueError:
        return math.nan


def pick(rows: list[dict]) -> tuple[dict | None, dict | None]:
    """(median, slowest) among the GETs with a known ranking: complete ones by delay, timed
    out ones after them (ties by repetition); an invalid GET is left out (its delay is not
    trusted). With an even count the median is the lower one, a GET that ran."""
    ranked = [r for r in rows if r.get("outcome") in (COMPLETE, TIMED_OUT) and not math.isnan(_slowness(r))]
    if not ranked:
        return None, None
    ranked.sort(key=lambda r: (_slowness(r), _rep_number(r)))
    return ranked[(len(ranked) - 1) // 2], ranked[-1]


def _rep_number(row: dict) -> float:
    try:
        return float(row.get("repetition") or 0)
    except ValueError:
        return 0.0


def cells(data: RunData) -> list[Cell]:
    """The run's cells in the manifest's point order, each with its median and slowest GET."""
    grouped: dict[tuple[str, str, str], list[dict]] = {}
    for row in data.rows("request") if "request" in data.kinds_present() else []:
        grouped.setdefault((row.get("point_id", ""), row.get("server", ""), row.get("family", "")), []).append(row)
    order = {p.get("id"): i for i, p in enumerate(data.points)}
    axes = {p.get("id"): p.get("axes") or {} for p in data.points}
    out = []
    for (point, server, family), rows in sorted(grouped.items(), key=lambda kv: (order.get(kv[0][0], 1e9), kv[0])):
        median, slowest = pick(rows)
        out.append(Cell(point, server, family, axes.get(point, {}), rows, median, slowest))
    return out


def shown(cell: Cell) -> list[dict]:
    """The GETs a cell's panels show: median and slowest, once when they are the same GET."""
    picked = [r for r in (cell.median, cell.slowest) if r is not None]
    return picked[:1] if len(picked) == 2 and picked[0] is picked[1] else picked


def draw(columns: list[tuple[str, GetSeries]], title: str, out: Path, dpi: int = 80) -> Path:
    """The panels (`figure`) written as PNG or SVG by `out`'s suffix; never through a
    symbolic link at `out` (rundir/out_paths.py open_out_file)."""
    fig = figure(columns, title)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        svg = out.suffix.lower() == ".svg"
        with open_out_file(out) as fh:
            fig.savefig(fh, format="svg" if svg else "png", dpi=dpi, metadata=SVG_METADATA if svg else None)
    finally:
        plt.close(fig)
    return out


def figure(columns: list[tuple[str, GetSeries]], title: str):
    """One figure: a column per GET (heading, series), the four panels stacked, every axis
    sharing one time scale (ms since each GET's first segment) so the columns compare."""
    ncols = len(columns)
    fig, axes = plt.subplots(len(ROWS), ncols, figsize=(4.6 * ncols + 0.6, 7.4), sharex=True, sharey="row",
                             squeeze=False, gridspec_kw={"height_ratios": [1.6, 1, 0.8, 0.8]})
    notes: list[str] = []
    for c, (heading, got) in enumerate(columns):
        col = axes[:, c]
        _time_sequence(col[0], got)
        _window(col[1], got)
        _rtt(col[2], got)
        _queue(col[3], got)
        for ax in col:
            for t in got.sender.rto_t_ms if got.sender is not None else ():
                ax.axvline(t, color="black", ls="--", lw=0.8)
            ax.grid(alpha=0.3, lw=0.5)
        col[0].set_title(f"{heading}: {got.label}", fontsize=9)
        col[-1].set_xlabel("ms since the GET's first segment")
        notes += got.notes
    for ax, label in zip(axes[:, 0], ("sequence (KiB)", "KiB", "RTT (ms)", "backlog (packets)")):
        ax.set_ylabel(label)
    end = max(got.trace.end_ms for _, got in columns)
    axes[0, 0].set_xlim(0, end * 1.02 if end > 0 else 1)
    for row in axes:  # one legend per row, of every column's entries (fewer artists to draw)
        seen: dict[str, object] = {}
        for ax in row:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(lab, h)
        if seen:
            row[0].legend(list(seen.values()), list(seen), fontsize=6.5, loc="upper left", frameon=False, ncol=2)
    for ax in axes.flat:
        ax.yaxis.set_major_locator(MaxNLocator(4))
        ax.xaxis.set_major_locator(MaxNLocator(6))
    fig.suptitle(title, fontsize=10)
    notes = _unique(notes)
    bottom = 0.06 + 0.022 * len(notes)
    if notes:
        fig.text(0.01, 0.005, "\n".join(notes), fontsize=7, va="bottom", color="#444444")
    fig.subplots_adjust(left=0.11 if ncols == 1 else 0.07, right=0.99, top=0.92, bottom=bottom + 0.03,
                        hspace=0.12, wspace=0.06)
    return fig


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _time_sequence(ax, got: GetSeries) -> None:
    tr = got.trace
    new, retx = ~tr.data_retx, tr.data_retx
    ax.vlines(tr.data_t_ms[new], tr.data_lo[new] / KIB, tr.data_hi[new] / KIB, color=PALETTE[0], lw=1.2,
              label="data sent")
    if retx.any():
        ax.vlines(tr.data_t_ms[retx], tr.data_lo[retx] / KIB, tr.data_hi[retx] / KIB, color=PALETTE[3], lw=2.2,
                  label=f"retransmitted ({int(retx.sum())})")
        ax.plot(tr.data_t_ms[retx], tr.data_hi[retx] / KIB, ls="none", marker="x", ms=3.5, color=PALETTE[3])
    if len(tr.ack_t_ms):
        ax.step(tr.ack_t_ms, tr.ack_off / KIB, where="post", color=PALETTE[2], lw=1.0, label="ACKed")
        if not got.quic or (tr.rwnd_edge > tr.ack_off).any():  # QUIC's: 0 without MAX_STREAM_DATA
            ax.step(tr.ack_t_ms, tr.rwnd_edge / KIB, where="post", color=PALETTE[1], lw=0.9, ls="-",
                    label="MAX_STREAM_DATA" if got.quic else "receive window")
    if len(tr.sack_t_ms):
        ax.vlines(tr.sack_t_ms, tr.sack_lo / KIB, tr.sack_hi / KIB, color=PALETTE[4], lw=2.6, alpha=0.7,
                  label="ACK ranges" if got.quic else "SACK blocks")
    top = max(float(tr.data_hi.max()) if len(tr.data_hi) else 0.0, float(tr.ack_off.max()) if len(tr.ack_off) else 0)
    ax.set_ylim(0, top / KIB * 1.08 + 1)  # the receive window's edge may sit far above the file


def _window(ax, got: GetSeries) -> None:
    tr = got.trace
    ax.step(tr.flight_t_ms, tr.flight_bytes / KIB, where="post", color="#777777", lw=0.9,
            label="in flight (capture)")
    s = got.sender
    if s is None:
        _absent(ax, got.sender_absent)
        return
    if np.isfinite(s.cwnd_bytes).any():
        ax.step(s.t_ms, s.cwnd_bytes / KIB, where="post", color=PALETTE[0], lw=1.2, label=f"cwnd ({s.source})")
    if np.isfinite(s.ssthresh_bytes).any():
        ax.step(s.t_ms, s.ssthresh_bytes / KIB, where="post", color=PALETTE[1], lw=1.0, ls="--", label="ssthresh")
    if np.isfinite(s.in_flight_bytes).any():
        ax.step(s.t_ms, s.in_flight_bytes / KIB, where="post", color=PALETTE[2], lw=0.8, label="in flight (server)")
    if len(s.retx_t_ms):
        ax.plot(s.retx_t_ms, np.zeros_like(s.retx_t_ms), ls="none", marker="|", ms=8, color=PALETTE[3],
                label=s.retx_label)


def _rtt(ax, got: GetSeries) -> None:
    tr = got.trace
    if len(tr.rtt_t_ms):
        ax.plot(tr.rtt_t_ms, tr.rtt_ms, ls="none", marker=".", ms=3, color=PALETTE[0], label="RTT sample (capture)")
    s = got.sender
    if s is not None and np.isfinite(s.srtt_ms).any():
        ax.step(s.t_ms, s.srtt_ms, where="post", color=PALETTE[1], lw=1.0, label=f"srtt ({s.source})")
    if not len(tr.rtt_t_ms) and (s is None or not np.isfinite(s.srtt_ms).any()):
        _absent(ax, "no RTT sample")


def _queue(ax, got: GetSeries) -> None:
    if not got.queues:
        _absent(ax, "queue not recorded" if any("queue" in n for n in got.notes) else "queues idle in this GET")
        return
    for i, q in enumerate(got.queues):
        colour = PALETTE[(i + 5) % len(PALETTE)] if i else PALETTE[0]
        ax.step(q.t_ms, q.max_backlog_pkts, where="post", color=colour, lw=1.0, label=q.link)
        if len(q.drop_t_ms):
            ax.plot(q.drop_t_ms, q.max_backlog_pkts[np.isin(q.t_ms, q.drop_t_ms)], ls="none", marker="v", ms=4,
                    color=PALETTE[3])
    dropped = [f"{q.link}: {q.drops_in_window} dropped" for q in got.queues if q.drops_in_window]
    if dropped:
        ax.text(0.99, 0.95, "\n".join(dropped), transform=ax.transAxes, ha="right", va="top", fontsize=7,
                color=PALETTE[3])
    ax.set_ylim(bottom=0)


def _absent(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=8, color="#777777")


def cell_figure(run_dir: Path, cell: Cell, out: Path, dpi: int = 80) -> Path | None:
    """The cell's panels (median and slowest GET) to `out`; None when neither has a series."""
    columns = []
    for heading, row in (("median", cell.median), ("slowest", cell.slowest)):
        if row is None or any(row is r for _, r, _ in columns):
            continue
        got = load_get(run_dir, row)
        if got is not None:
            columns.append((heading if cell.median is not cell.slowest else "median = slowest", row, got))
    if not columns:
        return None
    n = len(cell.rows)
    delays = [d for d in (_slowness(r) for r in cell.rows) if math.isfinite(d)]
    spread = f"; median of {len(delays)} delays {statistics.median(delays):.0f} ms" if delays else ""
    return draw([(h, g) for h, _, g in columns], f"{cell.title} ({n} GETs{spread})", out, dpi)
