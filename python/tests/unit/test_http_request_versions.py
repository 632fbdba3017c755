"""The measured GET over HTTP/1.1 or HTTP/2, plain or TLS (traffic/http_request.py): curl's
flags, what it negotiated, its TLS version from `-v`, its phase times; a GET that negotiated
another HTTP version than asked is not ok. The last test runs the real curl against a TLS
server on loopback (no namespace)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tls_loopback import tls_file_server

from congestlab.traffic.http_request import curl_argv, http_flag, parse_curl_json, url_for

URL = "https://10.9.1.2:8443/1KiB.bin"
TLS_STDERR = ("*   Trying 10.9.1.2:8443...\n* Connected to 10.9.1.2 (10.9.1.2) port 8443 (#0)\n"
              "* ALPN: offers h2,http/1.1\n* SSL connection using TLSv1.3 / TLS_AES_256_GCM_SHA384\n"
              "* ALPN: server accepted h2\n< HTTP/2 200\n")
PHASES = {"time_connect": 0.010, "time_appconnect": 0.031, "time_pretransfer": 0.0312, "time_starttransfer": 0.042,
          "time_total": 0.050}


def _curl(returncode: int = 0, stderr: str = "", **info) -> subprocess.CompletedProcess:
    body = {"http_code": 200, "size_download": 1024, "local_port": 40000, "http_version": "2", **PHASES, **info}
    return subprocess.CompletedProcess(["curl"], returncode, "progress\n" + json.dumps(body) + "\n", stderr)


def test_a_tls_http2_get_records_what_it_negotiated_and_its_phases():
    result = parse_curl_json("v4", URL, 1024, _curl(stderr=TLS_STDERR), http="2")
    assert result.ok and result.error == ""
    assert (result.http_negotiated, result.tls_version) == ("2", "TLSv1.3")
    assert (result.time_connect_s, result.time_appconnect_s, result.time_pretransfer_s,
            result.time_starttransfer_s, result.time_total_s) == (0.010, 0.031, 0.0312, 0.042, 0.050)
    assert (result.http_code, result.size_download, result.local_port) == (200, 1024, 40000)


def test_a_get_that_negotiated_another_http_version_is_not_ok():
    result = parse_curl_json("v4", URL, 1024, _curl(stderr=TLS_STDERR), http="1.1")
    assert not result.ok
    assert result.error == "negotiated HTTP/2, not the requested HTTP/1.1"
    assert result.http_negotiated == "2" and result.time_total_s == 0.050  # recorded as it happened
    down = parse_curl_json("v6", URL, 1024, _curl(stderr=TLS_STDERR, http_version="1.1"), http="2")
    assert not down.ok and down.error == "negotiated HTTP/1.1, not the requested HTTP/2"
    http10 = parse_curl_json("v4", URL, 1024, _curl(stderr=TLS_STDERR, http_version="1"), http="1.1")
    assert not http10.ok and http10.http_negotiated == "1.0"  # curl spells an HTTP/1.0 answer "1"


def test_the_tls_version_comes_from_the_verbose_line_of_a_tls_get_only():
    newer = TLS_STDERR.replace("TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384 / X25519 / id-ecPublicKey")
    assert parse_curl_json("v4", URL, 1024, _curl(stderr=newer), "2").tls_version == "TLSv1.3"
    older = TLS_STDERR.replace("TLSv1.3 / TLS_AES_256_GCM_SHA384", "TLSv1.2 / ECDHE-ECDSA-AES128-GCM-SHA256")
    assert parse_curl_json("v4", URL, 1024, _curl(stderr=older), "2").tls_version == "TLSv1.2"
    plain = parse_curl_json("v4", "http://10.9.1.2:80/1KiB.bin", 1024,
                            _curl(stderr=TLS_STDERR, http_version="1.1", time_appconnect=0), "1.1")
    assert plain.ok and plain.tls_version is None
    assert plain.time_appconnect_s is None  # curl's 0: no TLS handshake


def test_a_failed_get_keeps_curls_error_and_has_no_negotiated_version():
    timed_out = _curl(returncode=28, http_code=0, size_download=0, http_version="0",
                      errormsg="Operation timed out after 30000 milliseconds with 0 bytes received")
    result = parse_curl_json("v4", URL, 1024, timed_out, "2")
    assert not result.ok and result.http_negotiated is None
    assert result.error == "Operation timed out after 30000 milliseconds with 0 bytes received"
    short = parse_curl_json("v4", URL, 1024, _curl(size_download=500), "2")
    assert not short.ok and short.error == "http 200, 500 of 1024 bytes"


def test_a_tls_get_without_json_names_the_last_line_of_its_verbose_output():
    stderr = TLS_STDERR.split("* SSL")[0] + "* SSL certificate problem: unable to get local issuer certificate\n"
    result = parse_curl_json("v4", URL, 1024, subprocess.CompletedProcess(["curl"], 60, "", stderr), "1.1")
    assert not result.ok
    assert result.error == "curl exited 60: * SSL certificate problem: unable to get local issuer certificate"


@pytest.mark.parametrize("http, tls, flag", [
    ("1.1", False, "--http1.1"), ("1.1", True, "--http1.1"), ("2", False, "--http2-prior-knowledge"),
    ("2", True, "--http2"),
])
def test_curl_is_told_the_version_asked_for(http, tls, flag):
    assert http_flag(http, tls) == flag
    url = url_for("fd00:9:0:1::2", 8443, "/1KiB.bin", tls)
    assert url == f"{'https' if tls else 'http'}://[fd00:9:0:1::2]:8443/1KiB.bin"
    argv = curl_argv(url, "v6", 30.0, http, "/run/tls/ca.pem" if tls else None)
    assert argv[1:3] == ["-s", flag] and argv[-1] == url
    assert ("--cacert" in argv) == tls and ("-v" in argv) == tls  # -v: the TLS version is read from it
    if tls:
        assert argv[argv.index("--cacert") + 1] == "/run/tls/ca.pem"
    assert "-6" in argv and argv[argv.index("--max-time") + 1] == "30"
    assert "--insecure" not in argv and "-k" not in argv


def test_a_tls_url_without_the_ca_file_is_refused():
    with pytest.raises(ValueError, match="a TLS GET needs the run's CA file"):
        curl_argv(URL, "v4", 30.0, "1.1", None)


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_real_curl_over_tls_on_loopback(tmp_path):
    """Python's server speaks HTTP/1.x only: asked for HTTP/2 over TLS, curl settles for
    HTTP/1.1 by ALPN, and that GET is not ok; nor is one a server answers in HTTP/1.0."""
    results = {}
    certs = None
    for protocol in ("HTTP/1.1", "HTTP/1.0"):
        with tls_file_server(tmp_path, protocol, certs) as (url, certs):
            for http in ("1.1", "2"):
                argv = curl_argv(url, "v4", 10.0, http, str(certs.ca))
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
                results[protocol, http] = parse_curl_json("v4", url, 1024, proc, http)
    good = results["HTTP/1.1", "1.1"]
    assert good.ok, good.error
    assert good.http_negotiated == "1.1" and good.tls_version in ("TLSv1.2", "TLSv1.3")
    assert 0 < good.time_connect_s <= good.time_appconnect_s <= good.time_pretransfer_s
    assert good.time_pretransfer_s <= good.time_starttransfer_s <= good.time_total_s
    fell_back = results["HTTP/1.1", "2"]
    assert not fell_back.ok and fell_back.error == "negotiated HTTP/1.1, not the requested HTTP/2"
    # a server that answers HTTP/1.0 (curl's "1") is not the HTTP/1.1 asked for either
    older = results["HTTP/1.0", "1.1"]
    assert not older.ok and older.http_negotiated == "1.0"
    assert older.error == "negotiated HTTP/1.0, not the requested HTTP/1.1"


def test_a_tls_get_asks_for_exactly_its_tls_version_and_is_held_to_it():
    assert curl_argv(URL, "v4", 30.0, "2", "/ca.pem", "1.3")[3:7] == ["--cacert", "/ca.pem", "--tlsv1.3", "-v"]
    assert curl_argv(URL, "v4", 30.0, "2", "/ca.pem", "1.2")[5:8] == ["--tlsv1.2", "--tls-max", "1.2"]
    assert "--tlsv1.3" not in curl_argv(URL, "v4", 30.0, "2", "/ca.pem")  # the ready check takes what it gets
    assert parse_curl_json("v4", URL, 1024, _curl(stderr=TLS_STDERR), "2", "1.3").ok
    older = TLS_STDERR.replace("TLSv1.3 / TLS_AES_256_GCM_SHA384", "TLSv1.2 / ECDHE-ECDSA-AES128-GCM-SHA256")
    result = parse_curl_json("v4", URL, 1024, _curl(stderr=older), "2", "1.3")
    assert not result.ok and result.error == "negotiated TLSv1.2, not the requested TLSv1.3"
    assert result.tls_version == "TLSv1.2"
