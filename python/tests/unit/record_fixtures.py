"""Records as the workloads write them (rundir/records.py), with defaults for what a test
does not care about, and the tiny spec (spec_fixtures.py) as a run's manifest stores it."""

from __future__ import annotations

from congestlab.rundir.records import GetRecord
from congestlab.spec.loader import parse_spec
from spec_fixtures import TINY_NETWORK

_GET = {"workload": "get", "request": 0, "server": "www", "server_port": 80, "server_kind": "apache",
        "client": "client", "family": "v4", "file_kib": 141, "client_kind": "curl", "client_addr": "10.9.0.2",
        "timeout_s": 30.0, "start_ts": 0.0, "end_ts": 1.0, "client_port": 40000, "family_pair": None,
        "family_position": None, "family_order": None, "previous_closed": None, "previous_wait_ms": None,
        "url": "http://10.9.1.2:80/141KiB.bin", "ok": True, "http_code": 200, "size_download": 0, "local_port": 0,
        "time_total_s": 0.0, "error": "", "http": "1.1", "tls": False, "http_negotiated": "1.1",
        "tls_version": None, "time_connect_s": None, "time_appconnect_s": None, "time_pretransfer_s": None,
        "time_starttransfer_s": None, "server_cpu_ns": None, "host_softirq_ms": None}


def get_record(**fields) -> GetRecord:
    return GetRecord(**(_GET | fields))


def get_row(**fields) -> dict:
    """A GET record as records.jsonl keeps it."""
    return get_record(**fields).model_dump()


def tiny_stored_spec(server: str = "www", kind: str = "apache", files_kib: tuple[int, ...] = (141,),
                     timeout_s: float = 30.0, extra: str = "") -> dict:
    """The tiny network with one server and one GET workload, as a manifest's "spec"."""
    text = f'''name = "tiny"
{TINY_NETWORK}
[[servers]]
name = "{server}"
kind = "{kind}"
node = "server"
files_kib = {list(files_kib)}
[[workloads]]
name = "get"
kind = "get"
timeout_s = {timeout_s}
requests = [{{ client = "client", server = "{server}", file_kib = {files_kib[0]} }}]
[[experiments]]
name = "e"
{extra}'''
    return parse_spec(text, "tiny").model_dump(mode="json")
