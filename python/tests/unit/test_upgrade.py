"""The one upgrade step (rundir/upgrade.py) and the typed reader over it (congestlab.stored):
a run written by an older congestlab reads in today's format, in memory, with nothing on disk
changed; a run in today's format is held to it. Most cases read a stored old run
(data/ipv6-quick-run: format 2, from before records carried their timeout, rows their outcome
and rep.json its capture span)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from congestlab import fidelity
from congestlab.errors import RunDirError
from congestlab.rundir import FORMAT_VERSION, RAW_KIND
from congestlab.rundir.records import GetRecord
from congestlab.rundir.upgrade import fidelity_view, same_run_spec, stored_spec_view, upgrade_stored_claims
from congestlab.spec.report import ReportSpec
from congestlab.stored import StoredRun

OLD_RUN = Path(__file__).parent / "data" / "ipv6-quick-run"
C1B = "main.server-apache.level-C1B"


def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(OLD_RUN, run)
    return run


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def _write_manifest(run: Path, manifest: dict) -> None:
    (run / "manifest.json").write_text(json.dumps(manifest))


def _v2_get(**changed) -> dict:
    """A GET record as workloads/get.py wrote it before format 3: no timeout, no client kind,
    no run-design fields."""
    return {"workload": "get", "request": 0, "server": "apache", "server_port": 80, "server_kind": "apache",
            "client": "client", "family": "v4", "file_kib": 320, "client_addr": "10.0.0.10", "start_ts": 1.0,
            "end_ts": 1.1, "client_port": 40000, "url": "http://10.0.4.11:80/320KiB.bin", "ok": True,
            "http_code": 200, "size_download": 327680, "local_port": 40000, "time_total_s": 0.03, "error": ""
            } | changed


def _records(run: Path, point: str, rows: list[dict]) -> None:
    (run / "points" / point / "r1" / "records.jsonl").write_text(
        "".join(json.dumps({"kind": RAW_KIND, "row": row}) + "\n" for row in rows))


def test_an_old_run_reads_in_todays_format_and_stays_as_it_was_on_disk():
    before = (OLD_RUN / "manifest.json").read_bytes()
    run = StoredRun(OLD_RUN)
    assert run.version == 2 < FORMAT_VERSION
    # its stored spec dumps every field, a lean server's (default) cc too, which the models
    # refuse as input but not in a spec read back (spec/validation_context.py STORED)
    assert "cc" in run.spec_data["servers"][1] and run.study.server("lean").kind == "lean"
    # every point with what it ran with: C1B's background is its level's
    assert run.point(C1B).study.workload("bg").rate_bps == 75_000_000
    assert run.point("main.server-apache.level-C0").study.workload("bg").rate_bps != 75_000_000
    # request rows from before rows carried their outcome or their timeout get both
    rows = run.results("request")
    assert {r["outcome"] for r in rows} == {"complete"} and {r["timeout_s"] for r in rows} == {"30"}
    assert rows[0].number("delay_ms") == pytest.approx(28.504)
    # rep.json from before the runner recorded its captures' span: the window and its tail
    (rep,) = [r for r in run.repetitions() if r.point.id == C1B]
    start, end = rep.info["window_epoch_s"]
    assert rep.info["capture_epoch_s"] == [start, end + 0.2]
    assert (OLD_RUN / "manifest.json").read_bytes() == before


def test_a_format_2_get_record_gets_the_timeout_its_point_ran_with(tmp_path):
    run_dir = _copy(tmp_path)
    manifest = _manifest(run_dir)
    point = next(p for p in manifest["points"] if p["id"] == C1B)
    point["settings"]["workloads.get.timeout_s"] = 12.5
    _write_manifest(run_dir, manifest)
    _records(run_dir, C1B, [_v2_get()])
    _records(run_dir, "main.server-apache.level-C0", [_v2_get(family="v6", client_kind="chromium")])
    records = {rep.point.id: rep.records() for rep in StoredRun(run_dir).repetitions()
               if rep.point.id in (C1B, "main.server-apache.level-C0")}
    (own,) = records[C1B]
    assert isinstance(own, GetRecord) and own.timeout_s == 12.5 and own.client_kind == "curl"
    assert own.family_pair is None and own.previous_closed is None
    (spec_wide,) = records["main.server-apache.level-C0"]
    assert spec_wide.timeout_s == 30.0 and spec_wide.client_kind == "chromium"


def _v3_get(**changed) -> dict:
    """A GET record as workloads/get.py wrote it in format 3: its timeout, client kind and
    run-design fields, but nothing of HTTP versions, TLS, phase times or CPU."""
    return _v2_get(timeout_s=30.0, client_kind="curl", family_pair="p#1.0", family_position=0,
                   family_order="v4,v6", previous_closed=True, previous_wait_ms=1.5) | changed


def test_a_format_3_get_record_is_plain_http11_without_phases_or_cpu(tmp_path):
    run_dir = _copy(tmp_path)
    _write_manifest(run_dir, _manifest(run_dir) | {"format_version": 3})
    _records(run_dir, C1B, [_v3_get(), _v3_get(client_kind="chromium", ok=False, error="timed out")])
    rep = next(r for r in StoredRun(run_dir).repetitions() if r.point.id == C1B)
    curl, chromium = rep.records()
    for record in (curl, chromium):
        assert (record.http, record.tls, record.http_negotiated, record.tls_version) == ("1.1", False, None, None)
        assert (record.time_connect_s, record.time_appconnect_s, record.time_pretransfer_s,
                record.time_starttransfer_s) == (None, None, None, None)
        assert (record.server_cpu_ns, record.host_softirq_ms) == (None, None)
    # what format 3 did carry stands as written
    assert (curl.family_pair, curl.previous_closed, curl.previous_wait_ms, curl.timeout_s) == ("p#1.0", True, 1.5, 30.0)
    assert chromium.client_kind == "chromium" and chromium.error == "timed out"


def test_a_format_4_get_record_is_not_given_defaults(tmp_path):
    run_dir = _copy(tmp_path)
    _write_manifest(run_dir, _manifest(run_dir) | {"format_version": 4})
    _records(run_dir, C1B, [_v3_get()])
    rep = next(r for r in StoredRun(run_dir).repetitions() if r.point.id == C1B)
    with pytest.raises(RunDirError, match=r"records.jsonl:1: http: Field required"):
        rep.records()


def test_a_record_in_todays_format_is_held_to_its_schema(tmp_path):
    run_dir = _copy(tmp_path)
    _write_manifest(run_dir, _manifest(run_dir) | {"format_version": FORMAT_VERSION})
    _records(run_dir, C1B, [_v2_get()])
    rep = next(r for r in StoredRun(run_dir).repetitions() if r.point.id == C1B)
    with pytest.raises(RunDirError, match=r"records.jsonl:1: client_kind: Field required"):
        rep.records()
    (rep.dir / "records.jsonl").write_text(json.dumps({"kind": "iperf"}) + "\n")
    with pytest.raises(RunDirError, match=r"records.jsonl:1: not a \{\"kind\", \"row\"\} object"):
        rep.records()


def test_a_damaged_point_is_one_line_naming_it(tmp_path):
    run_dir = _copy(tmp_path)
    manifest = _manifest(run_dir)
    manifest["points"][1]["settings"]["workloads.bg.rate_bps"] = "fast"
    _write_manifest(run_dir, manifest)
    run = StoredRun(run_dir)
    with pytest.raises(RunDirError, match=rf"damaged point '{C1B}': workloads.*rate_bps: Input should be a valid"):
        _ = run.point(C1B).study


def test_a_declaration_stored_before_request_outcomes_censors_timed_out_gets_only():
    stored = {"report": {"metrics": {"delay_ms": {"kind": "request", "column": "delay_ms", "where": {"ok": True},
                                                  "censored": {"ok": False},
                                                  "censored_at": "workloads.get.timeout_s"}}}}
    metric = ReportSpec.model_validate(stored_spec_view(stored)["report"]).metrics["delay_ms"]
    assert metric.where == {"outcome": "complete"} and metric.censored == {"outcome": "timed_out"}


def test_stored_claims_without_margins_get_their_tolerance_with_a_reason():
    metrics = {"delay_ms": {"kind": "request", "column": "delay_ms", "where": {"outcome": "complete"}}}
    stored = {"claims": [{"id": "17", "title": "t", "seed": "s", "metric": "delay_ms", "margin": 2.0,
                          "parts": [{"rule": "compare", "relation": "~", "tolerance_pct": 10, "a": {"family": "v4"},
                                     "b": {"family": "v6"}},
                                    {"rule": "compare", "relation": ">", "a": {"server": "lean"},
                                     "b": {"server": "apache"}}]}], "metrics": metrics}
    report = ReportSpec.model_validate(upgrade_stored_claims(stored))
    equal, slower = report.claims[0].checks()
    assert equal.margin_pct == 10 and "before margins" in equal.reason
    assert slower.margin_pct is None


def test_stored_matches_and_share_without_a_reason_get_one_that_says_so():
    stored = {"metrics": {"m": {"kind": "iperf", "column": "throughput_mbps"}},
              "claims": [{"id": "19a", "title": "t", "seed": "s", "rule": "matches", "metric": "m", "expected": 94,
                          "tolerance_pct": 5},
                         {"id": "19f", "title": "t", "seed": "s", "metric": "m",
                          "parts": [{"rule": "share", "tolerance_pct": 50}]}]}
    report = ReportSpec.model_validate(upgrade_stored_claims(stored))
    assert all("before a tolerance needed its reason" in c.checks()[0].reason for c in report.claims)


def test_a_fidelity_section_stored_before_the_folding_shows_one_row_and_one_warning():
    rows = [fidelity.Check(f"get_previous_closed@main.level-C1B#{rep}", ok, wait, "closed", message)
            for rep, ok, wait, message in ((1, True, 3.0, ""), (2, False, 10_004.2, "1 of 2 GETs started early"),
                                           (3, True, 12.0, ""))]
    stored = {"checks": fidelity.checks_to_json(rows),
              "warnings": ["udp: background achieved 8.87 of 10.00 Mbit/s", rows[1].message]}
    shown = fidelity_view(stored)
    (row,) = shown["checks"]
    assert row["name"] == "get_previous_closed" and row["ok"] is False
    assert shown["warnings"] == ["udp: background achieved 8.87 of 10.00 Mbit/s", row["message"]]
    assert fidelity_view(shown) == shown
    assert len(shown["per_repetition"]) == 3


def test_a_run_resumes_across_a_changed_quick_table_or_a_new_default_field():
    """`--resume` compares the stored spec with this one as far as the run goes: a full run
    ignores [quick]; a top-level field the stored spec lacks counts at its default."""
    from congestlab.spec import load_preset

    spec = load_preset("cubic-compound")
    stored = json.loads(json.dumps(spec.model_dump(mode="json")))
    assert same_run_spec(stored, spec, quick=False) and same_run_spec(stored, spec, quick=True)
    older = {k: v for k, v in stored.items() if k != "passes"} | {
        "quick": stored["quick"] | {"set": {"warmup_s": 20.0}}}  # recorded before `passes`
    assert same_run_spec(older, spec, quick=False)
    assert not same_run_spec(older, spec, quick=True)  # the quick run's own settings changed
    assert not same_run_spec(older, spec.model_copy(update={"passes": 1}), quick=False)
    assert not same_run_spec(stored | {"seed": 2}, spec, quick=False)
    assert not same_run_spec(None, spec, quick=False)


def test_a_run_resumes_across_server_and_request_fields_added_since():
    """A run recorded before servers had `tls`, `http`, `ready`, ... and GET requests `http`
    and `tls`: its stored spec lacks them, and they are at their defaults in this one."""
    from congestlab.spec import load_preset

    spec = load_preset("ipv6")
    stored = json.loads(json.dumps(spec.model_dump(mode="json")))
    new_server_fields = ("tls", "http", "ready", "stop", "command", "config_template", "config_name", "version",
                         "env", "on_exit")
    for server in stored["servers"]:
        for name in new_server_fields:
            del server[name]
    get = next(w for w in stored["workloads"] if w["kind"] == "get")
    for request in get["requests"]:
        for name in ("http", "tls", "tls_version"):
            del request[name]
    assert same_run_spec(stored, spec, quick=False)
    restarting = spec.model_copy(update={"servers": [s.model_copy(update={"on_exit": "restart"})
                                                     for s in spec.servers]})
    assert not same_run_spec(stored, restarting, quick=False)  # a new field this spec sets otherwise


def test_an_older_leanweb_log_counts_its_retransmissions_and_replays_its_live_samples(tmp_path):
    """A leanweb from before `tx`: a retransmission is a `retransmit` event, the RTT samples come
    without their transmissions (rundir/upgrade.py logged_retransmission, sample_stands_in)."""
    from congestlab.analysis.lean_log import logged_connections
    from congestlab.analysis.rto_replay import sample_stream
    from congestlab.analysis.rto_streams import read_lean_log

    log = tmp_path / "leanweb.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in [
        {"event": "start", "t_us": 0, "unix_us": 1_000_000_000, "rto_alpha": 0.125, "rto_beta": 0.25, "rto_k": 4.0,
         "rto_g_us": 250, "rto_initial_ms": 1000, "rto_min_ms": 1000, "rto_max_ms": 60000, "sampling": "all"},
        {"event": "open", "conn": 1, "t_us": 0, "unix_us": 1_000_000_000, "peer": "10.0.0.10:40000",
         "family": "ipv4"},
        {"event": "rtt_sample", "conn": 1, "t_us": 11_000, "rtt_us": 10_000, "srtt_us": 10_000, "rttvar_us": 5_000,
         "rto_us": 1_000_000},
        {"event": "retransmit", "conn": 1, "t_us": 1_500_000, "unix_us": 1_001_500_000, "seq": 1001, "len": 1000},
        {"event": "rtt_sample", "conn": 1, "t_us": 1_600_000, "rtt_us": 100_000, "srtt_us": 21_250,
         "rttvar_us": 26_250, "rto_us": 1_000_000}]))
    (logged,) = logged_connections(log)
    assert logged.retransmissions == 1
    lean = read_lean_log(log)
    assert not lean.has_tx
    # its samples at the times it logged them: (sent, acked, samples before the segment left)
    assert sample_stream(lean.conns[0], "all") == [(1_000, 11_000, 0), (1_500_000, 1_600_000, 1)]
