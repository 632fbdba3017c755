"""The [report] declaration: one-line errors naming the field; the presets' declarations
validate against their axes; their published numbers are the seeds' (checked against the
seed text itself when ../shared/seeds is beside the repository)."""

from __future__ import annotations

import re

import pytest
from preset_declarations import declaration_names, load_declaration

from congestlab.errors import SpecError
from congestlab.spec.report import ReportSpec, check_references, load_report_spec
from congestlab.paths import REPO_ROOT

AXES = {"ipv6": ["server", "level"], "tcp-lab": ["x"], "anma": ["server", "pattern"], "cc-share": ["pair"],
        "cubic-compound": ["pair", "level", "size_kib"], "rto": ["level", "sampling", "weight", "rto_min_ms", "server", "profile"],
        "servers-today": ["variant", "level"], "web-today": ["variant", "level", "random_loss"]}
METRIC = {"t": {"kind": "request", "column": "delay_ms"}}


@pytest.mark.parametrize("name", sorted(AXES))
def test_preset_declarations_validate(name):
    decl = load_declaration(name)
    report = ReportSpec.model_validate(decl["report"])
    check_references(report, AXES[name], decl["published"])
    assert report.claims and report.tables and report.plots


def test_every_declaration_has_axes_listed():
    assert sorted(declaration_names()) == sorted(AXES)


@pytest.mark.parametrize("report, where, problem", [
    ({"metrics": {"t": {"kind": "requests", "column": "delay_ms"}}}, "report.metrics.t", "not a results table"),
    ({"metrics": {"t": {"kind": "request", "column": "delay"}}}, "report.metrics.t", "'delay' is not in results/request"),
    ({"metrics": METRIC, "tables": [{"id": "a", "title": "a", "metrics": ["x"], "rows": "level"}]}, "report",
     "unknown metric 'x'"),
    ({"metrics": METRIC, "tabels": []}, "report.tabels", "Extra inputs"),
    ({"metrics": METRIC, "claims": [{"id": "1", "title": "t", "seed": "s", "rule": "compare", "metric": "t"}]},
     "report.claims.0", "needs a and b"),
    ({"metrics": METRIC, "claims": [{"id": "1", "title": "t", "seed": "s", "metric": "t"}]}, "report.claims.0",
     "no rule"),
    ({"metrics": METRIC, "claims": [{"id": "1", "title": "t", "seed": "s", "rule": "shape", "metric": "t",
                                      "along": "level"}]}, "report.claims.0", "needs shape"),
    ({"metrics": METRIC, "plots": [{"id": "p", "title": "p", "type": "bar", "metrics": ["t"]}]}, "report.plots.0",
     "needs x"),
])
def test_declaration_errors_name_the_field(report, where, problem):
    with pytest.raises(SpecError) as err:
        load_report_spec({"report": report})
    assert err.value.where.startswith(where), err.value.where
    assert problem in err.value.problem
    assert "\n" not in str(err.value)


def test_claim_parts_take_the_claims_fields_as_defaults():
    report = ReportSpec.model_validate({"metrics": METRIC, "claims": [{
        "id": "1", "title": "t", "seed": "s", "metric": "t", "a": {"family": "v4"}, "b": {"family": "v6"},
        "parts": [{"rule": "compare", "relation": "<"}, {"rule": "compare", "b": {"family": "v4", "level": "C0"}}]}]})
    first, second = report.claims[0].checks()
    assert (first.relation, first.a, first.b) == ("<", {"family": "v4"}, {"family": "v6"})
    assert (second.relation, second.b) == (">", {"family": "v4", "level": "C0"})


# --- the published numbers against the seeds themselves -----------------------------------

SEEDS = REPO_ROOT.parent / "shared" / "seeds"
SEED_000 = SEEDS / "000_13ffb9b466eef558.txt"
SEED_004 = SEEDS / "004_fffdb76df011930e.txt"


def _chapter5_tables() -> dict[str, dict[str, tuple[float, float]]]:
    """Seed 000's Chapter 5 data blocks: {"39": {"C1B": (v4, v6)}, ...}; each block comes
    before its TABLE caption."""
    text = SEED_000.read_text()
    text = text[text.index("**Chapter5 data tables**"):]
    tables, block = {}, {}
    for line in text.splitlines():
        clean = re.sub(r"</?b>", "", line).split()
        if len(clean) == 3 and re.fullmatch(r"C\dB", clean[0]):
            block[clean[0]] = (float(clean[1]), float(clean[2]))
        m = re.match(r"TABLE (\d+)\.", line)
        if m and block:
            tables[m.group(1)] = block
            block = {}
    return tables


@pytest.mark.skipif(not SEED_000.exists(), reason=f"seed text not beside the repository ({SEED_000})")
def test_ipv6_published_values_are_tables_39_to_42():
    tables = _chapter5_tables()
    assert sorted(tables) == ["39", "40", "41", "42"]
    pub = {(p["server"], p["level"], p["family"]): p for p in load_declaration("ipv6")["published"]}
    which = {"39": ("lean", "nrt_throughput_mbps", 1), "40": ("lean", "delay_ms", 1),
             "41": ("apache", "nrt_throughput_mbps", 1), "42": ("apache", "delay_ms", 1000)}  # 42: seconds
    checked = 0
    for table, (server, metric, scale) in which.items():
        for level, (v4, v6) in tables[table].items():
            assert pub[(server, level, "v4")][metric] == pytest.approx(v4 * scale), (table, level)
            assert pub[(server, level, "v6")][metric] == pytest.approx(v6 * scale), (table, level)
            checked += 2
    assert checked == 48
    text = SEED_000.read_text()
    assert "found to be 48 milliseconds for both IPv4 and IPv6" in text
    assert "99 milliseconds and 116 milliseconds over IPv4 and IPv6" in text
    assert [pub[("apache", "C0", f)]["delay_ms"] for f in ("v4", "v6")] == [48, 48]
    assert [pub[("lean", "C0", f)]["delay_ms"] for f in ("v4", "v6")] == [99, 116]


@pytest.mark.skipif(not SEED_004.exists(), reason=f"seed text not beside the repository ({SEED_004})")
def test_anma_published_values_are_the_slides():
    text = SEED_004.read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c for c in re.split(r"\t+", line.strip()) if c]
        if cells and cells[0] in ("Α", "A", "В", "B", "С", "C", "D", "E") and len(cells) >= 4:
            name = {"Α": "A", "В": "B", "С": "C"}.get(cells[0], cells[0])
            rows.setdefault(name, []).append([float(c.replace(",", "")) for c in cells[1:]])
    pub = {(p["pattern"], p["family"]): p for p in load_declaration("anma")["published"]}
    for name, (counts, times) in rows.items():
        ratio6, ratio4, sent6, sent4, normal6, normal4, reset6, reset4 = counts
        assert (pub[(name, "v6")]["requests"], pub[(name, "v4")]["requests"]) == (sent6, sent4)
        assert (pub[(name, "v6")]["normal"], pub[(name, "v4")]["normal"]) == (normal6, normal4)
        assert (pub[(name, "v6")]["reset"], pub[(name, "v4")]["reset"]) == (reset6, reset4)
        for fam, sent, reset in (("v6", sent6, reset6), ("v4", sent4, reset4)):
            assert pub[(name, fam)]["request_share_pct"] == pytest.approx(sent / 100, abs=0.005)
            if sent:
                assert pub[(name, fam)]["reset_pct"] == pytest.approx(reset / sent * 100, abs=0.005)
        # time data: v6/v4 establishment (µs), then continuation (ms); D and E give one family
        fams = [f for f, sent in (("v6", sent6), ("v4", sent4)) if sent]
        est, cont = times[2:2 + len(fams)], times[2 + len(fams):]
        for fam, e, c in zip(fams, est, cont):
            assert pub[(name, fam)]["connect_us"] == pytest.approx(e)
            assert pub[(name, fam)]["continuation_ms"] == pytest.approx(c)
    assert sorted(rows) == ["A", "B", "C", "D", "E"]


def test_validate_report_for_the_spec_loader():
    from congestlab.spec.report import validate_report

    decl = load_declaration("ipv6")
    assert validate_report(decl["report"], ["server", "level"], decl["published"]).claims
    with pytest.raises(SpecError, match="'level' is neither an axis"):
        validate_report(decl["report"], ["server", "lvl"], decl["published"])
    with pytest.raises(SpecError, match=r"published\[0\] names no declared metric"):
        validate_report(decl["report"], ["server", "level"], [{"server": "apache", "throughput": 1}])
