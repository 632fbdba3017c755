"""Axes cannot overwrite measurements (spec/axis_columns.py, analysis/record_checks.py): an axis
named like a column the record fills with its own measurement or outcome is refused at spec
load with the list of such axes; one named like a column that echoes a setting is allowed only
when it sets that field; a stored run from before is read, and its rows whose record disagrees
with the axis are flagged, never merged into the axis's cell."""

from __future__ import annotations

import json

import pytest
from record_fixtures import get_record
from spec_fixtures import TINY_TOPOLOGY, refused
from synthetic_run import T0, manifest, paced_get, write_rep

from congestlab.analysis.record_checks import axis_mismatch
from congestlab.analysis.run_analysis import analyze_run
from congestlab.spec.loader import parse_spec
from congestlab.stats.outcomes import INVALID
from congestlab.stored import StoredRun

SPEC = 'name = "tiny"\n' + TINY_TOPOLOGY.lstrip("\n") + '''[[workloads]]
name = "get"
kind = "get"
requests = [{ client = "client", server = "apache" }]
[[experiments]]
name = "e"
'''


def test_axes_named_like_measured_columns_are_refused_all_named():
    message = refused(SPEC + 'axes = [{ name = "delay_ms", fields = ["workloads.get.timeout_s"], values = [10, 20] },'
                             ' { name = "outcome", fields = ["nodes.r1.links.s0.delay_ms"], values = [1, 2] },'
                             ' { name = "client_port", fields = ["nodes.r1.links.s0.loss"], values = [0, 0.01] }]\n')
    assert ("experiments.e.axes.delay_ms, experiments.e.axes.outcome, experiments.e.axes.client_port: named like "
            "a column the records fill with their own measurement or outcome") in message, message


def test_an_axis_named_like_a_setting_column_must_set_that_field():
    """The issue's case: an axis `family` sweeping two delays merged two points into one cell."""
    message = refused(SPEC + 'axes = [{ name = "family", fields = ["nodes.r1.links.s0.delay_ms"], values = [1, 50] }]\n')
    assert "experiments.e.axes.family (sets nodes.r1.links.s0.delay_ms): named like a column the records fill " \
           "with a setting they ran with, so the axis must set that field" in message, message
    parse_spec(SPEC + 'axes = [{ name = "server", fields = ["workloads.get.requests.0.server"], '
                      'values = ["apache"] }]\n', "x.toml")
    parse_spec(SPEC + 'axes = [{ name = "family", fields = ["workloads.get.requests.0.families"], '
                      'values = [["v4"], ["v6"]] }]\n', "x.toml")


def _stored_family_axis_run(tmp_path):
    """A run stored before such axes were refused: axis `family` sets the link's delay."""
    run = tmp_path / "run"
    data = manifest(1, points=("e.family-d1", "e.family-d2"))
    data["spec"]["experiments"][0]["axes"] = [{"name": "family", "fields": ["nodes.r1.links.s0.delay_ms"],
                                               "values": [1, 2], "labels": ["d1", "d2"], "levels": []}]
    data["axes"] = ["family"]
    for n, point in enumerate(data["points"], 1):
        point["axes"], point["settings"] = {"family": f"d{n}"}, {"nodes.r1.links.s0.delay_ms": n}
        v4, raw4 = paced_get("v4", T0 + 10 * n, 40000 + n)
        v6, raw6 = paced_get("v6", T0 + 10 * n + 2, 41000 + n)
        write_rep(run, 1, v4.frames + v6.frames, [raw4, raw6], point=point["id"])
    (run / "manifest.json").write_text(json.dumps(data))
    return run


def test_a_stored_run_whose_axis_overwrote_a_column_is_flagged(tmp_path):
    run = _stored_family_axis_run(tmp_path)
    result = analyze_run(run, json.loads((run / "manifest.json").read_text()))
    rows = result.rows["request"]
    assert len(rows) == 4 and all(r["outcome"] == INVALID for r in rows)
    assert rows[0]["error"] == "the record's family is 'v4' but the point's axis family is 'd1'"
    assert result.summary["request_outcomes"]["invalid"] == 4


@pytest.mark.parametrize("server, request_index, flagged", [("www", 0, False), ("other", 0, True),
                                                             ("other", 1, False)])
def test_a_record_is_held_to_the_axis_that_sets_its_field(tmp_path, server, request_index, flagged):
    """An axis `server` that sets request 0's server: request 0's record must name that server;
    another request of the workload is not its to say."""
    run = tmp_path / "run"
    data = manifest(1, points=("e.server-www",))
    data["spec"]["experiments"][0]["axes"] = [{"name": "server", "fields": ["workloads.get.requests.0.server"],
                                               "values": ["www"], "labels": [], "levels": []}]
    data["axes"] = ["server"]
    data["points"][0] |= {"axes": {"server": "www"}, "settings": {"workloads.get.requests.0.server": "www"}}
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps(data))
    point = StoredRun(run).point("e.server-www")
    why = axis_mismatch(get_record(server=server, request=request_index), point, ["server"])
    assert bool(why) == flagged, why
