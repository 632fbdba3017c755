"""A GET's timeout chosen per point from the published delays (spec/request_timeouts.py): the
choice per level (margin, floor, ceiling, no published delay, no level axis), the spec errors
(one line each), and the record in the manifest and --dry-run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from congestlab.runner.manifest import new_manifest
from congestlab.spec.request_timeouts import CEILING, FLOOR, MARGIN, NO_DELAY, NO_LEVEL
from congestlab.spec.loader import parse_spec
from congestlab.spec.sweep import expand
from spec_fixtures import TINY_TOPOLOGY, dry_run, refused

HEAD = 'name = "tmo"\n'
TOPOLOGY = TINY_TOPOLOGY

GET = """
[[workloads]]
name = "get"
kind = "get"
requests = [{ client = "client", server = "apache", families = ["v4"] }]
"""

CHOSEN = GET + """timeout_s = 120
timeout = "from-published"
timeout_margin = 2.5
timeout_min_s = 10
timeout_reason = "covers single GETs around a 3-GET mean"
"""

LEVELS = """
[[levels]]
name = "low"
[[levels]]
name = "mid"
[[levels]]
name = "high"
[[levels]]
name = "unpublished"
[[experiments]]
name = "e"
axes = [{ name = "level", levels = ["low", "mid", "high", "unpublished"] }]
[[experiments]]
name = "flat"
axes = [{ name = "n", fields = ["workloads.get.requests.0.file_kib"], values = [320] }]
[quick]
experiments = ["e"]
set = { "workloads.get.timeout_s" = 45 }
"""

# a delay in ms (E1-like) and one in s (E4-like) at one level: the longer counts, whatever its unit
PUBLISHED = """
published = [
  { experiment = "e", level = "low", delay_ms = 130 },
  { experiment = "e", level = "mid", delay_ms = 20000, nrt_mbps = 0.2 },
  { experiment = "other", level = "mid", delay_s = 16.76 },
  { experiment = "e", level = "high", delay_ms = 41707.67 },
  { experiment = "e", level = "high", delay_s = 60.0 },
]
"""

SPEC = HEAD + PUBLISHED + TOPOLOGY + CHOSEN + LEVELS


def _points(text: str, quick: bool = False) -> dict:
    return {p.id: p for p in expand(parse_spec(text, "x.toml"), quick=quick)}


def test_the_timeout_per_point_is_the_margin_over_the_longest_delay_at_its_level():
    points = _points(SPEC)
    chosen = {pid: (p.study.workload("get").timeout_s, p.timeouts[0]["basis"]) for pid, p in points.items()}
    assert chosen == {
        "e.level-low": (10.0, FLOOR),            # 2.5 x 0.13 s = 0.325 s: the floor
        "e.level-mid": (50.0, MARGIN),           # 2.5 x 20 s (16.76 s of another experiment is shorter)
        "e.level-high": (120.0, CEILING),        # 2.5 x 60 s = 150 s: capped at timeout_s
        "e.level-unpublished": (120.0, NO_DELAY),
        "flat.n-320": (120.0, NO_LEVEL),
    }
    mid = points["e.level-mid"].timeouts[0]
    assert mid["published_delay_s"] == pytest.approx(20.0) and mid["margin"] == 2.5 and mid["min_s"] == 10
    assert mid["published_row"] == {"metric": "delay_ms",
                                     "row": {"experiment": "e", "level": "mid", "delay_ms": 20000, "nrt_mbps": 0.2}}
    assert mid["declared_timeout_s"] == 120 and mid["reason"] == "covers single GETs around a 3-GET mean"
    # the chosen value is an ordinary setting of the point: the analysis and the report read it there
    assert points["e.level-mid"].settings["workloads.get.timeout_s"] == 50.0


def test_the_quick_timeout_stays_the_ceiling():
    points = _points(SPEC, quick=True)
    assert {pid: p.study.workload("get").timeout_s for pid, p in points.items()} == {
        "e.level-low": 10.0, "e.level-mid": 45.0, "e.level-high": 45.0, "e.level-unpublished": 45.0}


def test_a_fixed_timeout_sets_nothing_per_point():
    points = _points(HEAD + PUBLISHED + TOPOLOGY + GET + "timeout_s = 120\n" + LEVELS)
    assert all(p.timeouts == [] and "workloads.get.timeout_s" not in p.settings for p in points.values())
    assert {p.study.workload("get").timeout_s for p in points.values()} == {120}


@pytest.mark.parametrize("change, expected", [
    ('timeout_margin = 2.5\n', 'timeout_margin is only read with timeout = "from-published"'),
    ('timeout = "from-published"\ntimeout_reason = "r"\n', 'needs timeout_margin'),
    ('timeout = "from-published"\ntimeout_margin = 2\n', 'needs timeout_margin (the factor over the longest '
     'published delay) and timeout_reason'),
    ('timeout = "from-published"\ntimeout_margin = 0.5\ntimeout_reason = "r"\n', 'timeout_margin'),
    ('timeout = "from-published"\ntimeout_margin = 2\ntimeout_reason = "r"\ntimeout_min_s = 200\n',
     'timeout_min_s 200 exceeds timeout_s 120'),
    ('timeout = "from-published"\ntimeout_margin = 2\ntimeout_reason = "r"\ntimeout_published = ["delay"]\n',
     "'delay' names no unit"),
    ('timeout = "soon"\n', 'timeout'),
])
def test_bad_timeout_settings_are_one_line(change, expected):
    message = refused(HEAD + PUBLISHED + TOPOLOGY + GET + "timeout_s = 120\n" + change + LEVELS)
    assert expected in message and "workloads" in message


def test_a_variant_turns_the_choice_off_with_an_explicit_fixed():
    points = _points(SPEC + '[set]\n"workloads.get.timeout" = "fixed"\n')
    assert {p.study.workload("get").timeout_s for p in points.values()} == {120}
    assert all(p.timeouts == [] for p in points.values())


def test_from_published_without_any_published_delay_isrefused():
    message = refused(HEAD + 'published = [{ level = "low", nrt_mbps = 1.0 }]\n' + TOPOLOGY + CHOSEN + LEVELS)
    assert message.endswith('workloads.get.timeout: "from-published" but no published row has delay_ms or delay_s '
                            '(give them, or timeout = "fixed")')


def test_a_quick_timeout_below_the_floor_names_the_point():
    message = refused(SPEC.replace('"workloads.get.timeout_s" = 45', '"workloads.get.timeout_s" = 5'))
    assert "experiments.e level=low" in message and "timeout_min_s 10 exceeds timeout_s 5" in message


def test_the_manifest_records_each_points_timeout():
    study = parse_spec(SPEC, "x.toml")
    points = expand(study)
    m = json.loads(json.dumps(new_manifest(study, points, ["level"], 5, False, None, ["x"], "t0")))
    by_id = {p["id"]: p for p in m["points"]}
    mid = by_id["e.level-mid"]
    assert mid["settings"]["workloads.get.timeout_s"] == 50.0
    assert mid["timeouts"][0] | {"published_row": None} == {
        "workload": "get", "timeout_s": 50.0, "basis": MARGIN, "level": "mid", "published_delay_s": 20.0,
        "published_row": None, "margin": 2.5, "min_s": 10.0, "declared_timeout_s": 120.0,
        "reason": "covers single GETs around a 3-GET mean"}
    assert by_id["flat.n-320"]["timeouts"][0]["basis"] == NO_LEVEL


def test_dry_run_prints_each_points_timeout_and_its_source(tmp_path):
    spec = tmp_path / "tmo.toml"
    spec.write_text(SPEC)
    out = dry_run(spec)
    assert out.returncode == 0, out.stderr
    assert ("# timeout get: 50 s = margin x longest published delay: 2.5 x 20 s published (experiment e, "
            "level mid), at least 10 s, at most 120 s") in out.stdout
    assert "# timeout get: 120 s = timeout_s (no published delay at this level)" in out.stdout


def test_dry_run_prints_each_timeout_once():
    """rto's 113 points share three timeouts (one per level): each is explained at its first point."""
    out = subprocess.run([sys.executable, "-m", "congestlab.cli", "reproduce", "rto", "--dry-run"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stdout.splitlines() if "# timeout get:" in line]
    assert [line.split(": ")[1].split(" =")[0] for line in lines] == ["10 s", "97.6 s", "104.3 s"]
    assert out.stdout.count("[point] ") == 113
