"""Reading dualbench's JSON report (the ANMA report from stored results: test_anma.py)."""

from __future__ import annotations

import copy
import json

import pytest

from congestlab.bench.results import parse_report, read_report
from congestlab.errors import RunDirError


def summary(avg: float, count: int) -> dict:
    return {"count": count, "avg": avg, "p50": avg, "p90": avg * 1.5, "p99": avg * 2, "max": avg * 3}


def family(requests: int, normal: int, reset: int = 0, est_us: float = 30.0, cont_ms: float = 2.0) -> dict:
    return {"requests": requests, "normal": normal, "reset": reset, "timeout": requests - normal - reset,
            "timeout_connecting": 0, "refused": 0, "other": 0, "other_kinds": {},
            "connect_us": summary(est_us, requests), "continuation_ms": summary(cont_ms, normal),
            "latency_ms": summary(cont_ms, normal), "bytes_received": normal * 4200, "body_bytes": normal * 4096,
            "throughput_mbps": 1.0, "normal_per_s": 10.0}


def anma_doc(n6: int, n4: int, reset6: int = 0) -> dict:
    v6, v4 = family(n6, n6 - reset6, reset6, 40.0, 2.7), family(n4, n4, 0, 20.0, 1.9)
    all_ = family(n6 + n4, n6 + n4 - reset6, reset6)
    return {"tool": "dualbench", "version": "0.1.0", "format_version": 1, "mode": "anma",
            "config": {"requests": n6 + n4}, "wall_s": 1.5, "nofile": {"soft": 1048576},
            "families": {"v6": v6, "v4": v4, "all": all_}}


def test_parse_report_reads_families():
    rep = parse_report(json.dumps(anma_doc(80, 20, reset6=5)))
    assert rep.mode == "anma" and rep.wall_s == 1.5
    assert (rep.family("v6").requests, rep.family("v6").normal, rep.family("v6").reset) == (80, 75, 5)
    assert rep.family("v4").connect_us.avg == 20.0
    assert rep.family("all").continuation_ms.p90 == pytest.approx(3.0)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(tool="wrk"), "not a dualbench report"),
    (lambda d: d.update(format_version=9), "format_version 9"),
    (lambda d: d["families"].pop("v4"), "missing or malformed"),
    (lambda d: d["families"]["v6"]["connect_us"].pop("p99"), "missing or malformed"),
    (lambda d: d["families"]["v6"].update(normal="many"), "missing or malformed"),
])
def test_parse_report_rejects_malformed(mutate, message):
    doc = copy.deepcopy(anma_doc(10, 10))
    mutate(doc)
    with pytest.raises(RunDirError, match=message):
        parse_report(json.dumps(doc), "x.json")


def test_parse_report_rejects_non_json(tmp_path):
    with pytest.raises(RunDirError, match="not valid JSON"):
        parse_report("{", "x.json")
    with pytest.raises(RunDirError, match="no dualbench report"):
        read_report(tmp_path / "missing.json")
