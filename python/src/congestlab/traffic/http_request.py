"""The measured request: one ordinary HTTP/1.1 GET with curl from the client namespace."""

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


def url_for(addr: str, port: int, path: str) -> str:
    host = f"[{addr}]" if ":" in addr else addr
    return f"http://{host}:{port}{path}"


def curl_argv(url: str, family: str, timeout_s: float) -> list[str]:
    exe = shutil.which("curl") or "curl"
    return [exe, "-s", "--http1.1", "-4" if family == "v4" else "-6", "--max-time", f"{timeout_s:g}",
            "-o", "/dev/null", "-w", "%{json}", url]


def parse_curl_json(family: str, url: str, expected_bytes: int, proc: subprocess.CompletedProcess) -> RequestResult:
    try:
        info = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return RequestResult(family, url, False, 0, 0, 0, 0.0, f"curl exited {proc.returncode}: {proc.stderr.strip()}")
    code = int(info.get("http_code") or info.get("response_code") or 0)
    size = int(info.get("size_download") or 0)
    ok = proc.returncode == 0 and code == 200 and size == expected_bytes
    error = "" if ok else (info.get("errormsg") or f"http {code}, {size} of {expected_bytes} bytes")
    return RequestResult(family, url, ok, code, size, int(info.get("local_port") or 0),
                         float(info.get("time_total") or 0.0), error or "")


def curl_version() -> str:
    exe = shutil.which("curl")
    if not exe:
        raise ToolError(["curl"], None)
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=5).stdout
    match = re.match(r"curl (\S+)", out)
    return match.group(1) if match else out.split("\n")[0]
