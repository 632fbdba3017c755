"""Sweeps: points are the Cartesian product of an experiment's axes (an axis with several
fields moves them together), `--quick` runs the declared subset, every point has a stable
id, and repetitions interleave within a unit that shares long-lived background."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections import Counter

import pytest

from congestlab.errors import SpecError
from congestlab.spec import load_preset
from congestlab.spec.fieldpath import FieldPathError, apply, get_field, set_field
from congestlab.spec.loader import parse_spec
from congestlab.spec.sweep import expand, run_order

# A user spec: the ipv6 preset's network and workloads, swept over two axes of the lean
# server (weight x sampling) and two levels, plus a paired axis block.
USER_SPEC = """
[quick]
repetitions = 1
experiments = ["weights"]
axes = { weight = ["W1"] }

[[experiments]]
name = "weights"
axes = [
  { name = "weight", fields = ["servers.lean.knobs.weight"], values = ["W1", "W5"] },
  { name = "level", levels = ["C0", "C1B"] },
]

[[experiments]]
name = "paired"
set = { "workloads.get.requests.0.server" = "apache" }
axes = [
  { name = "cc", fields = ["servers.apache.cc", "nodes.server.sysctls.net.ipv4.tcp_sack"], values = [["cubic", 1], ["reno", 0]], labels = ["cubic-sack", "reno-nosack"] },
  { name = "rate", fields = ["nodes.r1.links.s0.rate_bps"], values = [50_000_000, 100_000_000] },
]
"""


def _user_text(tables: str = USER_SPEC) -> str:
    """The ipv6 preset's network, servers, workloads and levels, with the user's blocks."""
    from importlib import resources

    text = (resources.files("congestlab.spec.presets") / "ipv6.toml").read_text()
    head = text[: text.index("# One block")]  # the preset without its experiments and [quick]
    head = head.replace('name = "ipv6"', "", 1).replace("repetitions = 10\n", "", 1)
    head = head.replace('server = "apache", file_kib', 'server = "lean", file_kib')
    return 'name = "lean-rto"\nrepetitions = 3\n' + head + tables


def _user_spec():
    return parse_spec(_user_text(), "user.toml")


def test_cartesian_product_and_stable_ids():
    points = expand(_user_spec())
    weights = [p for p in points if p.experiment == "weights"]
    assert [p.id for p in weights] == ["weights.weight-W1.level-C0", "weights.weight-W1.level-C1B",
                                       "weights.weight-W5.level-C0", "weights.weight-W5.level-C1B"]
    w5 = weights[3]
    assert w5.study.server("lean").knobs["weight"] == "W5"
    assert w5.study.workload("bg").rate_bps == 75_000_000
    assert w5.labels == {"weight": "W5", "level": "C1B"} and w5.repetitions == 3
    assert [p.id for p in expand(_user_spec())] == [p.id for p in points], "ids are stable"


def test_paired_axis_moves_its_fields_together():
    paired = [p for p in expand(_user_spec()) if p.experiment == "paired"]
    assert len(paired) == 2 * 2
    combos = {(p.study.server("apache").cc, p.study.topology.node("server").sysctls["net.ipv4.tcp_sack"],
               p.study.topology.node("r1").links[0].rate_bps) for p in paired}
    assert combos == {("cubic", 1, 50_000_000), ("cubic", 1, 100_000_000), ("reno", 0, 50_000_000),
                      ("reno", 0, 100_000_000)}
    assert all(p.servers == ["apache"] for p in paired)


def test_quick_subset_runs_the_declared_blocks_values_and_repetitions():
    quick = expand(_user_spec(), quick=True)
    assert [p.id for p in quick] == ["weights.weight-W1.level-C0", "weights.weight-W1.level-C1B"]
    assert all(p.repetitions == 1 for p in quick)
    assert len(expand(load_preset("ipv6"), quick=True)) == 21


def test_interleaved_order_covers_every_repetition_round_by_round():
    spec = _user_spec()
    points = expand(spec)
    runs = run_order(points, "interleaved", seed=1)
    assert Counter(p.id for p, _ in runs) == {p.id: 3 for p in points}
    # a unit (same servers and long-lived background) runs in at most two blocks (the two
    # passes of the mirrored order, spec/sweep.py); within a block, round by round
    units = [p.unit for p, _ in runs]
    blocks = [u for i, u in enumerate(units) if not i or u != units[i - 1]]
    assert Counter(blocks) == {u: (1 if blocks.count(u) == 1 else 2) for u in set(units)}
    for unit in set(units):
        reps = [rep for p, rep in runs if p.unit == unit]
        assert reps == sorted(reps)
    # a unit with several points is shuffled, deterministically per seed
    assert run_order(points, "interleaved", seed=1) == runs
    paired_units = {p.unit for p in points if p.experiment == "paired"}
    assert any(len([p for p in points if p.unit == u]) > 1 for u in paired_units)
    orders = {tuple(p.id for p, _ in run_order(points, "interleaved", seed=s)) for s in range(1, 8)}
    assert len(orders) > 1


def test_units_group_points_that_share_servers_and_background():
    points = expand(_user_spec())
    by_id = {p.id: p for p in points}
    # weight changes the lean server: another server instance, so another unit
    assert by_id["weights.weight-W1.level-C0"].unit != by_id["weights.weight-W5.level-C0"].unit
    # the link rate changes neither servers nor background: one unit, reconfigured in between
    assert by_id["paired.cc-cubic-sack.rate-50000000"].unit == by_id["paired.cc-cubic-sack.rate-100000000"].unit


def test_sequential_order_runs_each_point_to_the_end():
    points = expand(_user_spec())
    runs = run_order(points, "sequential")
    assert [(p.id, r) for p, r in runs[:3]] == [(points[0].id, 1), (points[0].id, 2), (points[0].id, 3)]


def test_field_paths():
    data = load_preset("ipv6").model_dump(mode="json")
    before = copy.deepcopy(data)
    settings = {"nodes.r1.links.s0.queue_packets": 64, "servers.lean.knobs.sampling": "some",
                "nodes.client.sysctls.net.ipv4.tcp_rmem": "4096 65535 65535", "nodes.r1.links.s0.rate_bps": 5}
    out = apply(data, settings)
    assert get_field(out, "nodes.r1.links.s0.queue_packets") == 64
    assert get_field(out, "servers.lean.knobs.sampling") == "some"
    assert get_field(out, "nodes.client.sysctls.net.ipv4.tcp_rmem") == "4096 65535 65535"
    assert get_field(data, "nodes.r1.links.s0.queue_packets") == 1000, "apply copies"
    assert data == before, "apply copies on write: nothing the source holds changes"
    by_hand = copy.deepcopy(data)
    for path, value in settings.items():
        set_field(by_hand, path, value)
    assert out == by_hand
    with pytest.raises(FieldPathError, match="no item 's7'"):
        apply(data, {"nodes.r1.links.s7.rate_bps": 1})
    with pytest.raises(FieldPathError, match="ends on a list item"):
        apply(data, {"servers.lean": 1})


def test_a_sweep_value_the_model_refuses_is_a_spec_error_before_anything_runs():
    bad = USER_SPEC.replace("values = [50_000_000, 100_000_000]", "values = [50_000_000, -1]")
    with pytest.raises(SpecError, match=r"paired cc=cubic-sack rate=-1: topology.nodes\[0:r1\].links\[0\].rate_bps"):
        parse_spec(_user_text(bad), "user.toml")


def test_cli_dry_run_prints_every_point(tmp_path):
    spec = tmp_path / "user.toml"
    spec.write_text(_user_text())
    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "run", str(spec), "--dry-run"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    points = [line for line in proc.stdout.splitlines() if line.startswith("[point] ")]
    assert len(points) == 8 and "# 8 points, 24 runs" in proc.stdout
    assert "# passes (rounds per pass): weights 2 (2+1), paired 2 (2+1)" in proc.stdout


def test_cli_schema_is_json_schema():
    import json

    proc = subprocess.run([sys.executable, "-m", "congestlab.cli", "schema"], capture_output=True, text=True)
    schema = json.loads(proc.stdout)
    assert schema["title"] == "StudySpec" and "experiments" in schema["properties"]


def test_docs_spec_md_is_generated_from_the_models():
    """docs/spec.md is `congestlab schema --markdown`: regenerate it when a model changes."""
    from congestlab.paths import REPO_ROOT
    from congestlab.spec.reference import render

    committed = (REPO_ROOT / "docs" / "spec.md").read_text()
    assert committed == render(REPO_ROOT / "examples" / "lean-weights.toml"), \
        "docs/spec.md is stale: run `congestlab schema --markdown > docs/spec.md`"


def test_example_user_spec_extends_a_preset():
    from congestlab.paths import REPO_ROOT
    from congestlab.spec import load_spec

    spec = load_spec(REPO_ROOT / "examples" / "lean-weights.toml")
    assert spec.name == "lean-weights" and spec.extends == "ipv6"
    assert spec.report == {} and spec.published == [], "the preset's report is declared over its own experiments"
    assert [p.id for p in expand(spec, quick=True)] == [
        "weights.weight-W1.level-C0", "weights.weight-W1.level-C1B", "weights.weight-W5.level-C0",
        "weights.weight-W5.level-C1B"]


def test_passes_per_experiment_and_not_on_an_axis():
    """`passes` is set for the study, an experiment or [quick]; an axis may not move it."""
    from congestlab.spec.sweep import experiment_passes

    per_experiment = USER_SPEC.replace('set = { "workloads.get.requests.0.server" = "apache" }',
                                       'set = { passes = 1, "workloads.get.requests.0.server" = "apache" }', 1)
    assert experiment_passes(expand(parse_spec(_user_text(per_experiment), "user.toml"))) == \
        {"weights": 2, "paired": 1}
    quick = USER_SPEC.replace("repetitions = 1\n", "repetitions = 1\nset = { passes = 1 }\n", 1)
    assert experiment_passes(expand(parse_spec(_user_text(quick), "user.toml"), quick=True)) == {"weights": 1}
    on_axis = USER_SPEC.replace('{ name = "rate", fields = ["nodes.r1.links.s0.rate_bps"], values = [50_000_000, '
                                '100_000_000] }', '{ name = "p", fields = ["passes"], values = [1, 2] }')
    assert on_axis != USER_SPEC
    with pytest.raises(SpecError, match="not on an axis"):
        parse_spec(_user_text(on_axis), "user.toml")
    with pytest.raises(SpecError, match="passes"):
        parse_spec(_user_text().replace("repetitions = 3\n", "repetitions = 3\npasses = 3\n", 1), "user.toml")
