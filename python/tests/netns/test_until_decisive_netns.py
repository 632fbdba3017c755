"""`run --until-decisive` on a tiny two-point spec: rounds are added only to the point feeding an
undecided claim, and `--resume` after a kill between rounds (CONGESTLAB_PAUSE_AT=between-rounds)
finishes with every (point, repetition, family) row exactly once."""

from __future__ import annotations

import csv
import json
import os
import signal
import time
from collections import Counter
from importlib import resources
from pathlib import Path

import cli_fork
import pytest
from spine_helpers import namespaces_with, processes_mentioning

pytestmark = pytest.mark.netns

APACHE, LEAN = "main.server-apache", "main.server-lean"

# claim "a" decides at the first look (every delay is within a huge tolerance of 1 ms); claim "l"
# compares the lean cell with itself, so it never decides and the lean point alone goes on
TAIL = """
[[experiments]]
name = "main"
axes = [{ name = "server", fields = ["workloads.get.requests.0.server"], values = ["apache", "lean"] }]

[report.metrics.delay_ms]
kind = "request"
column = "delay_ms"
where = { outcome = "complete" }

[[report.claims]]
id = "a"
title = "Apache answers"
seed = "none: a claim of this test"
rule = "matches"
metric = "delay_ms"
expected = 1.0
tolerance_pct = 1e9
reason = "a band no delay can leave: the claim decides at the first look"
where = { server = "apache" }

[[report.claims]]
id = "l"
title = "lean is slower than itself"
seed = "none: a claim of this test"
rule = "compare"
metric = "delay_ms"
relation = ">"
where = { server = "lean" }
a = { family = "v4" }
b = { family = "v4" }
"""


def _spec(directory: Path) -> Path:
    text = (resources.files("congestlab.spec.presets") / "ipv6.toml").read_text()
    text = text[: text.index("# Table I of seed 001")] + TAIL
    text = text.replace('name = "ipv6"', 'name = "decisive"', 1)
    text = text.replace("warmup_s = 3.0", "warmup_s = 1.0", 1).replace("gap_s = 0.3", "gap_s = 0.1", 1)
    path = directory / "decisive.toml"
    path.write_text(text)
    return path


def _manifest(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


def test_until_decisive_adds_rounds_only_where_undecided_and_resumes(tmp_path):
    spec = _spec(tmp_path)
    run_dir = tmp_path / "run"
    log_path = tmp_path / "first.log"
    proc = cli_fork.start(["run", str(spec), "--out", str(run_dir), "--until-decisive", "--max-repetitions", "4"],
                          log_path, {"CONGESTLAB_PAUSE_AT": "between-rounds"})
    try:
        deadline = time.monotonic() + 100
        while "paused at between-rounds" not in log_path.read_text():
            assert proc.is_alive(), log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "the first look did not come in time"
            time.sleep(0.2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # between rounds, without teardown
        proc.join()
    first = _manifest(run_dir)
    seq = first["sequential"]
    (look,) = seq["looks"]
    assert look["round"] == 3 and look["n"] == {f"{APACHE}": 3, f"{LEAN}": 3}
    assert look["verdicts"] == {"a": "holds", "l": "inconclusive"}
    assert look["next_points"] == [LEAN] and seq["round"] == 4 and 0 < look["level_per_side"] < 0.025
    prefix = first["testbed"]["prefix"]
    assert cli_fork.run(["clean"], tmp_path / "clean.log", 120).returncode == 0

    resumed = cli_fork.run(["run", str(spec), "--resume", str(run_dir)], tmp_path / "resumed.log", 120)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "stopped by max-repetitions" in resumed.stdout, resumed.stdout[-3000:]
    manifest = _manifest(run_dir)
    assert manifest["status"] == "complete", manifest.get("error")
    seq = manifest["sequential"]
    assert [x["round"] for x in seq["looks"]] == [3, 4] and seq["stopped_by"] == "max-repetitions"
    assert seq["looks"][1]["verdicts"] == {"l": "inconclusive"} and seq["looks"][1]["n"][LEAN] == 4
    assert seq["decided"] == {"a": {"verdict": "holds", "round": 3}} and "l" in seq["rounds_needed"]
    reps = {(p.parent.parent.name, p.parent.name) for p in (run_dir / "points").glob("*/r*/rep.json")}
    assert reps == {(APACHE, f"r{r}") for r in (1, 2, 3)} | {(LEAN, f"r{r}") for r in (1, 2, 3, 4)}
    with open(run_dir / "results" / "request.csv") as fh:
        counts = Counter((r["point_id"], r["repetition"], r["family"]) for r in csv.DictReader(fh))
    assert len(counts) == 7 * 2 and set(counts.values()) == {1}, counts
    entry = manifest["resumes"][-1]
    assert namespaces_with(prefix) == [] and namespaces_with(entry["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == []


def test_until_decisive_runs_later_rounds_in_the_same_session(tmp_path):
    # rounds 4 and 5 follow the first look without a resume: each round is a new batch of the same
    # testbed (runner/orchestrator.py _run_all), whose backgrounds' time bounds look ahead in it
    spec = _spec(tmp_path)
    run_dir = tmp_path / "run"
    done = cli_fork.run(["run", str(spec), "--out", str(run_dir), "--until-decisive", "--max-repetitions", "5"],
                        tmp_path / "done.log", 150)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = _manifest(run_dir)
    assert manifest["status"] == "complete", manifest.get("error")
    seq = manifest["sequential"]
    assert [x["round"] for x in seq["looks"]] == [3, 4, 5] and seq["stopped_by"] == "max-repetitions"
    assert seq["looks"][-1]["n"][LEAN] == 5
    reps = {(p.parent.parent.name, p.parent.name) for p in (run_dir / "points").glob("*/r*/rep.json")}
    assert reps == {(APACHE, f"r{r}") for r in (1, 2, 3)} | {(LEAN, f"r{r}") for r in range(1, 6)}
    assert namespaces_with(manifest["testbed"]["prefix"]) == []
    assert processes_mentioning(str(run_dir)) == []
