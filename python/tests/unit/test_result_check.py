"""The results CSVs checked when read (stored/result_check.py, rundir/result_columns.py): they
are derived data, so `report`, `distance`, `plot` and `compare` refuse a table whose cells,
rows or keys cannot be right, in one line naming the file and the line, with how to rebuild
it (exit 7). On a copy of the stored ipv6 quick run (manifest and results only)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
from cli_call import call_cli

from congestlab.errors import RunDirError
from congestlab.rundir.result_columns import COLUMN_TYPES, MS, PCT
from congestlab.stored import StoredRun
from congestlab.stored.result_check import value_problem

DATA = Path(__file__).parent / "data"
POINT = "main.server-apache.level-C1B"


def _damaged(tmp_path: Path, damage) -> Path:
    run = tmp_path / "run"
    shutil.copytree(DATA / "ipv6-quick-run", run)
    path = run / "results" / "request.csv"
    if damage == "cut":  # the fifth line ends after its fifth field
        lines = path.read_text().splitlines(keepends=True)
        lines[4] = ",".join(lines[4].split(",")[:5]) + "\n"
        path.write_text("".join(lines))
        return run
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    header = list(rows[0])
    rows = damage(rows)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header + [c for c in rows[0] if c not in header])
        writer.writeheader()
        writer.writerows(rows)
    return run


def _delay(value: str):
    def damage(rows):
        rows[2]["delay_ms"] = value
        return rows
    return damage


CASES = {
    # the issue's: n = 6 from 3 repetitions, a negative, an infinite and a 300-digit delay
    "a row repeated four times": (lambda rows: rows + [rows[0]] * 3, ":10: the same measurement as line 2"),
    "a negative delay": (_delay("-30.5"), ":4: delay_ms '-30.5': below 0 (a time in ms)"),
    "an infinite delay": (_delay("inf"), ":4: delay_ms 'inf': not a finite number"),
    "a 300-digit delay": (_delay("9" * 300), ":4: delay_ms '9999999999999999999999999999999999999999': beyond 8.64e+07"),
    "a word for a count": (lambda rows: [rows[0] | {"retransmissions": "many"}, *rows[1:]],
                           ":2: retransmissions 'many': not a number"),
    "an unplanned repetition": (lambda rows: [rows[0] | {"repetition": "9"}, *rows[1:]],
                                ":2: repetition 9 of point main.server-apache.level-C0 was not planned"),
    "another point's axis label": (lambda rows: [rows[0] | {"level": "C3B"}, *rows[1:]],
                                   ":2: level 'C3B' is not point main.server-apache.level-C0's ('C0')"),
    "an unknown column": (lambda rows: [r | {"extra": "1"} for r in rows],
                          ":1: column 'extra' is not a column of results/request.csv"),
    "a row cut short": ("cut", ":5: 24 columns in the header, not as many in this row"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_results_table_is_one_line_for_every_reader(tmp_path, case):
    damage, said = CASES[case]
    run = _damaged(tmp_path, damage)
    sound = tmp_path / "sound"
    shutil.copytree(DATA / "ipv6-quick-run", sound)
    with pytest.raises(RunDirError) as err:
        StoredRun(run).results("request")
    assert f"{run}/results/request.csv{said}" in str(err.value), str(err.value)
    assert str(err.value).endswith(f"; `congestlab analyze {run}` rebuilds the results")
    for argv in (["report", run], ["distance", run], ["plot", run, POINT],
                 ["compare", sound, run, "--out", tmp_path / "cmp"]):
        code, _, stderr = call_cli(*argv)
        assert code == 7 and stderr == f"congestlab: {err.value}\n", (argv, code, stderr)


def test_the_sound_table_reads():
    run = StoredRun(DATA / "ipv6-quick-run")
    assert len(run.results("request")) == 8 and run.measured_runs() == {(p.id, 1) for p in run.points}


def test_column_types():
    assert value_problem("", MS) == "" and value_problem("12.5", MS) == ""
    assert value_problem("nan", MS) == "not a finite number"
    assert value_problem("101", PCT) == "beyond 100 (a percentage)"
    assert value_problem("2.5", COLUMN_TYPES["retransmissions"]) == "not a whole number (a count)"
    assert value_problem("maybe", COLUMN_TYPES["ok"]) == "not True or False"
    assert value_problem("done", COLUMN_TYPES["outcome"]) == "not one of complete, timed_out, invalid"
    assert value_problem("1795450560.5", COLUMN_TYPES["start_ts"]) == ""
    assert value_problem("-12", COLUMN_TYPES["start_ts"]) == "below 0 (a time in epoch s (before 2100))"
    assert value_problem("5e9", COLUMN_TYPES["start_ts"]) == "beyond 4.10244e+09 (a time in epoch s (before 2100))"
