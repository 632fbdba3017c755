"""leanweb under a spoofed SYN flood: the testbed builds a LAN of three
namespaces — srv (a user-stack node: leanweb's TAP on its bridge), cli (curl) and atk —
and atk sends thousands of SYNs from addresses no namespace owns (synflood.py, AF_PACKET).
With SYN cookies (the default, `--syn-cookies auto`) every v4 and v6 fetch made during and
after the flood succeeds; with `--syn-cookies never` the full half-open table refuses a
fetch, so the test can tell the two apart. Numbers are printed (pytest -s) for the report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from congestlab.paths import rust_binary
from congestlab.servers.files import file_name, write_files
from congestlab.servers.lean import LeanServer
from congestlab.spec.models import TopologySpec
from congestlab.testbed import Testbed
from congestlab.testbed.plan import USER_STACK_BRIDGE

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]

FLOOD = Path(__file__).with_name("synflood.py")
LEAN_MAC = "02:00:00:00:14:01"
FLOOD_SYNS = 6000
FLOOD_RATE_PER_S = 1500
SIZE_KIB = 320


def flood_topology() -> TopologySpec:
    return TopologySpec.model_validate({
        "switches": [{"name": "fl", "subnet4": "10.214.0.0/24", "subnet6": "fd00:0:214::/64"}],
        "nodes": [{"name": "srv", "stack": "user", "links": [{"switch": "fl", "host_id": 1}]},
                  {"name": "cli", "links": [{"switch": "fl", "host_id": 2}]},
                  {"name": "atk", "links": [{"switch": "fl", "host_id": 3}]}],
    })


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def lean(tb: Testbed, tap: str, docroot: Path, log: Path, **knobs) -> LeanServer:
    rust_binary("leanweb")  # built by `make test`; never built here
    iface = tb.layout.nodes["srv"].interfaces[0]
    return LeanServer(tb.ns("srv"), tap, USER_STACK_BRIDGE, f"{iface.addr4}/{iface.prefix4}",
                      f"{iface.addr6}/{iface.prefix6}", None, None, docroot, log, {"mac": LEAN_MAC, **knobs})


def start_flood(tb: Testbed, count: int) -> subprocess.Popen:
    dev = tb.layout.nodes["atk"].interfaces[0].dev
    atk_mac = tb.run("atk", ["cat", f"/sys/class/net/{dev}/address"]).stdout.strip()
    # spoofed sources: hosts .100-.249 and random interface ids of the LAN, owned by nobody
    return tb.start("atk", [sys.executable, str(FLOOD), dev, LEAN_MAC, atk_mac, tb.address("srv", "v4"),
                            tb.address("srv", "v6"), "80", str(count), str(FLOOD_RATE_PER_S),
                            "10.214.0.0", "fd00:0:214::"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def fetch(tb: Testbed, family: str, out: Path, max_time_s: int) -> tuple[int, float]:
    addr = tb.address("srv", family)
    url = f"http://{addr}/{file_name(SIZE_KIB)}" if family == "v4" else f"http://[{addr}]/{file_name(SIZE_KIB)}"
    started = time.monotonic()
    proc = tb.run("cli", ["curl", "-sS", "--max-time", str(max_time_s), "-o", str(out), url],
                  timeout_s=max_time_s + 10, check=False)
    return proc.returncode, time.monotonic() - started


def test_leanweb_serves_v4_and_v6_during_a_spoofed_syn_flood(tmp_path):
    docroot = tmp_path / "www"
    write_files(docroot, [SIZE_KIB])
    expected = (docroot / file_name(SIZE_KIB)).read_bytes()
    log = tmp_path / "lean.jsonl"
    control_log = tmp_path / "lean-never.jsonl"
    results: list[tuple[str, int, float, bool]] = []
    with Testbed(flood_topology()) as tb:
        with lean(tb, "tap0", docroot, log):
            tb.ping("cli", "srv", "v4")
            tb.ping("cli", "srv", "v6")
            flood = start_flood(tb, FLOOD_SYNS)
            i = 0
            # fetch during the flood, then a few after it (the spoofed entries still fill the table)
            after = 0
            while after < 4:
                family = "v4" if i % 2 == 0 else "v6"
                out = tmp_path / f"got{i}"
                rc, seconds = fetch(tb, family, out, 10)
                results.append((family, rc, seconds, rc == 0 and out.read_bytes() == expected))
                i += 1
                if flood.poll() is not None:
                    after += 1
            flood_out, flood_err = flood.communicate(timeout=30)
            tb.processes.remove(flood) if flood in tb.processes else None
        assert flood.returncode == 0, flood_err
        flood_stats = json.loads(flood_out.strip().splitlines()[-1])

        # Control: the same flood without cookies leaves a legitimate client unanswered.
        with lean(tb, "tap1", docroot, control_log, syn_cookies="never"):
            tb.ping("cli", "srv", "v4")
            control_flood = start_flood(tb, 2000)
            control_flood.communicate(timeout=60)
            control_rc, control_s = fetch(tb, "v4", tmp_path / "control", 3)

    stop = read_log(log)[-1]
    control_stop = read_log(control_log)[-1]
    ok = sum(r[3] for r in results)
    slowest = max(r[2] for r in results)
    print(f"\nflood: {flood_stats['sent']} spoofed SYNs in {flood_stats['seconds']} s; fetches ok {ok}/{len(results)} "
          f"(v4 {sum(r[3] for r in results if r[0] == 'v4')}, v6 {sum(r[3] for r in results if r[0] == 'v6')}), "
          f"slowest {slowest:.3f} s; cookies sent {stop['syn_cookies_sent']}, validated {stop['syn_cookies_validated']}, "
          f"invalid {stop['syn_cookies_invalid']}, stale {stop['syn_cookies_stale']}; accepted {stop['connections_accepted']}, "
          f"frames in {stop['frames_in']}, malformed {stop['malformed']}")
    print(f"control (--syn-cookies never): curl rc {control_rc} after {control_s:.2f} s; "
          f"SYNs dropped at the half-open cap {control_stop['syn_dropped_half_open_cap']}")
    assert stop["event"] == "stop" and control_stop["event"] == "stop"
    assert flood_stats["sent"] == FLOOD_SYNS
    assert len(results) >= 8 and {r[0] for r in results} == {"v4", "v6"}
    assert ok == len(results), [r for r in results if not r[3]]
    assert stop["malformed"] == 0, "the flood's frames parse (checksums right)"
    # Most SYNs reach leanweb (the TAP queue may drop some); all beyond the half-open cap get cookies.
    assert stop["syn_cookies_sent"] >= FLOOD_SYNS // 2
    assert stop["syn_dropped_half_open_cap"] == 0
    assert stop["syn_cookies_validated"] >= 1, "legitimate clients came in through cookies"
    assert stop["syn_cookies_validated"] <= len(results)
    assert control_rc != 0 and control_stop["syn_dropped_half_open_cap"] > 0
