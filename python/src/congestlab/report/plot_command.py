"""`congestlab plot RUN_DIR POINT [--rep N] [--family v4|v6] [--server NAME] [--out FILE]`:
any repetition's panels (report/panels.py). A wrong point, server, family or repetition is a
SpecError naming the option (exit 2); a GET without a recorded series is a SeriesError (exit 11);
an --out whose folder is missing, a symbolic link, or a file that cannot be written is a
RunDirError (exit 7, rundir/out_paths.py)."""

from __future__ import annotations

from pathlib import Path

from congestlab.errors import RunDirError, SeriesError, SpecError
from congestlab.report.data import RunData
from congestlab.report.request_series import GetSeries, load_get, series_dir
from congestlab.report.panel_index import panel_path
from congestlab.report.panels import Cell, cells, draw
from congestlab.rundir import check_out_file

FAMILIES = ("v4", "v6")
SUFFIXES = (".png", ".svg")


def _listed(items: list[str], limit: int = 6) -> str:
    return ", ".join(items[:limit]) + (f", … ({len(items)} in all)" if len(items) > limit else "")


def _chosen(data: RunData, point: str, family: str | None, server: str | None) -> list[Cell]:
    ids = [str(p.get("id")) for p in data.points]
    if point not in ids:
        raise SpecError("POINT", f"{point!r} is not a point of {data.run_dir}; its points: {_listed(ids)}")
    if family is not None and family not in FAMILIES:
        raise SpecError("--family", f"{family!r} is not one of {', '.join(FAMILIES)}")
    of_point = [c for c in cells(data) if c.point_id == point]
    if not of_point:
        raise SeriesError(f"{point}: no measured GET in results/request.csv (only a `get` workload's GETs have panels)")
    servers = sorted({c.server for c in of_point})
    if server is None and len(servers) > 1:
        raise SpecError("--server", f"point {point} measured {', '.join(servers)}: name one")
    if server is not None and server not in servers:
        raise SpecError("--server", f"point {point} measured {', '.join(servers)}, not {server!r}")
    server = server or servers[0]
    chosen = [c for c in of_point if c.server == server and (family is None or c.family == family)]
    if not chosen:
        measured = sorted({c.family for c in of_point if c.server == server})
        raise SpecError("--family", f"point {point} measured {server} over {', '.join(measured)} only")
    return chosen


def plot_panels(run_dir: Path, point: str, rep: int | None, family: str | None, server: str | None,
                out: Path | None) -> Path:
    if out is not None and out.suffix.lower() not in SUFFIXES:
        raise SpecError("--out", f"{out}: give a .png or .svg file")
    if out is not None:  # its folder there, no link (rundir/out_paths.py); checked before anything is drawn
        check_out_file(out)
    data = RunData(Path(run_dir))
    chosen = _chosen(data, point, family, server)
    picked: list[tuple[str, dict]] = []
    if rep is not None:
        reps = sorted({r["repetition"] for c in chosen for r in c.rows}, key=float)
        if str(rep) not in reps:
            raise SpecError("--rep", f"point {point} has no GET in repetition {rep}; its repetitions: {_listed(reps)}")
        picked = [(f"{c.family} r{rep}", r) for c in chosen for r in c.rows if r["repetition"] == str(rep)]
    else:
        for c in chosen:
            same = c.median is not None and c.median is c.slowest
            picked += [(f"{c.family} {h}", r) for h, r in (("median" if not same else "median = slowest", c.median),
                                                             ("slowest", None if same else c.slowest)) if r is not None]
    if not picked:
        raise SeriesError(f"{point}: no GET with a known delay to draw (every one invalid)")
    columns: list[tuple[str, GetSeries]] = []
    missing = []
    for heading, row in picked:
        got = load_get(data.run_dir, row)
        if got is None:
            missing.append(f"r{row['repetition']} {row['family']} port {row.get('client_port') or '?'}")
        else:
            columns.append((heading, got))
    if not columns:
        where = series_dir(data.run_dir, point, picked[0][1]["repetition"]).relative_to(data.run_dir)
        raise SeriesError(f"{where}: no segment trace of the GET ({'; '.join(missing)}); `congestlab analyze "
                          f"{data.run_dir}` writes them (a run from before series has none)")
    if out is None:
        out = panel_path(data.run_dir, chosen[0]) if rep is None and len(chosen) == 1 else (
            panel_path(data.run_dir, chosen[0]).with_name(
                f"{point}-{chosen[0].server}" + (f"-{family}" if family else "") + (f"-r{rep}" if rep else "") + ".png"))
    title = f"{point} · {chosen[0].server}" + (f" · not in the capture: {', '.join(missing)}" if missing else "")
    try:
        return draw(columns, title, out)
    except OSError as err:  # the file system refused (full, read-only): where it goes, not what it draws
        raise RunDirError(f"{out}: cannot be written: {err.strerror or err}") from None
