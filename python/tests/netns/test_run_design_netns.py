"""The run design on a real testbed: two servers (Apache, lean) side by side under one
background, their GETs alternating in the recorded order, each GET starting only after the
previous one's connection closed at its server (the record says so, and the capture agrees)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import cli_fork
import dpkt
import pytest
from spine_helpers import mini_spec_text, namespaces_with, write_mini_spec

from congestlab.spec.loader import load_spec
from congestlab.spec.sweep import expand, longest_streaks, planned_runs

pytestmark = pytest.mark.netns


def _connections(pcap: Path, server_port: int) -> list[tuple[float, float]]:
    """(first, last) packet time of each connection at the server's port, by client port."""
    spans: dict[int, list[float]] = {}
    with open(pcap, "rb") as f:
        for ts, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            tcp = getattr(ip, "data", None)
            if not isinstance(tcp, dpkt.tcp.TCP):
                continue
            client = tcp.dport if tcp.sport == server_port else tcp.sport
            spans.setdefault(client, []).append(ts)
    return sorted((min(t), max(t)) for t in spans.values())


def test_two_servers_interleave_and_each_get_waits_for_the_previous_to_close(tmp_path):
    spec_path = write_mini_spec(tmp_path, repetitions=2)  # 2 servers x 2 levels x 2 repetitions
    run_dir = tmp_path / "run"
    done = cli_fork.run(["run", str(spec_path), "--out", str(run_dir)], tmp_path / "run.log", 240)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert not namespaces_with(manifest["testbed"]["prefix"])

    # the recorded order is the planner's, and the repetitions ran in it
    study = load_spec(spec_path)
    planned = [r.describe() for r in planned_runs(expand(study), study.order, study.seed)]
    assert manifest["run_order"] == planned
    # both servers ran through each level: a level is one unit, its GETs alternate servers
    assert {tuple(p["servers"]) for p in manifest["points"]} == {("apache", "lean")}
    assert manifest["run_order_streaks"] == {"point": 1, "server": 1}

    with open(run_dir / "results" / "request.csv") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: float(r["start_ts"]))
    assert len(rows) == 16 and all(r["outcome"] == "complete" for r in rows)
    # the repetitions ran in the recorded order (by their GETs' start times)
    ran = list(dict.fromkeys((r["point_id"], int(r["repetition"])) for r in rows))
    assert ran == [(r["point"], r["repetition"]) for r in planned]
    assert [int(r["run_index"]) for r in rows[::2]] == list(range(8))
    assert longest_streaks([(type("P", (), {"id": r["point_id"], "measured": [r["server"]]}), 0)
                            for r in rows[::2]])["server"] == 1
    # the two families of one repetition: one pair, positions 0 and 1, in the recorded order
    pairs: dict[str, list[dict]] = {}
    for r in rows:
        pairs.setdefault(r["family_pair"], []).append(r)
    assert len(pairs) == 8
    for members in pairs.values():
        assert [m["family_position"] for m in members] == ["0", "1"]
        assert ",".join(m["family"] for m in members) == members[0]["family_order"]
        assert members[0]["round"] == members[1]["round"] and members[0]["block"] in ("1", "2")
    # every GET but the run's first waited for the previous GET's connection to close, and it did
    assert rows[0]["previous_closed"] == ""
    assert all(r["previous_closed"] == "True" and 0 <= float(r["previous_wait_ms"]) < 10_000 for r in rows[1:])
    (check,) = [c for c in manifest["fidelity"]["checks"] if c["name"].startswith("get_previous_closed")]
    assert check["ok"] and check["value"] == max(float(r["previous_wait_ms"]) for r in rows[1:])
    per_rep = [c for c in manifest["fidelity"]["per_repetition"] if c["name"].startswith("get_previous_closed@")]
    assert len(per_rep) == 8 and all(c["ok"] for c in per_rep)
    # the capture agrees: at each server, a repetition's second connection starts after its
    # first one's last packet
    ports = {name: instances[0]["port"] for name, instances in manifest["servers"].items()}
    for rep_dir in (run_dir / "points").glob("*/r*"):
        for pcap in (rep_dir / "pcap").glob("*.pcap"):
            spans = _connections(pcap, ports[pcap.stem])
            assert len(spans) == 2, (pcap, spans)
            assert spans[0][1] <= spans[1][0], (pcap, spans)


def test_one_pass_visits_each_unit_once_and_the_drift_check_says_why_it_skipped(tmp_path):
    """`passes = 1` (the presets' --quick): each unit's rounds in one visit, one warm-up per
    unit at most, every run in block 1; the drift check lists the reference cells as not
    compared because of the one pass, and the report says so."""
    spec_path = tmp_path / "mini.toml"
    spec_path.write_text(mini_spec_text(2).replace("repetitions = 2\n", "repetitions = 2\npasses = 1\n", 1))
    run_dir = tmp_path / "run"
    done = cli_fork.run(["run", str(spec_path), "--out", str(run_dir)], tmp_path / "run.log", 240)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and not namespaces_with(manifest["testbed"]["prefix"])
    study = load_spec(spec_path)
    assert study.passes == 1 and manifest["run_passes"] == {"main": 1}
    assert manifest["run_order"] == [r.describe() for r in planned_runs(expand(study), study.order, study.seed)]
    units = [r["unit"] for r in manifest["run_order"]]
    assert {r["block"] for r in manifest["run_order"]} == {1}
    assert [u for i, u in enumerate(units) if not i or u != units[i - 1]] == sorted(set(units), key=units.index)
    warmup_s = study.warmup_s
    assert all(u["warmup"] <= warmup_s + 0.5 for u in manifest["time_budget"]["units"].values()), \
        manifest["time_budget"]["units"]
    with open(run_dir / "results" / "request.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 16 and {r["block"] for r in rows} == {"1"}
    drift = manifest["analysis"]["drift"]
    assert drift and all(e["skipped"].startswith("one pass (passes = 1)") for e in drift)
    assert "not compared: one pass (passes = 1)" in (run_dir / "report.md").read_text()
