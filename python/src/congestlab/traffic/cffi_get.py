"""The measured GET with curl-cffi (libcurl with BoringSSL, nghttp2 and ngtcp2): one client
stack for HTTP/1.1, 2 and 3, so that a study comparing them does not also compare client
libraries. One GET per process, run from the client's namespace:

    python -m congestlab.traffic.cffi_get --url U --family v4|v6 --http 1.1|2|3 --timeout-s S
        [--ca-file F] [--tls-version 1.2|1.3]

prints one JSON line with curl's `-w %{json}` names (http_code, size_download, local_port,
http_version, time_connect, ...) plus the wall-clock time just before and after `perform()`
(interpreter start-up and imports stay outside the timed GET) and the process's CPU time
inside it. It exits 0 whether or not the GET succeeded (the JSON says why it did not); only
bad arguments or a failed import exit otherwise. As a program it imports the standard library,
curl_cffi and traffic/http_request.py only (that chain loads in a few ms; curl_cffi itself takes
the rest of the start-up).

HTTP/3 is asked for with V3ONLY: libcurl's V3 falls back to TCP without a word. A TLS version,
when asked for, is both the least and the most libcurl allows, so a completed handshake proves
it; QUIC carries TLS 1.3 only (libcurl refuses a lower pin over QUIC). The key log and the qlog
come from libcurl's own environment variables (SSLKEYLOGFILE, QLOGDIR): `cffi_env` names them
and `cffi_argv` puts them in front of the command with env(1), so the recorded command line is
the whole of what ran."""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from curl_cffi import Curl, CurlError, CurlHttpVersion, CurlInfo, CurlOpt, CurlSslVersion
from curl_cffi import __curl_version__, __version__

from congestlab.traffic.http_request import RequestResult, result_from_info, stderr_tail

MODULE = "congestlab.traffic.cffi_get"
HTTP_VERSIONS = ("1.1", "2", "3")
TLS_VERSIONS = {"1.2": CurlSslVersion.TLSv1_2, "1.3": CurlSslVersion.TLSv1_3}
# CURLINFO_HTTP_VERSION's CURL_HTTP_VERSION_* numbers, spelt as curl's -w %{http_version}
_NEGOTIATED = {0: "0", 1: "1", 2: "1.1", 3: "2", 30: "3"}
# curl's phase times (CURLINFO_*_TIME_T, in µs) under their -w %{json} names (seconds)
_PHASES = {"time_namelookup": CurlInfo.NAMELOOKUP_TIME_T, "time_connect": CurlInfo.CONNECT_TIME_T,
           "time_appconnect": CurlInfo.APPCONNECT_TIME_T, "time_pretransfer": CurlInfo.PRETRANSFER_TIME_T,
           "time_starttransfer": CurlInfo.STARTTRANSFER_TIME_T, "time_total": CurlInfo.TOTAL_TIME_T}
_CURL_ERROR_TAIL = ". See https://curl.se/"  # what curl_cffi appends to libcurl's message


def _version_option(http: str, tls: bool) -> CurlHttpVersion:
    """libcurl's HTTP version for `http`: no fallback for HTTP/3; plain HTTP/2 by prior
    knowledge (no Upgrade round), over TLS by ALPN (a server without h2 answers in 1.1)."""
    if http == "3":
        return CurlHttpVersion.V3ONLY
    if http == "2":
        return CurlHttpVersion.V2_0 if tls else CurlHttpVersion.V2_PRIOR_KNOWLEDGE
    return CurlHttpVersion.V1_1


def cffi_env(keylog: Path | None, qlog_dir: Path | None) -> dict[str, str]:
    """libcurl's environment for the TLS secrets (NSS key log format, appended to) and, over
    HTTP/3, a qlog per connection (QLOGDIR/<client SCID hex>.sqlog: ngtcp2's JSON-SEQ qlog 0.3,
    times in integer ms from the connection's start; the program makes the directory); None
    leaves either off."""
    env = {}
    if keylog is not None:
        env["SSLKEYLOGFILE"] = str(keylog)
    if qlog_dir is not None:
        env["QLOGDIR"] = str(qlog_dir)
    return env


def cffi_argv(url: str, family: str, timeout_s: float, http: str = "1.1", ca_file: str | None = None,
              tls_version: str | None = None, env: dict[str, str] | None = None) -> list[str]:
    """This module as a program for one GET of `url` over `http`; an https URL trusts
    `ca_file` only and speaks exactly `tls_version` (None: what both ends agree on); `env`
    (`cffi_env`) goes in front with env(1)."""
    tls = url.startswith("https:")
    if tls and not ca_file:
        raise ValueError(f"{url}: a TLS GET needs the run's CA file")
    if http == "3" and not tls:
        raise ValueError(f"{url}: HTTP/3 needs an https URL (QUIC is always TLS)")
    if http not in HTTP_VERSIONS or family not in ("v4", "v6"):
        raise ValueError(f"no GET over HTTP/{http} and {family}")
    argv = [sys.executable, "-m", MODULE, "--url", url, "--family", family, "--http", http,
            "--timeout-s", f"{timeout_s:g}"]
    if tls:
        argv += ["--ca-file", ca_file]
        if tls_version:
            argv += ["--tls-version", tls_version]
    prefix = [shutil.which("env") or "env", *(f"{k}={v}" for k, v in env.items())] if env else []
    return prefix + argv


def parse_cffi_json(family: str, url: str, expected_bytes: int, proc: subprocess.CompletedProcess,
                    http: str = "1.1", tls_version: str | None = None) -> tuple[RequestResult, float | None]:
    """The GET's result (the rules of traffic/http_request.py `parse_curl_json`) and the
    wall-clock time its `perform()` began (None when the program printed nothing usable).
    The TLS version is the one the handshake was held to (HTTP/3: 1.3), known only once it
    completed; a TLS GET not held to one has none."""
    try:
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        if not isinstance(info, dict):
            raise ValueError(info)
    except (ValueError, IndexError):
        result = RequestResult(family, url, False, 0, 0, 0, 0.0,
                               f"cffi_get exited {proc.returncode}: {stderr_tail(proc.stderr)}")
        return result, None
    held = info.get("tls_version")
    negotiated_tls = f"TLSv{held}" if url.startswith("https:") and held and info.get("time_appconnect") else None
    exited_ok = proc.returncode == 0 and info.get("exitcode") == 0
    result = result_from_info(family, url, expected_bytes, info, exited_ok, http, tls_version, negotiated_tls)
    start = info.get("perform_start_ts")
    return result, float(start) if start is not None else None


def cffi_version() -> str:
    """curl_cffi's version and its libcurl's (with BoringSSL, nghttp2, ngtcp2, nghttp3)."""
    return f"curl_cffi/{__version__} {__curl_version__}"


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def get_once(url: str, family: str, http: str, timeout_s: float, ca_file: str | None = None,
             tls_version: str | None = None) -> dict:
    """One GET; what it did, under curl's `-w %{json}` names where curl has one."""
    tls = url.startswith("https:")
    curl = Curl()
    received = 0

    def discard(chunk: bytes) -> int:
        nonlocal received
        received += len(chunk)
        return len(chunk)

    curl.setopt(CurlOpt.URL, url.encode())
    curl.setopt(CurlOpt.IPRESOLVE, 1 if family == "v4" else 2)  # CURL_IPRESOLVE_V4 / _V6
    curl.setopt(CurlOpt.HTTP_VERSION, _version_option(http, tls))
    curl.setopt(CurlOpt.TIMEOUT_MS, int(timeout_s * 1000))
    curl.setopt(CurlOpt.NOSIGNAL, 1)
    curl.setopt(CurlOpt.NOPROXY, b"*")  # never through a proxy from the environment
    curl.setopt(CurlOpt.WRITEFUNCTION, discard)
    if tls:
        curl.setopt(CurlOpt.CAINFO, ca_file.encode())
        if tls_version:
            pinned = TLS_VERSIONS[tls_version]
            curl.setopt(CurlOpt.SSLVERSION, pinned | (pinned << 16))  # min | CURL_SSLVERSION_MAX_*
    exitcode, errormsg = 0, ""
    cpu_before = _cpu_s()
    start = time.time()
    try:
        curl.perform()
    except CurlError as err:
        exitcode, errormsg = int(err.code or 0), str(err)
        if "curl: (" in errormsg:  # "Failed to perform, curl: (7) <libcurl's message>. See https://..."
            errormsg = errormsg.split(") ", 1)[1].split(_CURL_ERROR_TAIL, 1)[0]
    end = time.time()
    cpu_after = _cpu_s()
    out = {"http_code": curl.getinfo(CurlInfo.RESPONSE_CODE), "size_download": curl.getinfo(CurlInfo.SIZE_DOWNLOAD_T),
           "bytes_written": received, "local_ip": curl.getinfo(CurlInfo.LOCAL_IP).decode() or None,
           "local_port": max(curl.getinfo(CurlInfo.LOCAL_PORT), 0),  # libcurl: -1 before a connection
           "http_version": _NEGOTIATED.get(curl.getinfo(CurlInfo.HTTP_VERSION), "0"),
           **{name: curl.getinfo(info) / 1e6 for name, info in _PHASES.items()},
           "tls_version": ("1.3" if http == "3" else tls_version) if tls else None,
           "perform_start_ts": start, "perform_end_ts": end,
           "client_cpu_ms": round((cpu_after - cpu_before) * 1000, 3), "startup_cpu_ms": round(cpu_before * 1000, 3),
           "exitcode": exitcode, "errormsg": errormsg, "curl_version": __curl_version__}
    curl.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description="one GET with curl-cffi, as JSON")
    parser.add_argument("--url", required=True)
    parser.add_argument("--family", required=True, choices=("v4", "v6"))
    parser.add_argument("--http", required=True, choices=HTTP_VERSIONS)
    parser.add_argument("--timeout-s", required=True, type=float)
    parser.add_argument("--ca-file")
    parser.add_argument("--tls-version", choices=sorted(TLS_VERSIONS))
    args = parser.parse_args(argv)
    if args.url.startswith("https:") and not args.ca_file:
        parser.error("an https URL needs --ca-file")
    if args.http == "3" and not args.url.startswith("https:"):
        parser.error("HTTP/3 needs an https URL")
    if os.environ.get("QLOGDIR"):
        Path(os.environ["QLOGDIR"]).mkdir(parents=True, exist_ok=True)  # libcurl writes no qlog without it
    print(json.dumps(get_once(args.url, args.family, args.http, args.timeout_s, args.ca_file, args.tls_version)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
