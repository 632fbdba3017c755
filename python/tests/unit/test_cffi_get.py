"""The measured GET with curl-cffi (traffic/cffi_get.py): its command line and environment,
its JSON line read by the rules of curl's (a GET that negotiated another HTTP or TLS version
than asked is not ok), what it imports as a program; the last tests run the program against
a TLS server on loopback (no namespace)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tls_loopback import tls_file_server

from congestlab.traffic.cffi_get import MODULE, cffi_argv, cffi_env, cffi_version, main, parse_cffi_json

URL = "https://10.9.1.2:8443/1KiB.bin"
PHASES = {"time_namelookup": 0.00004, "time_connect": 0.010, "time_appconnect": 0.011, "time_pretransfer": 0.0112,
          "time_starttransfer": 0.022, "time_total": 0.030}


def _cffi(returncode: int = 0, stderr: str = "", **info) -> subprocess.CompletedProcess:
    body = {"http_code": 200, "size_download": 1024, "bytes_written": 1024, "local_ip": "10.9.1.1",
            "local_port": 40000, "http_version": "3", **PHASES, "tls_version": "1.3",
            "perform_start_ts": 1700000000.25, "perform_end_ts": 1700000000.28, "client_cpu_ms": 2.5,
            "startup_cpu_ms": 150.0, "exitcode": 0, "errormsg": "", "curl_version": "libcurl/8.23.0", **info}
    return subprocess.CompletedProcess(["python"], returncode, json.dumps(body) + "\n", stderr)


def test_the_program_is_this_module_told_the_get():
    argv = cffi_argv(URL, "v4", 30.0, "3", "/run/tls/ca.pem", "1.3")
    assert argv[:3] == [sys.executable, "-m", MODULE]
    assert argv[3:] == ["--url", URL, "--family", "v4", "--http", "3", "--timeout-s", "30",
                        "--ca-file", "/run/tls/ca.pem", "--tls-version", "1.3"]
    plain = cffi_argv("http://[fd00:9:0:1::2]:80/1KiB.bin", "v6", 2.5, "2")
    assert plain[3:] == ["--url", "http://[fd00:9:0:1::2]:80/1KiB.bin", "--family", "v6", "--http", "2",
                         "--timeout-s", "2.5"]  # no CA, no TLS version over plain TCP
    assert "--tls-version" not in cffi_argv(URL, "v4", 30.0, "2", "/ca.pem")  # what both ends agree on


@pytest.mark.parametrize("url, http, ca, match", [
    (URL, "1.1", None, "a TLS GET needs the run's CA file"),
    ("http://10.9.1.2:80/1KiB.bin", "3", None, "HTTP/3 needs an https URL"),
    (URL, "1.0", "/ca.pem", "no GET over HTTP/1.0"),
])
def test_a_get_that_cannot_be_made_is_refused(url, http, ca, match):
    with pytest.raises(ValueError, match=match):
        cffi_argv(url, "v4", 30.0, http, ca)


def test_the_key_log_and_the_qlog_go_in_front_with_env(tmp_path):
    assert cffi_env(None, None) == {}
    env = cffi_env(tmp_path / "keys.log", tmp_path / "qlog")
    assert env == {"SSLKEYLOGFILE": str(tmp_path / "keys.log"), "QLOGDIR": str(tmp_path / "qlog")}
    assert cffi_env(None, tmp_path / "qlog") == {"QLOGDIR": str(tmp_path / "qlog")}
    argv = cffi_argv(URL, "v4", 30.0, "3", "/ca.pem", "1.3", env=env)
    assert Path(argv[0]).name == "env"
    assert argv[1:3] == [f"SSLKEYLOGFILE={tmp_path / 'keys.log'}", f"QLOGDIR={tmp_path / 'qlog'}"]
    assert argv[3:] == cffi_argv(URL, "v4", 30.0, "3", "/ca.pem", "1.3")
    assert cffi_argv(URL, "v4", 30.0, "3", "/ca.pem", "1.3", env={})[0] == sys.executable


def test_an_http3_get_records_what_it_negotiated_its_phases_and_when_it_began():
    result, start = parse_cffi_json("v4", URL, 1024, _cffi(), "3", "1.3")
    assert result.ok and result.error == ""
    assert (result.http_negotiated, result.tls_version) == ("3", "TLSv1.3")
    assert (result.time_connect_s, result.time_appconnect_s, result.time_pretransfer_s,
            result.time_starttransfer_s, result.time_total_s) == (0.010, 0.011, 0.0112, 0.022, 0.030)
    assert (result.http_code, result.size_download, result.local_port) == (200, 1024, 40000)
    assert start == 1700000000.25


def test_a_get_that_negotiated_another_http_version_is_not_ok():
    fell_back, _ = parse_cffi_json("v4", URL, 1024, _cffi(http_version="2"), "3", "1.3")
    assert not fell_back.ok and fell_back.error == "negotiated HTTP/2, not the requested HTTP/3"
    down, _ = parse_cffi_json("v6", URL, 1024, _cffi(http_version="1.1"), "2", "1.3")
    assert not down.ok and down.error == "negotiated HTTP/1.1, not the requested HTTP/2"
    assert down.time_total_s == 0.030  # recorded as it happened


def test_an_http3_get_to_a_server_without_quic_keeps_curls_reason():
    refused = _cffi(http_code=0, size_download=0, bytes_written=0, local_ip=None, local_port=0, http_version="0",
                    time_connect=0.0, time_appconnect=0.0, exitcode=7,
                    errormsg="QUIC: connection to 10.9.1.2 port 8443 refused")
    result, start = parse_cffi_json("v4", URL, 1024, refused, "3", "1.3")
    assert not result.ok and result.error == "QUIC: connection to 10.9.1.2 port 8443 refused"
    assert result.http_negotiated is None and result.tls_version is None  # no handshake: no TLS version
    assert result.time_connect_s is None and start == 1700000000.25
    # a curl error after a 200 with every byte (e.g. the connection's close) is not ok either
    late, _ = parse_cffi_json("v4", URL, 1024, _cffi(exitcode=56, errormsg="Failure when receiving data"), "3")
    assert not late.ok and late.error == "Failure when receiving data"


def test_the_tls_version_is_the_one_the_handshake_was_held_to():
    older, _ = parse_cffi_json("v4", URL, 1024, _cffi(http_version="2", tls_version="1.2"), "2", "1.3")
    assert not older.ok and older.error == "negotiated TLSv1.2, not the requested TLSv1.3"
    free, _ = parse_cffi_json("v4", URL, 1024, _cffi(http_version="2", tls_version=None), "2")
    assert free.ok and free.tls_version is None  # not held to one: not known
    held, _ = parse_cffi_json("v4", URL, 1024, _cffi(http_version="2", tls_version=None), "2", "1.3")
    assert not held.ok and held.error == "negotiated an unknown TLS version, not the requested TLSv1.3"
    plain, _ = parse_cffi_json("v4", "http://10.9.1.2:80/1KiB.bin", 1024,
                               _cffi(http_version="1.1", tls_version=None, time_appconnect=0), "1.1")
    assert plain.ok and plain.tls_version is None and plain.time_appconnect_s is None


@pytest.mark.parametrize("stdout, stderr, error", [
    ("", "ModuleNotFoundError: No module named 'curl_cffi'\n", "cffi_get exited 1: ModuleNotFoundError: No module "
                                                                 "named 'curl_cffi'"),
    ("not json\n", "", "cffi_get exited 1: "),
    ("[1, 2]\n", "", "cffi_get exited 1: "),
])
def test_output_that_is_not_the_json_line_is_a_failed_get(stdout, stderr, error):
    result, start = parse_cffi_json("v4", URL, 1024, subprocess.CompletedProcess(["python"], 1, stdout, stderr), "3")
    assert not result.ok and start is None
    assert result.error == error


def test_bad_arguments_exit_non_zero(capsys):
    for argv in (["--url", URL, "--family", "v5", "--http", "2", "--timeout-s", "1"],
                 ["--url", URL, "--family", "v4", "--http", "2", "--timeout-s", "1"],  # https without a CA
                 ["--url", "http://10.9.1.2/1KiB.bin", "--family", "v4", "--http", "3", "--timeout-s", "1"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
    assert capsys.readouterr().out == ""


def test_the_program_imports_nothing_heavy_of_congestlab():
    code = (f"import sys, {MODULE}; print(sorted(m for m in sys.modules if m.startswith('congestlab')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(out.replace("'", '"')) == ["congestlab", "congestlab.errors", "congestlab.traffic",
                                                 "congestlab.traffic.cffi_get", "congestlab.traffic.http_request"]


def test_the_version_names_curl_cffi_and_its_libcurl():
    version = cffi_version()
    assert version.startswith("curl_cffi/") and " libcurl/" in version


def test_the_program_over_tls_on_loopback(tmp_path):
    """Python's server speaks HTTP/1.1 over TCP only: the HTTP/1.1 GET is ok and held to
    TLS 1.2; asked for HTTP/2, libcurl settles for HTTP/1.1 by ALPN (not ok); asked for
    HTTP/3, nobody answers on UDP (not ok, with libcurl's reason, well within the timeout)."""
    results = {}
    with tls_file_server(tmp_path) as (url, certs):
        for http, tls_version in (("1.1", "1.2"), ("2", "1.3"), ("3", "1.3")):
            env = cffi_env(tmp_path / "keys.log", None) if http == "1.1" else None
            argv = cffi_argv(url, "v4", 10.0, http, str(certs.ca), tls_version, env)
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            assert proc.returncode == 0, proc.stderr
            results[http] = (*parse_cffi_json("v4", url, 1024, proc, http, tls_version), json.loads(proc.stdout))
    good, start, info = results["1.1"]
    assert good.ok, good.error
    assert (good.http_negotiated, good.tls_version) == ("1.1", "TLSv1.2")
    assert 0 < good.time_connect_s <= good.time_appconnect_s <= good.time_pretransfer_s
    assert good.time_pretransfer_s <= good.time_starttransfer_s <= good.time_total_s
    assert start <= info["perform_end_ts"] and info["bytes_written"] == 1024 and info["local_ip"] == "127.0.0.1"
    assert good.local_port > 0 and info["client_cpu_ms"] > 0
    assert "CLIENT_RANDOM" in (tmp_path / "keys.log").read_text()  # TLS 1.2's key log line
    fell_back = results["2"][0]
    assert not fell_back.ok and fell_back.error == "negotiated HTTP/1.1, not the requested HTTP/2"
    no_quic = results["3"][0]
    assert not no_quic.ok and no_quic.http_negotiated is None and "QUIC" in no_quic.error
    assert no_quic.time_total_s < 10.0
