"""Claims undecidable by design (spec/decidable.py): at spec load and in --dry-run each check's
smallest attainable p at the planned repetitions, a warning naming what it needs, never an
error (--quick included)."""

from __future__ import annotations

import subprocess
import sys

from congestlab.spec import load_preset
from congestlab.spec.decidable import undecidable


def _by_claim(preset: str, quick: bool) -> dict[str, list]:
    out: dict[str, list] = {}
    for w in undecidable(load_preset(preset), quick):
        out.setdefault(w.claim, []).append(w)
    return out


def test_a_quick_tcplab_run_cannot_decide_and_says_what_it_needs():
    quick = _by_claim("tcp-lab", quick=True)
    assert set(quick) == {"19a", "19b", "19c", "19d", "19e", "19f", "19g"}  # one repetition, three x-values
    kendall, = quick["19b"]
    assert "Kendall's tau over 3 values of x at 1 repetition(s) reaches p 0.167" in str(kendall)
    assert kendall.needs == 2
    assert "one sample a side" in str(quick["19e"][0])
    assert _by_claim("tcp-lab", quick=False) == {}  # the full preset's three repetitions decide every check


def test_the_full_presets_plan_enough_repetitions_and_a_censored_compare_names_gehan():
    assert _by_claim("cc-share", quick=False) == {} and "fair" in _by_claim("cc-share", quick=True)
    assert _by_claim("ipv6", quick=False) == {} and _by_claim("anma", quick=False) == {}
    gehan = _by_claim("cubic-compound", quick=False)["1"][0]
    assert "Gehan" in gehan.why and "1/8" in gehan.why and gehan.needs == 6


def test_the_dry_run_shows_them_as_warnings_and_runs_on():
    done = subprocess.run([sys.executable, "-m", "congestlab.cli", "reproduce", "tcp-lab", "--quick", "--dry-run"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "# warning: claim 19b, 'monotone' at window_receiver (and 2 more checks): Kendall's tau" in done.stdout
