"""cc-share on real namespaces: the preset with 2 s flows, Compound TCP registered for the
run under a unique kernel name (registration is global to the machine) and removed after."""

from __future__ import annotations

import os
import secrets
import subprocess

import pytest

from congestlab.cc import registry, share
from congestlab.paths import REPO_ROOT
from congestlab.runner import StudyRun

from spine_helpers import namespaces_with

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
]
LINK_BPS = 100e6


@pytest.fixture
def unique_compound(tmp_path, monkeypatch) -> str:
    """Compound TCP built under a unique kernel name; `compound` in a spec means it here."""
    name = f"cs{secrets.token_hex(3)}"
    subprocess.run(["make", "-C", str(REPO_ROOT / "bpf"), "--no-print-directory", "object", f"CTCP_ID={name}",
                    f"OUT_DIR={tmp_path}"], check=True, capture_output=True)
    monkeypatch.setattr(registry, "COMPOUND_KERNEL_NAME", name)
    monkeypatch.setattr(registry, "default_object", lambda kernel_name: tmp_path / f"ctcp_{kernel_name}.bpf.o")
    yield name
    registry.remove(name)


def test_cc_share_two_second_flows(tmp_path, unique_compound):
    # one repetition of each pair: the test is about the run and its shares, not the claims' n
    spec = share.preset_with(seconds=2, rate_bps=100_000_000, queue_packets=100, ack_delay_ms=0)
    spec = spec.model_copy(update={"repetitions": 1})
    runner = StudyRun(spec, tmp_path / "run", preset="cc-share")
    runner.run()
    assert namespaces_with(runner.prefix) == []
    assert unique_compound not in registry.available()  # the run removed what it installed
    assert runner.manifest["congestion_control"]["installed_for_this_run"] == ["compound"]
    rows = share.shares(tmp_path / "run")
    print("\n" + share.markdown_table(rows))
    repetitions = spec.repetitions
    pairs = ["cubic vs compound", "compound vs compound", "cubic vs cubic"]
    assert sorted((r.pair, r.repetition) for r in rows) == sorted(  # two flows per pair and repetition
        (pair, rep) for pair in pairs for rep in range(1, repetitions + 1) for _flow in range(2))
    for row in rows:
        assert row.kernel_cc == {"cubic": "cubic", "compound": unique_compound}[row.cc], row
        assert row.rate_bps > 0.1 * LINK_BPS, row  # both flows got through
    for pair in pairs:
        for rep in range(1, repetitions + 1):
            both = [r for r in rows if (r.pair, r.repetition) == (pair, rep)]
            assert sum(r.rate_bps for r in both) >= 0.85 * LINK_BPS, both
            assert abs(sum(r.share_of_total_pct for r in both) - 100) < 1e-6, both
    checks = {c.name.split("@")[0]: c for c in runner.checks}
    assert checks["share_flow2_cc"].ok and checks["share_flow1_cc"].ok
    from congestlab.report import build_report

    text = build_report(tmp_path / "run").markdown_path.read_text()  # the preset's declared report
    assert "| cubic-compound |" in text and "Share of a fair half of the link" in text
