"""Plots as the tables count: error bars are the tables' 95 % CIs, CDFs count timed-out GETs
(Kaplan–Meier) and say where they stop short (report/figures.py)."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from report_fixtures import RunBuilder

from congestlab.report.cells import build_table
from congestlab.report.data import RunData
from congestlab.report.figures import Source, _cdf, kaplan_meier_cdf, render_plot

STYLE = {"color": "#0072B2", "marker": "o", "ls": "-", "hatch": ""}
REPORT = {
    "metrics": {"delay": {"kind": "request", "column": "delay_ms", "unit": "ms", "where": {"outcome": "complete"}},
                "thr": {"kind": "request", "column": "nrt_throughput_mbps", "unit": "Mbit/s",
                        "where": {"outcome": "complete"}}},
    "tables": [{"id": "t", "title": "t", "metrics": ["delay"], "rows": "level"}],
    "plots": [{"id": "bars", "title": "delay", "type": "bar", "metrics": ["delay"], "x": "level"},
              {"id": "cdf", "title": "delay CDF", "type": "cdf", "metrics": ["delay"], "facets": "level"}],
}


def _run(tmp_path, cells: dict[str, list]) -> RunData:
    """cells[level]: per repetition a delay in ms (complete) or "timeout" (at 0.45 s)."""
    b = RunBuilder("ipv6", ["level"], REPORT)
    for level, reps in cells.items():
        for rep, d in enumerate(reps, start=1):
            row = dict(server="lean", client="c", family="v4", file_kib=320, timeout_s=0.45, start_ts=1000.0 + rep)
            if d == "timeout":
                row.update(outcome="timed_out", ok=False, error="timed out after 0.45 s")
            else:
                row.update(outcome="complete", ok=True, delay_ms=d, nrt_throughput_mbps=320 * 8.192 / d)
            b.add("request", {"level": level}, rep, **row)
    return RunData(b.write(tmp_path / "run"))


def test_bar_error_bars_are_the_tables_95_percent_ci_not_the_sd(tmp_path):
    data = _run(tmp_path, {"C1B": [300.0, 305.0, 298.0]})
    table = build_table(data, data.report.tables[0])
    assert "mean 301.00 [292.04, 309.96]" in table.rows[0][1][0]  # half-width 8.96; the sd is 3.6
    fig = render_plot(data.report.plots[0], [Source("", data)], tmp_path / "plots")
    assert "95 % CI" in fig.caption and "± sd" not in fig.caption
    fig_, ax = plt.subplots()
    from congestlab.report.figures import _bars

    _bars(ax, data, data.report.metrics["delay"], "delay", {}, data.report.plots[0], ["C1B"], 0, 1, STYLE, "x",
          seed=False, censored=[0])
    from matplotlib.container import ErrorbarContainer

    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    (segment,) = bars.lines[2][0].get_segments()
    assert [round(y, 2) for y in segment[:, 1]] == [292.04, 309.96]  # the table's numbers
    plt.close(fig_)


def test_cdf_counts_timed_out_gets_and_says_where_it_stops(tmp_path):
    data = _run(tmp_path, {"C1B": [300.0, "timeout", 305.0, "timeout", 302.0], "C2B": [300.0, 310.0, 305.0]})
    fig_, ax = plt.subplots()
    assert _cdf(ax, data, data.report.metrics["delay"], {"level": "C1B"}, STYLE, "C1B") == 5
    (line, _dots) = ax.get_lines()
    # three of five finished: the estimate stops at 0.6, not at 1 as the finished GETs alone would
    assert math.isclose(line.get_ydata()[-1], 0.6) and math.isclose(max(line.get_ydata()), 0.6)
    assert [t.get_text() for t in ax.texts] == ["stops at 0.60: 2/5 timed out (> 450)"]
    assert "2 timed out" in ax.get_legend_handles_labels()[1][0]
    ax.clear()
    assert _cdf(ax, data, data.report.metrics["delay"], {"level": "C2B"}, STYLE, "C2B") == 3
    assert math.isclose(ax.get_lines()[0].get_ydata()[-1], 1.0) and not ax.texts
    plt.close(fig_)
    fig = render_plot(data.report.plots[1], [Source("", data)], tmp_path / "plots")
    assert "Kaplan–Meier" in fig.caption and "stops at 0.60" in fig.svg.read_text()


def test_kaplan_meier_cdf_for_a_throughput_starts_above_zero():
    # a timed-out GET's throughput is below size / timeout (left-censored)
    xs, ys = kaplan_meier_cdf([(30.0, True, 1), (5.0, False, 2), (31.0, True, 3), (5.0, False, 4), (32.0, True, 5)],
                              "left")
    assert xs[0] == 5.0 and math.isclose(ys[0], 0.4) and math.isclose(ys[-1], 1.0)
    # without censoring, the estimate is the empirical CDF
    xs, ys = kaplan_meier_cdf([(3.0, True, 1), (1.0, True, 2), (2.0, True, 3), (4.0, True, 4)], "right")
    assert [round(y, 9) for y in ys] == [0.0, 0.25, 0.5, 0.75, 1.0] and xs == [1.0, 1.0, 2.0, 3.0, 4.0]
