"""The one upgrade step: what a run directory written by an older congestlab lacks, supplied
here and only here, in memory (nothing on disk changes). Readers go through
congestlab.stored, which calls these; every other module sees the current format only
(docs/data-format.md, "Format versions").

Three kinds of old data come through here:
- an older manifest: a stored spec from before request outcomes, claim margins and reasons, a
  fidelity section from before per-run summaries (manifest_view);
- an older repetition: rep.json from before the capture's own span, records from before
  records carried their settings (rep_info_view, get_record_view);
- older result rows: request rows from before they carried their outcome or timeout
  (request_row_view).
and older leanweb logs: retransmissions and RTT samples as an older leanweb logged them
(logged_retransmission, sample_stands_in).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Callable

from congestlab.fidelity import PER_RUN_SUMMARIES, checks_from_json, checks_to_json, failed, fold_per_run
from congestlab.rundir.manifest import FORMAT_VERSION
from congestlab.spec.models import StudySpec
from congestlab.spec.report import MARGIN_RELATIONS
from congestlab.spec.validation_context import STORED
from congestlab.stats.outcomes import COMPLETE, INVALID, TIMED_OUT

# a stored claim's margin when its congestlab had none (upgrade_stored_claims)
STORED_MARGIN_REASON = ("declared before margins were: the check's tolerance_pct (default 10 %) stands in "
                        "(rundir/upgrade.py, upgrade_stored_claims)")
# a stored matches/share check's reason when its congestlab asked for none (upgrade_stored_claims)
STORED_TOLERANCE_REASON = ("declared before a tolerance needed its reason: the stored tolerance_pct stands in "
                           "(rundir/upgrade.py, upgrade_stored_claims)")
# the captures stop this long after the measurement window ends (runner/captures.py)
CAPTURE_TAIL_S = 0.2


def manifest_view(raw: dict) -> dict:
    """The manifest as the current format has it: its stored spec upgraded (stored_spec_view),
    its fidelity section folded as runs write it now (fidelity_view), a planned run order."""
    view = dict(raw)
    if isinstance(raw.get("spec"), dict):
        view["spec"] = stored_spec_view(raw["spec"])
    view["fidelity"] = fidelity_view(raw.get("fidelity") or {})
    # a run from before the manifest recorded its planned order: its rows' round, block and
    # run index stay empty
    view.setdefault("run_order", [])
    return view


def stored_spec_view(spec: dict) -> dict:
    """A stored spec (the run's resolved spec as the manifest keeps it) in the form today's
    models validate: a `[report]` declaration from before request outcomes censored
    {ok = false}; claims from before compare rules had margins (upgrade_stored_claims)."""
    spec = dict(spec)  # copied where changed: a stored spec's published numbers are most of it
    report = spec.get("report")
    if isinstance(report, dict):
        report = dict(report)
        metrics = report.get("metrics")
        if isinstance(metrics, dict):
            report["metrics"] = {name: _metric_outcomes(m) for name, m in metrics.items()}
        spec["report"] = upgrade_stored_claims(report)
    return spec


def _metric_outcomes(metric):
    """A declaration stored before request outcomes censors {ok = false}: now only a timed-out
    GET is censored (analysis/request_outcome.py), an invalid one is excluded and counted."""
    if not (isinstance(metric, dict) and metric.get("kind") == "request"
            and isinstance(metric.get("censored"), dict) and metric["censored"].get("ok") is False):
        return metric
    metric = dict(metric, censored={**{k: v for k, v in metric["censored"].items() if k != "ok"},
                                    "outcome": TIMED_OUT})
    if isinstance(metric.get("where"), dict) and metric["where"].get("ok") is True:
        metric["where"] = {**{k: v for k, v in metric["where"].items() if k != "ok"}, "outcome": COMPLETE}
    return metric


def upgrade_stored_claims(report: dict) -> dict:
    """A `[report]` section stored by a congestlab whose compare rules had no margins: the old
    `margin` factor is dropped, and a ~ / >= / <= check without margin_pct gets its
    tolerance_pct as margin, with a reason that says so; a matches or share check from before its
    tolerance needed a reason gets one that says so. Presets must declare their own."""
    def upgrade(item: dict, inherited: dict) -> dict:
        item = {k: v for k, v in item.items() if k != "margin"}
        merged = {**inherited, **item}
        tolerance = merged.get("tolerance_pct", 10.0)
        if (isinstance(merged.get("relation"), str) and merged["relation"] in MARGIN_RELATIONS
                and "margin_pct" not in merged and _finite_number(tolerance)):  # else validation names it
            item["margin_pct"] = float(tolerance)
            item.setdefault("reason", STORED_MARGIN_REASON)
        if merged.get("rule") in ("matches", "share") and not str(merged.get("reason") or "").strip():
            item["reason"] = STORED_TOLERANCE_REASON
        return item

    if not isinstance(report.get("claims") or [], list):
        return report  # validation names it
    claims = []
    for claim in report.get("claims") or []:
        if not isinstance(claim, dict):
            return report
        base = upgrade(claim, {})
        if "parts" in claim and isinstance(claim["parts"], list):
            base["parts"] = [upgrade(p, {k: v for k, v in base.items() if k != "parts"}) if isinstance(p, dict)
                             else p for p in claim["parts"]]
        claims.append(base)
    return {**report, "claims": claims} if "claims" in report else report


def _finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fidelity_view(section: dict) -> dict:
    """A stored manifest's `fidelity` as runs write it now (fidelity.manifest_section): a run
    stored before a kind of PER_RUN_SUMMARIES was folded has a row and a warning per
    repetition, shown as the kind's one summary row and its one warning (a failed
    repetition's warning gives way to its failed summary's, never vanishes)."""
    shown, replaced = fold_per_run(checks_from_json(section.get("checks") or []))
    warnings = list(section.get("warnings") or [])
    if replaced:
        gone = Counter(c.message for c in replaced if failed(c))
        kept = []
        for w in warnings:
            if gone[w] > 0:
                gone[w] -= 1
            else:
                kept.append(w)
        summaries = [c.message for c in shown if c.name in PER_RUN_SUMMARIES and failed(c)]
        warnings = kept + [m for m in summaries if m not in kept]
    return {**section, "checks": checks_to_json(shown), "warnings": warnings,
            "per_repetition": list(section.get("per_repetition") or []) + checks_to_json(replaced)}


def rep_info_view(info: dict) -> dict:
    """rep.json as runs write it now: `capture_epoch_s`, when the repetition's captures ran.
    A run from before the runner recorded it has the measurement window, which ends
    CAPTURE_TAIL_S before the captures stop."""
    if info.get("capture_epoch_s") or not info.get("window_epoch_s"):
        return info
    start, end = info["window_epoch_s"]
    return {**info, "capture_epoch_s": [start, end + CAPTURE_TAIL_S]}


# a GET record's fields that records before format 3 may lack, and their values then
_GET_DEFAULTS = {"client_kind": "curl", "family_pair": None, "family_position": None, "family_order": None,
                 "previous_closed": None, "previous_wait_ms": None, "error": ""}
# ... and before format 4: every GET was plain HTTP/1.1 (curl --http1.1; the browser's
# version was not recorded), with no phase times, TLS or CPU accounting
_GET_DEFAULTS_3 = {"http": "1.1", "tls": False, "http_negotiated": None, "tls_version": None,
                   "time_connect_s": None, "time_appconnect_s": None, "time_pretransfer_s": None,
                   "time_starttransfer_s": None, "server_cpu_ns": None, "host_softirq_ms": None}


def get_record_view(row: dict, version: int, timeout_s: Callable[[str], float | None]) -> dict:
    """A GET record as format FORMAT_VERSION writes it. Before format 3 a record did not carry
    the timeout it ran with: `timeout_s(workload)` gives it from the point's resolved spec;
    before format 4 it was plain HTTP/1.1 without phase times or CPU per GET."""
    if version >= FORMAT_VERSION or not isinstance(row, dict):
        return row
    defaults = {**_GET_DEFAULTS_3, **(_GET_DEFAULTS if version < 3 else {})}
    out = {**{k: v for k, v in defaults.items() if k not in row}, **row}
    if "timeout_s" not in out:
        out["timeout_s"] = timeout_s(str(row.get("workload")))
    return out


def request_row_view(row: dict, version: int, timeout_s: Callable[[], float | None]) -> dict:
    """A results/request.csv row (strings, as the CSV keeps them) as analysis writes it now.
    Rows analysed before they carried their outcome: `ok`, and for the rest the client's
    error (a timeout's wording as analysis/request_outcome.py client_outcome reads it);
    before they carried their timeout: the point's GET timeout."""
    if version >= FORMAT_VERSION:
        return row
    out = row
    if not row.get("outcome"):
        out = {**out, "outcome": stored_row_outcome(row)}
    if not row.get("timeout_s"):
        limit = timeout_s()
        out = {**out, "timeout_s": "" if limit is None else limit}
    return out


def stored_row_outcome(row: dict) -> str:
    if str(row.get("ok")) in ("True", "true", "1"):
        return COMPLETE
    error = str(row.get("error") or "")
    return TIMED_OUT if "timed out" in error or error.startswith("no response within") else INVALID


def same_run_spec(stored: dict | None, spec: StudySpec, quick: bool) -> bool:
    """Whether a stored run's spec (as stored, not upgraded) is this one as far as the run
    goes (what `--resume` requires): a full run never reads [quick], so a [quick] changed since
    does not count; nor does a field added to the models since the run was recorded, at any
    depth, while this spec leaves it at its default (e.g. `passes`, a server's `tls`): the
    stored spec is read with today's models, which give it the defaults."""
    if not isinstance(stored, dict):
        return False
    try:
        read = StudySpec.model_validate(stored, context={STORED: True})
    except ValueError:
        return False
    mine = json.loads(json.dumps(spec.model_dump(mode="json")))
    theirs = json.loads(json.dumps(read.model_dump(mode="json")))
    if not quick:
        mine.pop("quick", None)
        theirs.pop("quick", None)
    return mine == theirs


# --- older leanweb logs ----------------------------------------------------------------------
# A leanweb from before it logged each segment when its frame was written (`tx`, with
# `retransmission`) logged a retransmission as `retransmit` when the segment was made, and its
# RTT samples (`rtt_sample`) without the transmissions they measure.
OLDER_RETRANSMIT_EVENT = "retransmit"


def logged_retransmission(event: dict) -> bool:
    """Whether a leanweb event is a data segment written again: today's `tx` with
    `retransmission`, an older leanweb's `retransmit`."""
    kind = event.get("event")
    again = kind == "tx" and bool(event.get("retransmission")) or kind == OLDER_RETRANSMIT_EVENT
    return again and event.get("len", 0) > 0


def sample_stands_in(kind: str, transmissions_seen: bool) -> bool:
    """Whether an event is an older log's RTT sample that stands in for the sampler's: a log
    without transmissions (no `tx` before it) can be replayed only with its live samples, at
    the times it logged them."""
    return kind == "rtt_sample" and not transmissions_seen
