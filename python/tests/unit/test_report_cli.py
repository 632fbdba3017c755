"""`congestlab report --check` and `congestlab compare` on hand-made run directories."""

from __future__ import annotations

import subprocess
import sys

from report_fixtures import realistic_ipv6, request_run, tcplab_run

from congestlab.report.compare import compare_runs, difference
from congestlab.report.data import Stats


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


def test_compare_marks_a_real_change_and_not_noise(tmp_path):
    base = {("apache", "C1B", "v4"): [30.0, 30.5, 29.8], ("apache", "C2B", "v4"): [30.0, 30.5, 29.8]}
    moved = {("apache", "C1B", "v4"): [20.0, 20.4, 19.9], ("apache", "C2B", "v4"): [30.2, 29.9, 30.4]}
    report = {"metrics": {"thr": {"kind": "request", "column": "nrt_throughput_mbps"}},
              "tables": [{"id": "t", "title": "t", "metrics": ["thr"], "rows": "level"}]}
    a = request_run(base, report=report).write(tmp_path / "a")
    b = request_run(moved, report=report).write(tmp_path / "b")
    md = compare_runs([a, b], tmp_path / "out").markdown_path.read_text()
    assert "| C1B | thr | 30.10 ± 0.36 (3) | 20.10 ± 0.26 (3) | -10.00 | **yes**" in md
    assert "| C2B | thr | 30.10 ± 0.36 (3) | 30.17 ± 0.25 (3) | +0.07 | no" in md


def test_difference_rule_with_one_repetition():
    assert difference(Stats([30.0]), Stats([25.0]))[0] == "no"  # ratio 0.83, inside 1.5
    assert difference(Stats([30.0]), Stats([15.0]))[0] == "yes"
    assert difference(Stats([]), Stats([15.0]))[0] == "–"


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
