"""The rto preset (seed 000 chapter 4) without root: its sweep (full and --quick), the lean
server's settings per cell, the levels against section 4.1.1, the published values against
the seed's appendix, and the background kept across a level's cells."""

from __future__ import annotations

import re

import pytest

from congestlab.paths import REPO_ROOT
from congestlab.runner import BACKGROUND_MARGIN_S, StudyRun, run_bound_s
from congestlab.spec import load_preset
from congestlab.spec.sweep import background_key, expand, run_order

WEIGHTS = [f"W{i}" for i in range(1, 10)]


@pytest.fixture(scope="module")
def study():
    return load_preset("rto")


@pytest.fixture(scope="module")
def points(study):
    return expand(study)


def test_full_study_is_81_e1_cells_8_live_checks_3_pairs_and_bare_or_modern_at_3_levels(study, points):
    by_exp = {e: [p for p in points if p.experiment == e] for e in ("e1", "e3", "e4-lean-apache", "e4-apache-iis",
                                                                    "e4-iis-lean", "e5-modern")}
    assert [len(v) for v in by_exp.values()] == [81, 8, 6, 6, 6, 6]
    assert {p.repetitions for p in by_exp["e1"] + by_exp["e3"]} == {3}
    assert {p.repetitions for e in ("e4-lean-apache", "e4-apache-iis", "e4-iis-lean") for p in by_exp[e]} == {6}
    cells = {(p.labels["level"], p.labels["sampling"], p.labels["weight"]) for p in by_exp["e1"]}
    assert cells == {(lv, s, w) for lv in ("75", "100", "125") for s in ("all", "one", "some") for w in WEIGHTS}
    assert {(p.labels["level"], p.labels["rto_min_ms"]) for p in by_exp["e3"]} == {
        (lv, m) for lv in ("100", "125") for m in ("250", "500", "750", "1000")}
    assert len(run_order(points, study.order, study.seed)) == 81 * 3 + 8 * 3 + 18 * 6 + 6 * 3


def test_quick_is_w1_w5_w9_all_one_at_75_and_100_with_2_repetitions_and_no_e4(study):
    quick = expand(study, quick=True)
    e1 = [p for p in quick if p.experiment == "e1"]
    assert {(p.labels["level"], p.labels["sampling"], p.labels["weight"]) for p in e1} == {
        (lv, s, w) for lv in ("75", "100") for s in ("all", "one") for w in ("W1", "W5", "W9")}
    assert {p.experiment for p in quick} == {"e1"}
    assert {p.repetitions for p in quick} == {2}
    assert len(run_order(quick, study.order, study.seed)) == 12 * 2


@pytest.mark.parametrize("quick, expected", [
    (False, {"75": 10.0, "100": 97.6, "125": 104.3}),
    (True, {"75": 10.0, "100": 45.0}),
])
def test_get_timeouts_per_level_cover_the_seeds_longest_delay_there(study, quick, expected):
    """The GET's timeout per level is 2.5 x the seed's longest delay there (Table 29 W9/One
    39.05 s at 100, Table 33 W3/All 41.71 s at 125), at least 10 s (75: 0.13 s), at most
    timeout_s (120 s; --quick 45 s): every chosen timeout exceeds the longest published delay
    at its level, so a cell the seed measured is not censored by it on average."""
    chosen: dict[str, set] = {}
    for p in expand(study, quick=quick):
        if "get" in p.workloads:
            chosen.setdefault(p.labels["level"], set()).add(p.study.workload("get").timeout_s)
            assert p.settings["workloads.get.timeout_s"] == p.study.workload("get").timeout_s
            assert [t["workload"] for t in p.timeouts] == ["get"]
    assert chosen == {level: {t} for level, t in expected.items()}
    for level, timeout_s in expected.items():
        longest_s = max(e.get("delay_ms", 0) / 1000 or e.get("delay_s", 0) for e in study.published
                        if e.get("level") == level and ("delay_ms" in e or "delay_s" in e))
        assert timeout_s > longest_s
    assert max(e["delay_ms"] for e in study.published if e.get("level") == "125" and "delay_ms" in e) == 41707.67


def test_every_cell_runs_the_bare_lean_server_with_its_weight_and_sampling(points):
    for p in points:
        if "lean" not in p.servers or p.labels.get("profile") == "modern":
            continue
        knobs = p.study.server("lean").knobs
        assert (knobs["profile"], knobs["cc"], knobs["recovery"]) == ("bare", "none", "go-back-n")
        assert (knobs["rto_k"], knobs["rto_g_us"], knobs["rto_initial_ms"]) == (4, 250, 1000)
        assert knobs["weight"] == p.labels.get("weight", "W1")
        assert knobs["sampling"] == p.labels.get("sampling", "one")  # section 4.1.4: "One"
        assert knobs["rto_min_ms"] == int(p.labels.get("rto_min_ms", 1000))


@pytest.mark.parametrize("level, total", [("75", 75), ("100", 100), ("125", 125)])
def test_levels_are_10_percent_udp_and_90_percent_http_of_320_kib(points, level, total):
    s = next(p for p in points if p.labels["level"] == level).study
    udp, bt = s.workload("udp"), s.workload("bt")
    assert udp.rate_bps == pytest.approx(0.1 * total * 1e6) and udp.mix == {"udp4": 100}
    assert bt.rate_mbps == pytest.approx(0.9 * total) and bt.file_kib == 320 and bt.server == "bts"
    assert bt.fetch_rate_per_s() == pytest.approx(0.9 * total * 1e6 / (320 * 1024 * 8))
    assert bt.max_connections == 200 and s.workload("get").timeout_s == {"75": 10, "100": 97.6, "125": 104.3}[level]
    assert s.server("bts").cc == "cubic"


def test_e4_pairs_run_both_servers_in_one_unit_per_level_and_iis_is_compound(points):
    for exp, pair in (("e4-lean-apache", {"lean", "apache"}), ("e4-apache-iis", {"apache", "iis"}),
                      ("e4-iis-lean", {"iis", "lean"})):
        mine = [p for p in points if p.experiment == exp]
        assert {p.labels["server"] for p in mine} == pair
        for p in mine:
            assert set(p.servers) == pair | {"bts"}
            assert p.study.workload("get").requests[0].server == p.labels["server"]
            assert p.study.server("iis").cc == ("compound" if "iis" in pair else "cubic")
        # the pair's two servers alternate under one background: one unit per level
        assert len({p.unit for p in mine}) == 3
    # E1-E3 need no BPF program: every host's routes are built-in algorithms
    assert all(p.study.server("iis").cc == "cubic" for p in points if not p.experiment.startswith("e4"))


def test_a_levels_background_is_kept_across_its_cells_and_bounded_by_all_of_them(study):
    """E1's cells differ only in the lean server's knobs: each is its own unit, but the
    background (aimed at the BT server) stays the same through the whole level, and into
    the next experiment's cells of the same level; the bound of a background started at the level's first run
    covers every run that keeps it."""
    runner = StudyRun(study, "/nonexistent", quick=True)
    keys = [background_key(p) for p, _ in runner.runs]
    changes = sum(1 for a, b in zip(keys, keys[1:]) if a != b)
    assert changes == 1  # 75 -> 100: the quick runs its levels in one pass (spec/sweep.py `passes`)
    first_100 = next(i for i, (p, _) in enumerate(runner.runs) if p.labels["level"] == "100")
    last_100 = max(i for i, (p, _) in enumerate(runner.runs) if p.labels["level"] == "100")
    point, rep = runner.runs[first_100]
    assert runner.backgrounds.bound_s(point, rep) >= sum(run_bound_s(p) for p, _ in runner.runs[first_100:last_100 + 1])
    # the 75 Mbit/s background's bound counts its own level's runs, not the next level's
    point75, rep75 = runner.runs[0]
    assert runner.backgrounds.bound_s(point75, rep75) == BACKGROUND_MARGIN_S + sum(
        run_bound_s(p) for p, _ in runner.runs[:first_100])


# Spot checks of the published values against seed 000's appendix (Tables 25-38).
@pytest.mark.parametrize("keys, metric, value", [
    ({"level": "75", "sampling": "some", "weight": "W1"}, "delay_ms", 59),
    ({"level": "100", "sampling": "all", "weight": "W1"}, "nrt_mbps", 0.461),
    ({"level": "100", "sampling": "all", "weight": "W1"}, "delay_ms", 2073.67),
    ({"level": "125", "sampling": "all", "weight": "W3"}, "delay_ms", 41707.67),
    ({"level": "125", "sampling": "some", "weight": "W6"}, "delay_ms", 2653.046),
    ({"level": "100", "sampling": "one", "weight": "W9"}, "delay_ms", 39051.67),
    ({"level": "125", "sampling": "one", "weight": "W1"}, "nrt_mbps", 0.13),
])
def test_published_e1_cells(study, keys, metric, value):
    entry, = [e for e in study.published
              if metric in e and e.get("experiment") == "e1" and all(e.get(k) == v for k, v in keys.items())]
    assert entry[metric] == value


def test_published_e1_has_every_cell_once_and_the_seeds_known_duplicates(study):
    e1 = [e for e in study.published if e.get("experiment") == "e1" and "nrt_mbps" in e]
    assert len({(e["level"], e["sampling"], e["weight"]) for e in e1}) == len(e1) == 81

    def cell(level, sampling, weight):
        return next(e for e in e1 if (e["level"], e["sampling"], e["weight"]) == (level, sampling, weight))

    # T27 W9 = T26 W9; T32 W2 and W6 share a delay (seed data errors, kept as published)
    assert (cell("125", "some", "W9")["nrt_mbps"], cell("125", "some", "W9")["delay_ms"]) == \
        (cell("100", "some", "W9")["nrt_mbps"], cell("100", "some", "W9")["delay_ms"])
    assert cell("100", "all", "W2")["delay_ms"] == cell("100", "all", "W6")["delay_ms"] == 24501.67


def test_published_e4_pairs(study):
    e4 = {(e["experiment"], e["server"], e["level"]): (e["goodput_mbps"], e["delay_s"]) for e in study.published
          if "goodput_mbps" in e}
    assert len(e4) == 18
    assert e4[("e4-lean-apache", "lean", "125")] == (0.04, 31.99)  # T36: bare > Apache goodput at 125
    assert e4[("e4-lean-apache", "apache", "125")] == (0.03, 15.61)
    assert e4[("e4-apache-iis", "iis", "100")] == (0.24, 5.50)
    assert e4[("e4-iis-lean", "lean", "125")] == (0.06, 37.84)
    assert e4[("e4-iis-lean", "iis", "125")] == (0.30, 4.13)


def test_published_table_6_and_tables_34_35(study):
    def one(**keys):
        entry, = [e for e in study.published if all(e.get(k) == v for k, v in keys.items())]
        return entry

    # Table 6, W9 at 125 Mbit/s, One: 50 | 0 | 4 | 46 | 0 (the seed's own example, docs/rto-replay.md)
    w9 = one(level="125", weight="W9", sampling="one", t6_gt_rtt_ge_pct=0)
    assert [w9[k] for k in ("t6_le_rtt_le_pct", "t6_le_rtt_gt_lt1_pct", "t6_le_rtt_gt_ge1_pct",
                            "t6_gt_rtt_lt_pct")] == [50, 0, 4, 46]
    assert one(level="75", weight="W1", sampling="one", t6_le_rtt_le_pct=83)["t6_le_rtt_gt_lt1_pct"] == 17
    # Table 35 W9/One at 1 s = 54.17 = 13/24 (Table 6: 50 + 4); Table 34 W1/One 50/35/30/0
    assert one(level="125", weight="W9", sampling="one", threshold_s=1)["avoid_seed_pct"] == 54.17
    assert [one(level="100", weight="W1", sampling="one", threshold_s=t)["avoid_seed_pct"]
            for t in (1, 0.75, 0.5, 0.25)] == [50, 35, 30, 0]
    assert len([e for e in study.published if "avoid_seed_pct" in e]) == 2 * 4 * 9
    assert len([e for e in study.published if "t6_le_rtt_le_pct" in e]) == 27


# --- every published number against the seed text itself ------------------------------------
SEED_000 = REPO_ROOT.parent / "shared" / "seeds" / "000_13ffb9b466eef558.txt"


def _appendix_blocks() -> dict[str, list[list[str]]]:
    """Seed 000's appendix data blocks by table number; each block comes before its caption."""
    text = SEED_000.read_text()
    text = text[text.index("TABLE 24. CLIENTS PERFORMANCE"):text.index("**Chapter5 data tables**")]
    blocks, rows = {}, []
    for line in text.splitlines():
        m = re.match(r"TABLE (\d+)\.", line)
        if m:
            blocks[m.group(1)] = rows
            rows = []
        elif "<b>" in line and re.match(r"[\d.]+|Apache|Bare|IIS", re.sub(r"</?b>", "", line)):
            rows.append(re.sub(r"</?b>", "", line).split("\t"))
    return blocks


@pytest.mark.skipif(not SEED_000.exists(), reason=f"seed text not beside the repository ({SEED_000})")
def test_published_values_are_the_seeds_tables_25_to_38(study):
    blocks = _appendix_blocks()
    pub = study.published
    checked = 0
    for n, (sampling, level) in enumerate([(s, lv) for s in ("some", "one", "all") for lv in ("75", "100", "125")],
                                          start=25):
        for throughput, delay, weight in blocks[str(n)]:
            entry, = [e for e in pub if "nrt_mbps" in e and (e["level"], e["sampling"], e["weight"]) ==
                      (level, sampling, weight.strip())]
            assert (entry["nrt_mbps"], entry["delay_ms"]) == (float(throughput), float(delay)), (n, weight)
            checked += 1
    for n, level in (("34", "100"), ("35", "125")):
        for threshold, *values in blocks[n]:
            t = float(threshold.strip().split()[0])
            for value, (sampling, weight) in zip(values, [(s, w) for w in ("W1", "W5", "W9")
                                                          for s in ("all", "some", "one")]):
                entry, = [e for e in pub if "avoid_seed_pct" in e and (e["level"], e["sampling"], e["weight"]) ==
                          (level, sampling, weight) and e["threshold_s"] == t]
                assert entry["avoid_seed_pct"] == float(value), (n, t, sampling, weight)
                checked += 1
    names = {"Apache": "apache", "Bare": "lean", "IIS": "iis"}
    for n, exp in (("36", "e4-lean-apache"), ("37", "e4-apache-iis"), ("38", "e4-iis-lean")):
        for label, *values in blocks[n]:
            server, what = label.split()[:2]
            metric = "goodput_mbps" if what == "Goodput" else "delay_s"
            for level, value in zip(("75", "100", "125"), values):
                entry, = [e for e in pub if metric in e and (e["experiment"], e["server"], e["level"]) ==
                          (exp, names[server], level)]
                assert entry[metric] == float(value), (n, label, level)
                checked += 1
    assert checked == 81 + 72 + 36


@pytest.mark.skipif(not SEED_000.exists(), reason=f"seed text not beside the repository ({SEED_000})")
def test_published_table_6_is_the_seeds(study):
    text = SEED_000.read_text()
    block = text[text.index("TABLE 6. PERCENTAGE OF PACKETS WITHIN MINIMUM RTO"):text.index("The results of investigating")]
    level, checked = None, 0
    bins = ["t6_le_rtt_le_pct", "t6_le_rtt_gt_lt1_pct", "t6_le_rtt_gt_ge1_pct", "t6_gt_rtt_lt_pct", "t6_gt_rtt_ge_pct"]
    for line in block.splitlines():
        cells = re.sub(r"</?b>", "", line).split("\t")
        if len(cells) != 17 or not re.fullmatch(r"W\d", cells[1]):
            continue
        level = cells[0] or level
        weight, values = cells[1], [int(v) for v in cells[2:]]
        for i, sampling in enumerate(("some", "one", "all")):
            entry, = [e for e in study.published if "t6_le_rtt_le_pct" in e and
                      (e["level"], e["weight"], e["sampling"]) == (level, weight, sampling)]
            assert [entry[b] for b in bins] == values[i::3], (level, weight, sampling)
            checked += 1
    assert checked == 27


def test_rto_seed_fit_preset_is_rto_with_a_deep_bottleneck_queue(study):
    fit = load_preset("rto-seed-fit")
    assert next(n for n in fit.topology.nodes if n.name == "r1").links[0].queue_packets == 4000
    assert next(n for n in study.topology.nodes if n.name == "r1").links[0].queue_packets == 1000
    assert fit.report == study.report and fit.published == study.published  # both variants report the claims
    assert fit.name == "rto-seed-fit" and fit.levels == study.levels and fit.quick == study.quick
    assert [p.id for p in expand(fit, quick=True)] == [p.id for p in expand(study, quick=True)]


def test_e5_runs_the_lean_server_bare_and_modern_under_each_levels_background(points):
    """E5 (not in the seed): the modern cells are leanweb's modern profile as
    crates/leantcp/src/config.rs TcpConfig::modern() has it (CUBIC, SACK, 200 ms, every ACK
    sampled), the bare ones the study's standard W1/One server."""
    e5 = [p for p in points if p.experiment == "e5-modern"]
    assert {(p.labels["level"], p.labels["profile"]) for p in e5} == {
        (lv, pr) for lv in ("75", "100", "125") for pr in ("bare", "modern")}
    for p in e5:
        knobs = p.study.server("lean").knobs
        want = (("modern", "cubic", "sack", 200, "all") if p.labels["profile"] == "modern"
                else ("bare", "none", "go-back-n", 1000, "one"))
        assert (knobs["profile"], knobs["cc"], knobs["recovery"], knobs["rto_min_ms"], knobs["sampling"]) == want
        assert knobs["weight"] == "W1" and p.repetitions == 3


def test_e4_probes_the_pairs_other_server_from_the_units_other_point(study):
    """Both servers of an E4 pair start at the unit's first point, whose GET goes to one of
    them: the other's ready check uses the client of the unit's other point."""
    runner = StudyRun(study, "/nonexistent")
    for exp, first, other in (("e4-lean-apache", "lean", "apache"), ("e4-apache-iis", "apache", "iis"),
                              ("e4-iis-lean", "iis", "lean")):
        point = next(p for p in runner.points if p.experiment == exp and p.labels["server"] == first)
        assert runner.servers.probe_client(point, point.study.server(other)) == "client"
        assert runner.servers.probe_client(point, point.study.server("bts")) == "btcli"
