"""The report's "Inside the GETs" section: per cell its median and slowest GET (repetition,
delay, retransmissions, FIFO drops and CPU busy of that repetition), and the cell's panels
(report/panels.py) as plots/panels/<cell>.png.

Drawing every cell's panels costs more than the rest of a report (docs/reports.md, "Panels":
the measurement), so `congestlab report` draws them only with `--panels`; panels already drawn
(by `--panels` or `congestlab plot RUN POINT`, which writes the same file) and newer than the
cell's series are shown without drawing again; otherwise the cell gives the command that draws them.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from congestlab.report.cell_testbed import RepInfo
from congestlab.report.data import RunData, matches
from congestlab.report.request_series import series_dir, trace_file
from congestlab.report.panels import Cell, cell_figure, cells

PANELS_DIR = ("plots", "panels")


def panel_path(run_dir: Path, cell: Cell) -> Path:
    return Path(run_dir).joinpath(*PANELS_DIR, f"{cell.slug}.png")


def _fresh(png: Path, run_dir: Path, cell: Cell) -> bool:
    """Drawn after the analysis last wrote the series of the cell's shown repetitions."""
    if not png.is_file():
        return False
    drawn = png.stat().st_mtime
    for row in (cell.median, cell.slowest):
        d = series_dir(run_dir, cell.point_id, row["repetition"]) if row else None
        if d is not None and d.is_dir() and d.stat().st_mtime > drawn:
            return False
    return True


def _get(row: dict | None, reps: RepInfo) -> dict | None:
    if row is None:
        return None
    drops, cpu = reps.get(row["point_id"], row["repetition"])
    delay = row.get("delay_ms")
    return {"repetition": row["repetition"], "outcome": row.get("outcome", ""),
            "delay": f"{float(delay):.1f} ms" if delay else row.get("outcome", "").replace("_", " "),
            "retransmissions": row.get("retransmissions") or "–",
            "drops": "–" if drops is None else f"{drops:.0f}", "cpu": "–" if cpu is None else f"{cpu:.0f} %"}


def plot_command(run_dir: Path, cell: Cell) -> str:
    return " ".join(["congestlab", "plot", shlex.quote(str(run_dir)), shlex.quote(cell.point_id), "--server",
                     shlex.quote(cell.server), "--family", shlex.quote(cell.family)])


def panel_context(data: RunData, run_dir: Path, reps: RepInfo, draw: bool) -> list[dict]:
    """One entry per cell; draws the missing or stale panels when `draw`."""
    out = []
    for cell in cells(data):
        png = panel_path(run_dir, cell)
        if draw and (cell.median or cell.slowest) and not _fresh(png, run_dir, cell):
            cell_figure(run_dir, cell, png)
        fresh = _fresh(png, run_dir, cell)
        recorded = any(_has_trace(run_dir, row) for row in (cell.median, cell.slowest) if row)
        out.append({"id": cell.slug, "title": cell.title, "point": cell.point_id, "server": cell.server,
                    "family": cell.family, "gets": len(cell.rows),
                    "median": _get(cell.median, reps), "slowest": _get(cell.slowest, reps),
                    "same": cell.median is not None and cell.median is cell.slowest,
                    "png_href": os.path.relpath(png, run_dir) if fresh else None,
                    "command": plot_command(run_dir, cell) if recorded else "", "rows": cell.rows})
    return out


def _has_trace(run_dir: Path, row: dict) -> bool:
    try:
        port, start = int(float(row.get("client_port") or "")), float(row.get("start_ts") or 0) or None
    except ValueError:
        return False
    return trace_file(run_dir, row["point_id"], row["repetition"], row["server"], row["family"], port, start) is not None


def table_cells(view, panels: list[dict]) -> list[dict]:
    """The panel entries behind a table of request metrics, in the table's order (row, group)."""
    spec = view.spec
    groups = list(dict.fromkeys(c.group for c in view.columns if c.metric not in ("fifo_drops", "cpu_busy_pct")))
    found: dict[str, dict] = {}
    for r, _ in view.rows:
        for g in groups:
            sel = {**spec.where, spec.rows: r}
            if spec.columns:
                sel[spec.columns] = g
            for entry in panels:
                if entry["id"] not in found and any(matches(row, sel) for row in entry["rows"]):
                    found[entry["id"]] = {"id": entry["id"], "label": " ".join(str(x) for x in (r, g) if x is not None),
                                          "drawn": entry["png_href"] is not None}
    return list(found.values())
