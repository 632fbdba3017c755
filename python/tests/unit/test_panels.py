"""Per-cell panels (report/panels.py, request_series.py, panel_index.py), `congestlab plot` and the
FIFO drops / CPU busy columns (report/cell_testbed.py), on synthetic series in the formats
docs/data-format.md gives (series_fixtures.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from congestlab.report import build_report
from congestlab.report.data import RunData
from congestlab.report.request_series import load_get
from congestlab.report.panels import cells, figure, pick
from series_fixtures import panels_run
from cli_call import call_cli

DATA = Path(__file__).parent / "data"
# apache v4: five repetitions, the median is r4 (40 ms), the slowest r2 (90 ms, a loss)
DELAYS = {("apache", "v4"): [50.0, 90.0, 30.0, 40.0, 35.0], ("apache", "v6"): [60.0, None, 45.0, 55.0, 65.0],
          ("lean", "v4"): [700.0, 650.0, 720.0, 690.0, 1700.0]}
LOST = {(2, "v4"), (5, "v4")}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return panels_run(tmp_path_factory.mktemp("panels") / "run", DELAYS, LOST)


def _cell(run, server, family):
    return next(c for c in cells(RunData(run)) if c.server == server and c.family == family)


def test_median_and_slowest_repetition(run):
    apache4 = _cell(run, "apache", "v4")
    assert (apache4.median["repetition"], apache4.slowest["repetition"]) == ("4", "2")
    # a timed-out GET is slower than every complete one; the median of four known + one
    # timed out is the third: 60 ms (r1)
    apache6 = _cell(run, "apache", "v6")
    assert (apache6.median["repetition"], apache6.slowest["repetition"]) == ("1", "2")
    lean = _cell(run, "lean", "v4")
    assert (lean.median["repetition"], lean.slowest["repetition"]) == ("1", "5")


def test_pick_takes_the_lower_median_and_leaves_invalid_gets_out():
    rows = [{"repetition": str(i), "outcome": "complete", "delay_ms": str(d)} for i, d in enumerate([10, 40, 20, 30], 1)]
    rows.append({"repetition": "5", "outcome": "invalid", "delay_ms": "", "error": "short body"})
    median, slowest = pick(rows)
    assert median["delay_ms"] == "20" and slowest["delay_ms"] == "40"
    assert pick([{"repetition": "1", "outcome": "invalid"}]) == (None, None)
    only = pick([rows[0]])
    assert only[0] is only[1]


def test_series_of_a_get_with_the_servers_view_and_the_queue(run):
    cell = _cell(run, "apache", "v4")
    got = load_get(run, cell.slowest)
    assert got.notes == []
    assert int(got.trace.data_retx.sum()) == 1 and len(got.trace.sack_t_ms) > 0
    assert got.trace.end_ms == pytest.approx(90.0 - 10.0, abs=0.01)  # series_fixtures: the last ACK 10 ms before the delay ends
    # only this connection's probe events (the file holds v6's too), and the RTO from the loss state
    assert got.sender is not None and len(got.sender.retx_t_ms) == 1 and len(got.sender.rto_t_ms) == 1
    assert got.sender.t_ms.min() >= 0 and got.sender.t_ms.max() <= got.trace.end_ms
    queues = {q.link: q for q in got.queues}
    r1 = queues["r1/eth0"]
    assert r1.t_ms[0] <= 0 < r1.t_ms[1] and r1.t_ms[-1] <= got.trace.end_ms + 1
    assert r1.drops_in_window == sum(r1.drops_new) == 1  # one drop every 50 ms, an 80 ms window from 0
    assert "s0/p-r1" in queues
    # the v6 GET starts 1 s later: s0's three rows (0-10 ms) end before it and are left out
    v6 = load_get(run, _cell(run, "apache", "v6").median)
    assert [q.link for q in v6.queues] == ["r1/eth0"]


def test_missing_server_and_queue_files_leave_a_note(tmp_path):
    bare = panels_run(tmp_path / "bare", {("apache", "v4"): [50.0]}, probe=False, queue=False)
    got = load_get(bare, _cell(bare, "apache", "v4").median)
    assert got.sender is None and got.queues == []
    assert any("tcp_probe.csv" in n for n in got.notes) and any("bottleneck-queue.csv" in n for n in got.notes)
    fig = figure([("median", got)], "t")
    texts = [t.get_text() for t in fig.texts] + [t.get_text() for ax in fig.axes for t in ax.texts]
    assert "cwnd not recorded" in texts and "queue not recorded" in texts
    assert any("bottleneck-queue.csv" in t for t in texts)


def test_panels_share_one_time_axis(run):
    cell = _cell(run, "lean", "v4")
    median, slowest = load_get(run, cell.median), load_get(run, cell.slowest)
    fig = figure([("median", median), ("slowest", slowest)], "t")
    axes = fig.axes
    assert len(axes) == 8
    assert all(axes[0].get_shared_x_axes().joined(axes[0], ax) for ax in axes)
    low, high = axes[0].get_xlim()
    assert low == 0 and high >= slowest.trace.end_ms > 1.5 * median.trace.end_ms


def test_report_panels_for_every_cell_and_testbed_columns(tmp_path):
    run = panels_run(tmp_path / "run", DELAYS, LOST)
    plain = build_report(run)
    html = plain.html_path.read_text()
    # not drawn by default: each cell gives its command
    assert html.count("congestlab plot ") == 3 and "<img src=\"plots/panels" not in html
    report = build_report(run, panels=True)
    html = report.html_path.read_text()
    for cell in cells(RunData(run)):
        assert (run / "plots" / "panels" / f"{cell.slug}.png").stat().st_size > 5000
        assert f'id="panels-{cell.slug}"' in html and f'src="plots/panels/{cell.slug}.png"' in html
        assert f'href="#panels-{cell.slug}"' in html  # linked under the tables whose cells it is behind
    md = report.markdown_path.read_text()
    assert "| apache · v4 · level C1B | 5 | r4: 40.0 ms, 0 retransmitted | r2: 90.0 ms, 1 retransmitted | 41 / 21 |" in md
    # the default table (delay by server and level, families as columns) with drops and CPU once per row:
    # apache's five repetitions had 11, 21, 31, 41, 51 drops (r1/eth0 + s0/p-r1) and 41-45 % CPU
    row = next(line for line in md.splitlines() if line.startswith("| apache |") and "testbed" not in line
               and "±" in line)
    cells_ = [c.strip() for c in row.strip("|").split("|")]
    assert cells_[-2:] == ["31 ± 16", "43 ± 2"]
    assert "testbed FIFO drops" in md and "FIFO drops: packets the shaped egresses" in md


def test_a_panel_drawn_before_is_shown_until_the_series_change(tmp_path):
    run = panels_run(tmp_path / "run", {("apache", "v4"): [50.0, 60.0]})
    code, _, err = call_cli("plot", str(run), "main.server-apache.level-C1B")
    assert code == 0, err
    png = run / "plots" / "panels" / "main.server-apache.level-C1B-apache-v4.png"
    drawn = png.stat().st_mtime_ns
    html = build_report(run).html_path.read_text()
    assert 'src="plots/panels/main.server-apache.level-C1B-apache-v4.png"' in html
    build_report(run, panels=True)
    assert png.stat().st_mtime_ns == drawn  # fresh: not drawn again
    series = run / "results" / "series" / "main.server-apache.level-C1B" / "r1"
    (series / "touched.csv").write_text("")  # as an analysis rewriting the directory would
    os.utime(series, ns=(drawn + 10**9, drawn + 10**9))
    html = build_report(run).html_path.read_text()
    assert 'src="plots/panels/' not in html and "congestlab plot " in html


def test_plot_command_outcomes(run, tmp_path):
    point = "main.server-apache.level-C1B"
    out = tmp_path / "one.svg"
    code, _, err = call_cli("plot", str(run), point, "--rep", "2", "--family", "v4", "--out", str(out))
    assert code == 0, err
    assert out.read_text().startswith("<?xml") and "retransmitted (1)" in out.read_text()
    code, _, err = call_cli("plot", str(run), point, "--rep", "3", "--out", str(tmp_path / "both.png"))
    assert code == 0 and (tmp_path / "both.png").read_bytes()[:4] == b"\x89PNG"
    cases = [
        (["plot", str(run), "main.server-nginx.level-C1B"], 2, "is not a point of"),
        (["plot", str(run), point, "--rep", "9"], 2, "no GET in repetition 9"),
        (["plot", str(run), point, "--family", "v5"], 2, "--family"),
        (["plot", str(run), point, "--server", "lean"], 2, "--server"),
        (["plot", str(run), point, "--out", str(tmp_path / "x.pdf")], 2, ".png or .svg"),
        (["plot", str(tmp_path / "nowhere"), point], 7, "no such directory"),
    ]
    for argv, want, text in cases:
        code, _, err = call_cli(*argv)
        assert code == want and text in err, (argv, code, err)
        assert len(err.strip().splitlines()) == 1 and err.startswith("congestlab: "), err


def test_plot_without_series_is_its_own_exit_code(tmp_path):
    run = panels_run(tmp_path / "run", {("apache", "v4"): [50.0]})
    series = run / "results" / "series"
    for f in series.rglob("apache-v4-*.csv"):
        f.unlink()
    code, _, err = call_cli("plot", str(run), "main.server-apache.level-C1B")
    assert code == 11 and "no segment trace" in err and "congestlab analyze" in err, err
    assert len(err.strip().splitlines()) == 1



def test_a_run_without_series_says_how_to_get_them(tmp_path):
    run = panels_run(tmp_path / "run", {("apache", "v4"): [50.0]})
    for f in (run / "results" / "series").rglob("apache-v4-*.csv"):
        f.unlink()
    report = build_report(run, panels=True)
    assert not (run / "plots" / "panels").exists()
    html = report.html_path.read_text()
    assert "no series of these GETs" in html and "congestlab plot " not in html


def test_a_real_segment_trace(tmp_path):
    """data/series-sample: the slowest v6 GET of Apache at C4B in a real `reproduce ipv6 --quick`
    (156.5 ms, no loss), as the analysis wrote it; placed in a run of its own."""
    run = panels_run(tmp_path / "run", {("apache", "v6"): [156.454]}, probe=False, queue=False)
    d = run / "results" / "series" / "main.server-apache.level-C1B" / "r1"
    for f in d.glob("*.csv"):
        f.unlink()
    shutil.copy(DATA / "series-sample" / "apache-v6-44394.csv", d / "apache-v6-40011.csv")
    got = load_get(run, _cell(run, "apache", "v6").median)
    tr = got.trace
    assert len(tr.data_t_ms) == 230 and not tr.data_retx.any() and len(tr.sack_t_ms) == 0
    assert tr.data_hi.max() == 327_930  # the 320 KiB file and the headers, from sequence offset 1
    assert 156 < tr.end_ms < 250 and len(tr.rtt_t_ms) > 50  # the FIN exchange after the delay and tr.rtt_ms.max() < 40
    assert (tr.rwnd_edge >= tr.ack_off).all()
    fig = figure([("slowest", got)], "real")
    assert fig.axes[0].get_xlim()[1] >= tr.end_ms


def test_the_lean_servers_log_gives_its_rtos(tmp_path):
    from series_fixtures import write_probe

    run = panels_run(tmp_path / "run", {("lean", "v4"): [1400.0]}, lost_in={(1, "v4")}, probe=False)
    row = _cell(run, "lean", "v4").median
    t0 = int(float(row["start_ts"]) * 1e9)
    port = int(row["client_port"])
    events = [{"ts_ns": t0 + 30_000_000, "event": "ack", "family": "v4", "client_port": port, "snd_cwnd_bytes": 8688,
               "srtt_us": 20000, "in_flight_bytes": 4344},
              {"ts_ns": t0 + 1_100_000_000, "event": "rto", "family": "v4", "client_port": port, "rto_us": 1_000_000},
              {"ts_ns": t0 + 1_100_000_100, "event": "retransmit", "family": "v4", "client_port": port,
               "seq_off": 7241, "len_bytes": 1448},
              {"ts_ns": t0 + 50_000_000, "event": "ack", "family": "v6", "client_port": port, "snd_cwnd_bytes": 1}]
    write_probe(run / "results" / "series" / "main.server-lean.level-C1B" / "r1" / "lean-lean_log.csv", events)
    got = load_get(run, row)
    assert got.sender.source == "leanweb's log" and not any("lean_log" in n for n in got.notes)
    assert list(got.sender.rto_t_ms) == [1100.0] and list(got.sender.retx_seq) == [7241.0]
    assert list(got.sender.cwnd_bytes) == [8688.0]  # the v6 connection's event on the same port left out
    fig = figure([("median", got)], "lean")
    dashed = [ln for ax in fig.axes for ln in ax.lines if ln.get_linestyle() == "--" and ln.get_xdata()[0] == 1100.0]
    assert len(dashed) == 4  # the RTO across all four panels
