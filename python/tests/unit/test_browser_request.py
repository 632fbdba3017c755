"""The measured request by headless Chromium: the DevTools pipe, the outcome of a download,
and which captured connection the analysis takes as the one that carried the file."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from pydantic import ValidationError

from congestlab.analysis.metrics import ConnectionMetrics
from congestlab.analysis.request_rows import pick_browser_connection
from congestlab.analysis.trace import PcapConnection
from congestlab.spec.get_workload import GetWorkload
from congestlab.traffic.chromium import DevToolsPipe, chromium_argv, fetch_outcome
from record_fixtures import get_record

FILE_B = 320 * 1024
URL = "http://10.0.4.11:80/320KiB.bin"
ROW = get_record(family="v4", client_addr="10.0.0.10", file_kib=320, start_ts=100.0, end_ts=101.0, client_port=None)


def conn(port: int, payload: int | None, client: str = "10.0.0.10", family: str = "v4", first_ts: float = 100.1,
         error: str | None = None) -> PcapConnection:
    metrics = None if payload is None else ConnectionMetrics(family, port, 40.0, 60.0, 61.0, 59.0, 0, 1, 1, payload)
    return PcapConnection(port, family, client, port, "10.0.4.11", 80, first_ts, first_ts + 0.5, 0, metrics,
                          error if payload is None else None)


def test_the_connection_that_carried_the_file_is_picked_among_extra_ones():
    conns = [conn(40001, None, error="no request from the client"),  # speculative preconnect
             conn(40002, FILE_B),
             conn(40003, 150),  # /favicon.ico: a short 404
             conn(40004, 2 * FILE_B, client="10.0.0.20"),  # another host's download
             conn(40005, FILE_B, family="v6", client="fd00::10"),  # the other family
             conn(40006, FILE_B, first_ts=200.0)]  # an earlier or later request
    chosen, why = pick_browser_connection(conns, ROW)
    assert chosen is not None and chosen.client_port == 40002, why


def test_no_or_two_carriers_are_reported_with_what_was_seen():
    chosen, why = pick_browser_connection([conn(40001, None, error="no request from the client"), conn(40003, 150)], ROW)
    assert chosen is None
    assert "no connection from 10.0.0.10 carried the 327680 B file" in why
    assert "port 40001: no request from the client" in why and "port 40003: 150 B" in why
    chosen, why = pick_browser_connection([conn(40002, FILE_B), conn(40007, FILE_B)], ROW)
    assert chosen is None and "ambiguous" in why
    v6 = ROW.model_copy(update={"family": "v6", "client_addr": "fd00:0:0:0::10"})  # written another way: same address
    chosen, _ = pick_browser_connection([conn(40005, FILE_B, family="v6", client="fd00::10")], v6)
    assert chosen is not None


def _progress(state: str, received: int) -> dict:
    return {"method": "Browser.downloadProgress", "params": {"state": state, "receivedBytes": received}}


def _response(status: int, url: str = URL) -> dict:
    return {"method": "Network.responseReceived", "params": {"response": {"url": url, "status": status}}}


def test_download_outcome_from_devtools_events():
    assert fetch_outcome([_response(200), _progress("inProgress", 0), _progress("completed", FILE_B)], URL, FILE_B) \
        == (True, 200, FILE_B, "")
    ok, status, _, error = fetch_outcome([_response(200), _progress("canceled", 1000)], URL, FILE_B)
    assert not ok and status == 200 and "download canceled, 1000 of 327680" in error
    ok, status, _, error = fetch_outcome([_response(404)], URL, FILE_B)
    assert not ok and status == 404 and "http 404" in error
    failed = {"method": "Network.loadingFailed", "params": {"errorText": "net::ERR_CONNECTION_REFUSED"}}
    assert fetch_outcome([failed], URL, FILE_B)[3] == "net::ERR_CONNECTION_REFUSED"
    # Chromium writes the URL without the default port
    assert fetch_outcome([_response(200, "http://10.0.4.11/320KiB.bin"), _progress("completed", FILE_B)], URL, FILE_B)[0]
    v6 = "http://[fd00:0:0:4::b]:80/320KiB.bin"
    assert fetch_outcome([_response(200, "http://[fd00:0:0:4::b]/320KiB.bin"), _progress("completed", FILE_B)],
                         v6, FILE_B)[0]
    # a response for another URL (e.g. /favicon.ico) does not count as the file's
    assert not fetch_outcome([_response(200, URL.replace("320KiB.bin", "favicon.ico")),
                              _progress("completed", FILE_B)], URL, FILE_B)[0]


def test_devtools_pipe_keeps_events_and_has_a_deadline():
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()

    def browser():  # answers the first command after one event, then stays silent
        request = json.loads(os.read(to_r, 4096).split(b"\0")[0])
        event = {"method": "Target.targetCreated", "params": {}}
        reply = {"id": request["id"], "result": {"targetId": "T1"}}
        os.write(from_w, json.dumps(event).encode() + b"\0" + json.dumps(reply).encode() + b"\0")

    thread = threading.Thread(target=browser)
    thread.start()
    pipe = DevToolsPipe(to_w, from_r)
    try:
        assert pipe.call("Target.createTarget", {"url": "about:blank"}) == {"targetId": "T1"}
        assert [e["method"] for e in pipe.events] == ["Target.targetCreated"]
        assert pipe.next_event(time.monotonic())["method"] == "Target.targetCreated"
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            pipe.next_event(time.monotonic() + 0.2)
        assert time.monotonic() - start < 5
    finally:
        thread.join()
        for fd in (to_r, to_w, from_r, from_w):
            os.close(fd)


def test_chromium_gets_a_fresh_profile_and_the_pipe(tmp_path, monkeypatch):
    monkeypatch.setattr("congestlab.traffic.chromium.chromium_binary", lambda: "/usr/bin/chromium")
    argv = chromium_argv(tmp_path / "profile")
    assert argv[:2] == ["sh", "-c"] and "3<&0 4>&1" in argv[2]
    assert f"--user-data-dir={tmp_path / 'profile'}" in argv and "--remote-debugging-pipe" in argv
    assert "--headless" in argv


def test_get_workload_client_kinds():
    base = {"name": "get", "kind": "get", "requests": [{"client": "client", "server": "apache"}]}
    assert GetWorkload(**base).client_kind == "curl"
    assert GetWorkload(**base, client_kind="chromium").client_kind == "chromium"
    with pytest.raises(ValidationError, match="client_kind"):
        GetWorkload(**base, client_kind="firefox")


def test_the_browser_is_told_what_to_speak_over_tls():
    from congestlab.traffic.chromium import protocol_flags
    https = "https://[fd00::4:11]:4433/320KiB.bin"
    assert protocol_flags(URL, "1.1", None, None) == ()  # plain HTTP/1.1: as before
    assert protocol_flags(https, "1.1", "AbC=", None) == ("--ignore-certificate-errors-spki-list=AbC=",
                                                          "--disable-http2")
    assert protocol_flags(https, "2", "AbC=", None) == ("--ignore-certificate-errors-spki-list=AbC=",)
    assert protocol_flags(https, "3", "AbC=", "/r/quic/keys.log") == (
        "--ignore-certificate-errors-spki-list=AbC=", "--enable-quic", "--origin-to-force-quic-on=*",
        "--ssl-key-log-file=/r/quic/keys.log")
    with pytest.raises(ValueError, match="needs the run's certificate hash"):
        protocol_flags(https, "2", None, None)


@pytest.mark.parametrize("protocol, security, want", [
    ("h3", "QUIC", ("3", "TLSv1.3")), ("h2", "TLS 1.3", ("2", "TLSv1.3")), ("http/1.1", "TLS 1.2", ("1.1", "TLSv1.2")),
    ("http/1.1", None, ("1.1", None)),
])
def test_what_the_browser_negotiated_comes_from_its_response(protocol, security, want):
    from congestlab.traffic.chromium import negotiated
    response = {"url": URL, "status": 200, "protocol": protocol}
    if security:
        response["securityDetails"] = {"protocol": security}
    assert negotiated([{"method": "Network.responseReceived", "params": {"response": response}}], URL) == want
    assert negotiated([], URL) == (None, None)


def test_the_run_certificate_spki_hash_is_what_openssl_would_give(tmp_path):
    import base64
    import hashlib
    import subprocess
    from congestlab.servers.tls import make_run_certificates
    certs = make_run_certificates(tmp_path, ["10.0.0.1"])
    pub = subprocess.run(["openssl", "x509", "-in", str(certs.cert), "-pubkey", "-noout"], capture_output=True,
                         check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub, capture_output=True,
                         check=True).stdout
    assert certs.spki_sha256_b64() == base64.b64encode(hashlib.sha256(der).digest()).decode()
