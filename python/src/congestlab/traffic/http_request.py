"""The measured request: one GET with curl from the client namespace, over HTTP/1.1 or
HTTP/2, plain or TLS (the run's CA file is the only one trusted); what it negotiated (HTTP
version, TLS version) and curl's phase times are recorded. A GET that negotiated another HTTP
version than the one asked for is not ok: it is never measured as the other."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass

from congestlab.errors import ToolError


@dataclass
class RequestResult:
    family: str
    url: str
    ok: bool
    http_code: int
    size_download: int
    local_port: int
    time_total_s: float
    error: str = ""
    http_negotiated: str | None = None  # "1.1", "2"; None: not known (no response, or the browser)
    tls_version: str | None = None  # e.g. "TLSv1.3" (curl -v); None over plain TCP
    # curl's phase times from the start: TCP connected, TLS done, request about to go, first byte
    time_connect_s: float | None = None
    time_appconnect_s: float | None = None
    time_pretransfer_s: float | None = None
    time_starttransfer_s: float | None = None


# the version curl is told to use: plain HTTP/2 is h2c by prior knowledge (no Upgrade round)
_HTTP_FLAGS = {("1.1", False): "--http1.1", ("1.1", True): "--http1.1", ("2", False): "--http2-prior-knowledge",
               ("2", True): "--http2"}
_TLS_LINE = re.compile(r"SSL connection using (TLSv[\d.]+)")


def http_flag(http: str, tls: bool) -> str:
    """curl's option for one HTTP version (over TLS or plain)."""
    return _HTTP_FLAGS[(http, tls)]


def url_for(addr: str, port: int, path: str, tls: bool = False) -> str:
    host = f"[{addr}]" if ":" in addr else addr
    return f"{'https' if tls else 'http'}://{host}:{port}{path}"


# the TLS version a GET asks for: exactly that one
_TLS_FLAGS = {"1.2": ["--tlsv1.2", "--tls-max", "1.2"], "1.3": ["--tlsv1.3"], None: []}


def curl_argv(url: str, family: str, timeout_s: float, http: str = "1.1", ca_file: str | None = None,
              tls_version: str | None = None) -> list[str]:
    """curl for one GET of `url` over `http`; an https URL trusts `ca_file` only, speaks
    `tls_version` (None: what curl and the server agree on) and adds `-v`, whose stderr
    names the TLS version negotiated."""
    exe = shutil.which("curl") or "curl"
    tls = url.startswith("https:")
    if tls and not ca_file:
        raise ValueError(f"{url}: a TLS GET needs the run's CA file")
    trust = ["--cacert", ca_file, *_TLS_FLAGS[tls_version], "-v"] if tls else []
    return [exe, "-s", http_flag(http, tls), *trust, "-4" if family == "v4" else "-6", "--max-time",
            f"{timeout_s:g}", "-o", "/dev/null", "-w", "%{json}", url]


def parse_curl_json(family: str, url: str, expected_bytes: int, proc: subprocess.CompletedProcess,
                    http: str = "1.1", tls_version: str | None = None) -> RequestResult:
    """The GET's result; not ok unless it answered 200 with every byte over `http` (and
    over TLS `tls_version`, when one is asked for)."""
    try:
        info = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        detail = stderr_tail(proc.stderr) if url.startswith("https:") else proc.stderr.strip()
        return RequestResult(family, url, False, 0, 0, 0, 0.0, f"curl exited {proc.returncode}: {detail}")
    tls = _TLS_LINE.search(proc.stderr or "") if url.startswith("https:") else None
    return result_from_info(family, url, expected_bytes, info, proc.returncode == 0, http, tls_version,
                            tls.group(1) if tls else None)


def result_from_info(family: str, url: str, expected_bytes: int, info: dict, exited_ok: bool, http: str,
                     tls_version: str | None, negotiated_tls: str | None) -> RequestResult:
    """A GET's result from curl's `-w %{json}` fields (traffic/cffi_get.py prints the same
    names): ok only for 200 with every byte over `http` and, when `tls_version` is asked for,
    over that TLS version (`negotiated_tls`, e.g. "TLSv1.3", or None: not known)."""
    code = int(info.get("http_code") or info.get("response_code") or 0)
    size = int(info.get("size_download") or 0)
    negotiated = _http_version(info.get("http_version"))
    ok = exited_ok and code == 200 and size == expected_bytes
    error = "" if ok else (info.get("errormsg") or f"http {code}, {size} of {expected_bytes} bytes")
    if ok and negotiated != http:
        ok, error = False, f"negotiated HTTP/{negotiated}, not the requested HTTP/{http}"
    if ok and tls_version and negotiated_tls != f"TLSv{tls_version}":
        ok, error = False, f"negotiated {negotiated_tls or 'an unknown TLS version'}, not the requested " \
                           f"TLSv{tls_version}"

    def phase(name: str) -> float | None:
        value = info.get(name)
        return float(value) if value else None
    return RequestResult(family, url, ok, code, size, int(info.get("local_port") or 0),
                         float(info.get("time_total") or 0.0), error or "", negotiated, negotiated_tls,
                         phase("time_connect"), phase("time_appconnect"), phase("time_pretransfer"),
                         phase("time_starttransfer"))


def _http_version(value) -> str | None:
    """curl's `http_version` ("1.1", "2", "0" before any response; an HTTP/1.0 answer is "1")
    as a version or None."""
    text = str(value or "0")
    return None if text == "0" else {"1": "1.0"}.get(text, text)


def stderr_tail(stderr: str | None) -> str:
    """The last line of a client's stderr (curl's with -v holds the whole exchange)."""
    lines = (stderr or "").strip().splitlines()
    return lines[-1].strip() if lines else ""


def curl_version() -> str:
    exe = shutil.which("curl")
    if not exe:
        raise ToolError(["curl"], None)
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=5).stdout
    match = re.match(r"curl (\S+)", out)
    return match.group(1) if match else out.split("\n")[0]
