"""`congestlab report --check` and `congestlab compare` on hand-made run directories."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

from report_fixtures import RunBuilder, get_outcome_row, realistic_ipv6, request_run, tcplab_run

from congestlab.report.run_comparison import adjust, compare_runs, difference
from congestlab.report.data import EngineCell
from congestlab.stats import Cell


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "congestlab.cli", *args], capture_output=True, text=True,
                          timeout=300)


def test_report_check_fails_only_on_properties(tmp_path):
    # tcp-lab's r/n sharing is a property; the fixture's 4-session point breaks it
    lab = tcplab_run().write(tmp_path / "lab")
    done = _cli("report", str(lab), "--check")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "property 19f does not hold" in done.stderr
    assert _cli("report", str(lab)).returncode == 0  # without --check a failing claim is only shown
    # ipv6's claims are all empirical: claims that do not hold never fail --check
    ipv6 = realistic_ipv6(repetitions=10).write(tmp_path / "ipv6")  # enough to decide some claims
    done = _cli("report", str(ipv6), "--check")
    assert done.returncode == 0, done.stderr
    assert "does not hold" in done.stdout


def test_compare_two_runs(tmp_path):
    a = realistic_ipv6(repetitions=3, seed=1).write(tmp_path / "a")
    b = realistic_ipv6(repetitions=3, seed=2).write(tmp_path / "b")
    done = _cli("compare", str(a), str(b), "--out", str(tmp_path / "cmp"))
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "| C1B | v4 | Throughput (NRT) (Mbit/s) |" in md and "Δ b" in md
    html = (tmp_path / "cmp" / "compare.html").read_text()
    assert html.count('<table class="data"') == 7 and html.count("<img ") == 4  # bar, bar, 2 cdfs overlaid


THR_REPORT = {"metrics": {"thr": {"kind": "request", "column": "nrt_throughput_mbps"}},
              "tables": [{"id": "t", "title": "t", "metrics": ["thr"], "rows": "level"}]}


def _line(md: str, level: str) -> str:
    (line,) = [x for x in md.splitlines() if x.startswith(f"| {level} |")]
    return line


def test_compare_marks_a_real_change_and_not_noise(tmp_path):
    base = {("apache", "C1B", "v4"): [30.0, 30.5, 29.8], ("apache", "C2B", "v4"): [30.0, 30.5, 29.8]}
    moved = {("apache", "C1B", "v4"): [20.0, 20.4, 19.9], ("apache", "C2B", "v4"): [30.2, 29.9, 30.4]}
    a = request_run(base, report=THR_REPORT).write(tmp_path / "a")
    b = request_run(moved, report=THR_REPORT).write(tmp_path / "b")
    done = compare_runs([a, b], tmp_path / "out")
    md = done.markdown_path.read_text()
    # cells as the claims show them; the effect as a median ratio with its 95 % CI
    assert "| C1B | thr | 30.10 [29.20, 31.00] (n=3) | 20.10 [19.44, 20.76] (n=3) | -33.2 % [-35.1 %, -31.3 %] |" in _line(md, "C1B")
    assert "| **yes** (n=3/3, censored 0/0, invalid 0/0; censored log-normal p=" in _line(md, "C1B")
    assert "| +0.2 % [-2.1 %, +2.6 %] | no (" in _line(md, "C2B")
    assert done.console["cells"][1] == [["2", "1"]]
    (listed,) = done.console["differences beyond the spread"][1]
    assert listed[:5] == ["t", "C1B", "thr", "b", "-33.2 % [-35.1 %, -31.3 %]"] and "censored 0/0" in listed[5]


def test_compare_adjusts_over_the_cells_compared(tmp_path):
    # alone, C1B's small shift has p = 0.03 (its CI excludes 0); beside a second cell Holm doubles it
    base = {("apache", "C1B", "v4"): [30.0, 30.5, 29.8, 30.3], ("apache", "C2B", "v4"): [30.0, 30.5, 29.8, 30.3]}
    moved = {("apache", "C1B", "v4"): [29.0, 29.9, 29.2, 29.6], ("apache", "C2B", "v4"): [30.0, 30.5, 29.8, 30.3]}

    def one(values):
        return {k: v for k, v in values.items() if k[1] == "C1B"}

    alone = compare_runs([request_run(one(base), report=THR_REPORT).write(tmp_path / "a1"),
                          request_run(one(moved), report=THR_REPORT).write(tmp_path / "b1")], tmp_path / "o1")
    assert "**yes**" in _line(alone.markdown_path.read_text(), "C1B")
    both = compare_runs([request_run(base, report=THR_REPORT).write(tmp_path / "a2"),
                         request_run(moved, report=THR_REPORT).write(tmp_path / "b2")], tmp_path / "o2")
    line = _line(both.markdown_path.read_text(), "C1B")
    assert "| no (" in line and "Holm p=0.0588" in line


CENSORED_DELAY = {"metrics": {"delay": {"kind": "request", "column": "delay_ms", "unit": "ms",
                                        "where": {"outcome": "complete"}}},
                  "tables": [{"id": "t", "title": "t", "metrics": ["delay"], "rows": "server"}]}


def _outcome_run(path, delays: list) -> Path:
    """One cell of GETs: a delay in ms (complete), "timeout" (at 0.45 s) or "invalid" per repetition."""
    b = RunBuilder("ipv6", ["server"], CENSORED_DELAY)
    for rep, d in enumerate(delays, start=1):
        b.add("request", {"server": "lean"}, rep, server="lean", **get_outcome_row(d, rep))
    return b.write(path)


def test_compare_counts_timed_out_gets_and_excludes_invalid_ones(tmp_path):
    # twelve GETs of the base: with timed-out GETs Gehan's rank test decides (stats/median_ratio.py),
    # which needs more of them than the log-normal model's extrapolation into the timeouts did
    base = _outcome_run(tmp_path / "a", [300.0, 310.0, 305.0, 295.0, 300.0, 302.0, 298.0, 304.0, 301.0, 299.0,
                                         303.0, 297.0])
    # the completed GETs as fast as before: without the timed-out ones nothing would differ
    lost = _outcome_run(tmp_path / "b", [300.0, "timeout", 305.0, "timeout", "timeout", "timeout", 302.0, "timeout", 298.0, "invalid"])
    line = _line(compare_runs([base, lost], tmp_path / "out").markdown_path.read_text(), "lean")
    assert "(n=9, 5 censored > 450, 1 invalid)" in line
    assert "**yes** (n=12/9, censored 0/5, invalid 0/1;" in line
    # the same run against itself: censored on both sides, no difference
    same = _outcome_run(tmp_path / "c", [300.0, "timeout", 305.0, "timeout", "timeout", "timeout", 302.0, "timeout", 298.0, "invalid"])
    line = _line(compare_runs([lost, same], tmp_path / "out2").markdown_path.read_text(), "lean")
    assert "| +0.0 % [" in line and "| no (n=9/9, censored 5/5, invalid 1/1;" in line


def test_compare_with_one_repetition_cannot_tell():
    def one(v):
        return EngineCell(Cell.of([v]), frozenset(), True)

    d = difference(one(30.0), one(15.0))
    assert d.exceeds == "–" and "too few completed samples" in d.how()
    adjust([d])
    assert d.exceeds == "–"
    assert difference(EngineCell(Cell.of([]), frozenset(), True), one(15.0)).how() == "a run has no samples"


def test_compare_of_values_at_or_below_zero_by_permutation():
    def cell(vs):
        return EngineCell(Cell(tuple(vs), ("complete",) * len(vs), (None,) * len(vs), (math.nan,) * len(vs)),
                          frozenset(), False)

    apart = difference(cell([0.0, -1.0, -2.0, 0.0, -1.0]), cell([5.0, 6.0, 7.0, 5.0, 6.0]))
    near = difference(cell([0.0, -1.0, -2.0, 0.0, -1.0]), cell([0.0, -1.0, -1.0, 0.0, -2.0]))
    adjust([apart, near])
    assert apart.exceeds == "yes" and "Gehan permutation" in apart.how() and apart.delta() == "–"
    assert near.exceeds == "no"


def _one_line_error(done: subprocess.CompletedProcess, code: int) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


def test_compare_refuses_runs_of_different_studies_unless_forced(tmp_path):
    ipv6 = realistic_ipv6(repetitions=10).write(tmp_path / "ipv6")  # enough to decide some claims
    lab = tcplab_run().write(tmp_path / "lab")
    err = _one_line_error(_cli("compare", str(ipv6), str(lab), "--out", str(tmp_path / "cmp")), 7)
    assert "another study" in err and "--force" in err
    assert not (tmp_path / "cmp").exists()  # nothing half-written
    done = _cli("compare", str(ipv6), str(lab), "--out", str(tmp_path / "cmp"), "--force")
    assert "another study" in done.stdout + done.stderr


def test_compare_refuses_runs_without_a_cell_in_common(tmp_path):
    report = {"metrics": {"thr": {"kind": "request", "column": "nrt_throughput_mbps"}},
              "tables": [{"id": "t", "title": "t", "metrics": ["thr"], "rows": "level"}]}
    a = request_run({("apache", "C1B", "v4"): [30.0, 30.5, 29.8]}, report=report).write(tmp_path / "a")
    b = request_run({("apache", "C5B", "v4"): [20.0, 20.4, 19.9]}, report=report).write(tmp_path / "b")
    err = _one_line_error(_cli("compare", str(a), str(b), "--out", str(tmp_path / "cmp")), 7)
    assert "no cell with samples in common" in err


def test_compare_of_a_variant_names_the_fields_that_differ(tmp_path):
    import json

    a = realistic_ipv6(repetitions=3, seed=1).write(tmp_path / "a")
    b = realistic_ipv6(repetitions=3, seed=2).write(tmp_path / "b")
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["spec"]["name"] = "ipv6-seed-fit"
    manifest["spec"]["warmup_s"] = 61
    manifest["environment"]["git_revision"] = "0123abc"
    (b / "manifest.json").write_text(json.dumps(manifest))
    done = _cli("compare", str(a), str(b), "--out", str(tmp_path / "cmp"))
    assert done.returncode == 0, done.stderr
    assert "variant of a: spec fields differ: warmup_s" in done.stdout
    assert "git revision differs" in done.stdout
    assert "warmup_s" in (tmp_path / "cmp" / "compare.md").read_text()


def test_compare_out_that_is_a_file_is_one_line(tmp_path):
    a = realistic_ipv6(repetitions=3, seed=1).write(tmp_path / "a")
    b = realistic_ipv6(repetitions=3, seed=2).write(tmp_path / "b")
    (tmp_path / "taken").write_text("x")
    err = _one_line_error(_cli("compare", str(a), str(b), "--out", str(tmp_path / "taken")), 7)
    assert "not a directory" in err
