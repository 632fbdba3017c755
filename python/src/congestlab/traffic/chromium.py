"""The measured request by a browser: headless Chromium (Debian's `chromium`) fetching the
file as a download, driven over the DevTools protocol on a pipe.

`--remote-debugging-pipe` reads commands on fd 3 and writes replies and events on fd 4, each
one JSON message ending in NUL; a shell line moves our two pipes onto those fds. Every fetch
gets a fresh profile and download directory (no cache, no cookies carried over) in a temp
dir beside its log in the run directory, removed afterwards; the browser is closed over the
protocol, and its main process and every descendant still alive are killed by PID. Chromium
does not say which local port carried the file: the analysis picks that connection from the
capture (analysis/run_analysis.py, `pick_browser_connection`).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from congestlab.errors import ToolError
from congestlab.testbed.namespaces import kill_pids
from congestlab.traffic.http_request import RequestResult

# a fresh profile took 4-14 s to start at load ~25 on this 2-core machine (docs/notes/seed-fit-knobs.md)
STARTUP_ALLOWANCE_S = 60.0
CLOSE_GRACE_S = 5.0
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--remote-debugging-pipe"]


def chromium_binary() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        raise ToolError(["chromium"], None, "chromium not found (the Makefile's apt list installs it)")
    return exe


def chromium_version() -> str:
    out = subprocess.run([chromium_binary(), "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.strip().removeprefix("Chromium ").split()[0] if out.strip() else "unknown"


def chromium_argv(profile_dir: Path, extra: tuple[str, ...] = ()) -> list[str]:
    """The browser's command line behind a shell that puts stdin/stdout on fds 3/4."""
    return ["sh", "-c", 'exec "$@" 3<&0 4>&1 0</dev/null 1>&2', "sh", chromium_binary(),
            f"--user-data-dir={profile_dir}", *FLAGS, *extra, "about:blank"]


# what DevTools' Network.Response.protocol says, as an HTTP version
_PROTOCOLS = {"h3": "3", "h2": "2", "http/1.1": "1.1", "http/1.0": "1.0"}


def protocol_flags(url: str, http: str, tls_spki: str | None, keylog: Path | None) -> tuple[str, ...]:
    """What makes Chromium speak the version asked over TLS: the run's server certificate
    trusted by its SPKI hash only (no CA is installed in the browser), HTTP/1.1 without h2
    (`--disable-http2`), HTTP/3 forced (no Alt-Svc round trip before it); its
    TLS secrets into `keylog` (the QUIC analysis decrypts with them)."""
    if not url.startswith("https:"):
        return ()
    if not tls_spki:
        raise ValueError(f"{url}: a TLS GET by the browser needs the run's certificate hash")
    flags = [f"--ignore-certificate-errors-spki-list={tls_spki}"]
    if http == "1.1":
        flags.append("--disable-http2")
    if http == "3":  # every origin (the browser fetches this one URL): Chromium 156 matched no [v6]:port origin
        flags += ["--enable-quic", "--origin-to-force-quic-on=*"]
    if keylog is not None:
        flags.append(f"--ssl-key-log-file={keylog}")
    return tuple(flags)


class DevToolsPipe:
    """Commands and events of one browser over its pipe pair; every read has a deadline."""

    def __init__(self, to_browser: int, from_browser: int):
        self.to_browser = to_browser
        self.from_browser = from_browser
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self.next_id

    def read(self, deadline: float) -> dict:
        while b"\0" not in self.buffer:
            ready, _, _ = select.select([self.from_browser], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise EOFError("the browser closed its pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             deadline: float | None = None) -> dict:
        """The command's result; events read meanwhile are kept in `events`."""
        wanted = self.send(method, params, session)
        deadline = deadline if deadline is not None else time.monotonic() + STARTUP_ALLOWANCE_S
        while True:
            message = self.read(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise ToolError(["chromium", method], None, str(message["error"].get("message")))
                return message.get("result", {})
            self.events.append(message)

    def next_event(self, deadline: float) -> dict:
        return self.events.pop(0) if self.events else self.read(deadline)


def same_url(a: str, b: str) -> bool:
    """Equal but for how they are written (Chromium drops a default :80)."""
    pa, pb = urlsplit(a), urlsplit(b)
    try:
        return (pa.scheme, pa.hostname, pa.port or 80, pa.path) == (pb.scheme, pb.hostname, pb.port or 80, pb.path)
    except ValueError:
        return False


def negotiated(events: list[dict], url: str) -> tuple[str | None, str | None]:
    """(HTTP version, TLS version as "TLSv1.3") the browser's response came in (DevTools'
    `protocol` and `securityDetails.protocol`), None where it does not say."""
    for event in events:
        params = event.get("params", {})
        if event.get("method") == "Network.responseReceived" and same_url(params.get("response", {}).get("url", ""),
                                                                           url):
            response = params["response"]
            protocol = str(response.get("protocol") or "")
            tls = str((response.get("securityDetails") or {}).get("protocol") or "")  # "TLS 1.3", "QUIC"
            tls = "TLSv1.3" if tls == "QUIC" else (tls.replace("TLS ", "TLSv") or None)
            return _PROTOCOLS.get(protocol, protocol or None), tls
    return None, None


def fetch_outcome(events: list[dict], url: str, expected_bytes: int) -> tuple[bool, int, int, str]:
    """(ok, http status, bytes received, error) from the DevTools events of one download."""
    status, received, error, state = 0, 0, "", ""
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Network.responseReceived" and same_url(params.get("response", {}).get("url", ""), url):
            status = int(params["response"].get("status") or 0)
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            error = error or str(params.get("errorText"))
        elif method == "Browser.downloadProgress":
            received, state = int(params.get("receivedBytes") or 0), params.get("state", "")
    ok = state == "completed" and status == 200 and received == expected_bytes
    if not ok and not error:
        error = f"http {status}, download {state or 'not started'}, {received} of {expected_bytes} bytes"
    return ok, status, received, "" if ok else error


def _done(event: dict) -> bool:
    method, params = event.get("method"), event.get("params", {})
    return (method == "Browser.downloadProgress" and params.get("state") in ("completed", "canceled")
            or method == "Network.loadingFailed" and not params.get("canceled")
            or method == "Network.responseReceived" and int(params.get("response", {}).get("status") or 200) != 200)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children first found, then theirs), from /proc."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            found += children
            todo += children
    return found


def fetch_with_chromium(tb, node: str, url: str, family: str, expected_bytes: int, timeout_s: float,
                        log_path: Path, http: str = "1.1", tls_spki: str | None = None,
                        keylog: Path | None = None, tls_version: str | None = None
                        ) -> tuple[RequestResult, list[str], float]:
    """One download of `url` by a fresh headless Chromium in `node`'s namespace (over TLS and
    HTTP/`http` as `protocol_flags` makes it). Returns the result (not ok when it came in
    another HTTP version), the browser's argv, and the wall time the navigation was sent."""
    # beside the log, inside the run directory: an interrupted run leaves nothing elsewhere
    workdir = Path(tempfile.mkdtemp(prefix="chromium-profile-", dir=log_path.parent))
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    argv = chromium_argv(workdir / "profile", protocol_flags(url, http, tls_spki, keylog))
    proc = None
    spawned: list[int] = []
    nav_epoch_s = time.time()
    try:
        with open(log_path, "ab") as log:
            proc = tb.start(node, argv, stdin=to_r, stdout=from_w, stderr=log)
        os.close(to_r)
        os.close(from_w)
        to_r = from_w = -1
        pipe = DevToolsPipe(to_w, from_r)
        (workdir / "downloads").mkdir()
        pipe.call("Browser.setDownloadBehavior",
                  {"behavior": "allow", "downloadPath": str(workdir / "downloads"), "eventsEnabled": True})
        target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        pipe.call("Network.enable", session=session)
        pipe.call("Network.setCacheDisabled", {"cacheDisabled": True}, session=session)
        nav_epoch_s = time.time()
        deadline = time.monotonic() + timeout_s
        pipe.call("Page.navigate", {"url": url}, session=session, deadline=deadline)
        seen: list[dict] = []
        try:
            while not seen or not _done(seen[-1]):
                seen.append(pipe.next_event(deadline))
        except TimeoutError:
            pass
        elapsed_s = time.time() - nav_epoch_s
        ok, status, received, error = fetch_outcome(seen, url, expected_bytes)
        if not ok and not seen:
            error = f"no response within {timeout_s:g} s"
        got, tls = negotiated(seen, url)
        if ok and got is not None and got != http:
            ok, error = False, f"negotiated HTTP/{got}, not the requested HTTP/{http}"
        if ok and tls_version and tls != f"TLSv{tls_version}":
            ok, error = False, f"negotiated {tls or 'an unknown TLS version'}, not the requested TLSv{tls_version}"
        spawned += descendants(proc.pid)  # before closing: orphans would leave our tree
        try:
            pipe.call("Browser.close", deadline=time.monotonic() + CLOSE_GRACE_S)
        except (TimeoutError, EOFError, ToolError):
            pass  # killed below
        result = RequestResult(family, url, ok, status, received, 0, elapsed_s, error, http_negotiated=got,
                               tls_version=tls)
        return result, argv, nav_epoch_s
    except (TimeoutError, EOFError) as err:
        return (RequestResult(family, url, False, 0, 0, 0, time.time() - nav_epoch_s,
                              f"chromium did not answer: {err or 'timeout'}"), argv, nav_epoch_s)
    finally:
        if proc is not None:
            _stop(tb, proc, spawned)
        for fd in (to_r, to_w, from_r, from_w):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)


def _stop(tb, proc: subprocess.Popen, spawned: list[int]) -> None:
    """Wait briefly for the browser to close itself, then kill it and every process it had
    started that is still a chromium, by PID."""
    try:
        proc.wait(timeout=CLOSE_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    left = set(spawned) | set(descendants(proc.pid) if proc.poll() is None else [])
    tb.stop(proc)
    kill_pids([pid for pid in sorted(left) if _is_chromium(pid)])


def _is_chromium(pid: int) -> bool:
    try:
        return b"chromium" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
