"""RFC 9112/9110 conformance of leanweb's HTTP/1.1, with nginx as the reference.

Raw requests (well-formed, malformed, pipelined) go from a client namespace over plain TCP
sockets to leanweb (its TAP device on the server namespace's bridge) and to nginx (the
server namespace's kernel on the same bridge), over IPv4 and IPv6. Responses are parsed
with h11, so a malformed response is caught too. Each case names the rule and every
behaviour the RFC allows; the test asserts leanweb's, records nginx's, and prints both
(docs/leanweb.md says what leanweb does and refuses). Every socket has a timeout and every
read loop a count: a server that neither answers nor closes is reported as a hang.
"""

from __future__ import annotations

import ctypes
import os
import re
import socket
import tempfile
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Callable

import h11
import pytest
from test_leanweb_netns import KERNEL4, KERNEL6, SERVER4, SERVER6, LanPair, lean_server

from congestlab.servers.files import file_name, write_files
from congestlab.servers.nginx import NginxServer

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]

SIZE_KIB = 4
PATH = "/" + file_name(SIZE_KIB)
SOCKET_TIMEOUT_S = 2.0
# how long a case may take before it counts as a hang (no answer and no close)
CASE_DEADLINE_S = 3.0
MAX_RECV_CALLS = 200
IMF_FIXDATE = re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                         r"\d{4} \d\d:\d\d:\d\d GMT$")


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [v for n, v in self.headers if n == name]


@dataclass
class Outcome:
    responses: list[Response] = field(default_factory=list)
    closed: bool = False  # FIN or RST seen
    reset: bool = False
    hung: bool = False  # deadline passed with responses missing and no close
    malformed: str | None = None  # the bytes after the last parsed response are no HTTP/1.1 response

    def statuses(self) -> list[int]:
        return [r.status for r in self.responses]

    def summary(self) -> str:
        parts = [" ".join(str(s) for s in self.statuses()) or "no response"]
        allow = [v for r in self.responses for v in r.header("allow")]
        if allow:
            parts[0] += f" (Allow: {'; '.join(allow)})"
        if self.malformed:
            parts.append(f"malformed ({self.malformed})")
        parts.append("hang" if self.hung else "reset" if self.reset else "closed" if self.closed else "open")
        return ", ".join(parts)


def parse_responses(data: bytes, methods: list[str], eof: bool) -> tuple[list[Response], str | None, bool]:
    """The complete responses at the front of `data`, one per request method in order
    (HEAD's carries no body); returns them, an h11 error if the stream broke, and whether
    the last one announced `Connection: close`."""
    responses: list[Response] = []
    rest = data
    for method in methods:
        if not rest:
            break
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
        conn.send(h11.EndOfMessage())
        conn.receive_data(rest)
        if eof:
            conn.receive_data(b"")
        head, body = None, b""
        try:
            for _ in range(10_000):
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    return responses, None, False
                if isinstance(event, h11.Response):
                    head = event
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    break
        except h11.RemoteProtocolError as err:
            return responses, str(err), False
        if head is None:
            return responses, None, False
        headers = [(n.decode().lower(), v.decode(errors="replace")) for n, v in head.headers]
        responses.append(Response(head.status_code, headers, body))
        rest = conn.trailing_data[0]
    last_closes = bool(responses) and any("close" in v.lower() for v in responses[-1].header("connection"))
    return responses, None, last_closes


def converse(addr: str, request: bytes, methods: list[str], net: Callable[[], socket.socket]) -> Outcome:
    """Sends `request` on one connection; reads until every expected response is in (and,
    if the last says `Connection: close`, the close), a close, or the deadline."""
    outcome = Outcome()
    with net() as sock:
        sock.settimeout(SOCKET_TIMEOUT_S)
        sock.connect((addr, 80))
        sock.sendall(request)
        data = b""
        deadline = time.monotonic() + CASE_DEADLINE_S
        for _ in range(MAX_RECV_CALLS):
            responses, error, last_closes = parse_responses(data, methods, outcome.closed)
            outcome.responses, outcome.malformed = responses, error
            done = len(responses) == len(methods) and not last_closes
            if error or done or outcome.closed:
                return outcome
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(min(left, SOCKET_TIMEOUT_S))
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                outcome.closed = outcome.reset = True
                continue
            if not chunk:
                outcome.closed = True
            data += chunk
        outcome.hung = True
        return outcome


@dataclass
class Case:
    name: str
    rule: str
    request: bytes
    methods: list[str]  # the responses expected, by the method they answer
    accepted: str  # the behaviours the RFC allows, in words
    accept: Callable[[Outcome, bytes], bool]  # (outcome, the file's bytes)
    # leanweb's own answer where it picks one of those (docs/leanweb.md); None: any accepted
    lean: Callable[[Outcome], bool] | None = None


def req(line: str, *fields: str, body: bytes = b"", eol: str = "\r\n") -> bytes:
    return (line + eol + "".join(f + eol for f in fields) + eol).encode() + body


def serves(o: Outcome, data: bytes, count: int = 1) -> bool:
    return o.statuses() == [200] * count and all(r.body == data for r in o.responses) and not o.malformed


def refused(o: Outcome, codes: set[int], close_required: bool = True) -> bool:
    """Answered with one of `codes` (and closed, when the RFC says so)."""
    return bool(o.responses) and o.responses[0].status in codes and (o.closed or not close_required) and not o.hung


def refused_or_closed(o: Outcome, codes: set[int]) -> bool:
    return refused(o, codes) or (not o.responses and o.closed and not o.hung)


def allowed(o: Outcome) -> set[str]:
    """The methods the first response's `Allow` lists."""
    return {m.strip() for v in (o.responses[0].header("allow") if o.responses else []) for m in v.split(",") if m.strip()}


def not_allowed(o: Outcome, _: bytes) -> bool:
    """RFC 9110 §15.5.6: 405 MUST carry `Allow`; or 501 (§15.6.2: a method the server does not support)."""
    return (refused(o, {405}, close_required=False) and bool(allowed(o))) or refused(o, {501}, close_required=False)


def lean_405(o: Outcome) -> bool:
    return refused(o, {405}) and allowed(o) == {"GET", "HEAD"}


def lean_501(o: Outcome) -> bool:
    return refused(o, {501})


def date_ok(o: Outcome, _: bytes) -> bool:
    dates = [r.header("date") for r in o.responses]
    if not o.responses or any(len(d) != 1 or not IMF_FIXDATE.match(d[0]) for d in dates):
        return False
    return abs(parsedate_to_datetime(dates[0][0]).timestamp() - time.time()) < 5


H, CLOSE = "Host: h", "Connection: close"
CL_TE_BODY = b"0\r\n\r\n"

CASES = [
    Case("get", "RFC 9112 §3", req(f"GET {PATH} HTTP/1.1", H, CLOSE), ["GET"],
         "200 with the file, then close (Connection: close, §9.6)", lambda o, d: serves(o, d) and o.closed),
    Case("date", "RFC 9110 §6.6.1", req(f"GET {PATH} HTTP/1.1", H, CLOSE), ["GET"],
         "one Date, IMF-fixdate, within 5 s of the client's clock", date_ok),
    Case("pipelining", "RFC 9112 §9.3.2", req(f"GET {PATH} HTTP/1.1", H) + req(f"HEAD {PATH} HTTP/1.1", H)
         + req(f"GET {PATH} HTTP/1.1", H, CLOSE), ["GET", "HEAD", "GET"],
         "three responses in order (HEAD's without body), then close",
         lambda o, d: o.statuses() == [200] * 3 and [r.body for r in o.responses] == [d, b"", d] and o.closed),
    Case("keep-alive", "RFC 9112 §9.3", req(f"GET {PATH} HTTP/1.1", H), ["GET"],
         "200, connection left open (HTTP/1.1 persists)", lambda o, d: serves(o, d) and not o.closed),
    Case("head", "RFC 9110 §9.3.2", req(f"HEAD {PATH} HTTP/1.1", H) + req(f"GET {PATH} HTTP/1.1", H, CLOSE),
         ["HEAD", "GET"], "HEAD: 200, the GET's Content-Length, no body (the GET after it parses)",
         lambda o, d: o.statuses() == [200, 200] and o.responses[0].body == b""
         and o.responses[0].header("content-length") == [str(len(d))] and o.responses[1].body == d),
    Case("http/1.0-no-host", "RFC 9112 §3.2, §9.3", req(f"GET {PATH} HTTP/1.0"), ["GET"],
         "200 (Host is required in 1.1 only), then close (1.0 without keep-alive)",
         lambda o, d: serves(o, d) and o.closed),
    Case("absolute-form", "RFC 9112 §3.2.2", req(f"GET http://h{PATH} HTTP/1.1", H, CLOSE), ["GET"],
         "200 with the file (a server MUST accept the absolute form)", lambda o, d: serves(o, d)),
    Case("missing-host", "RFC 9112 §3.2", req(f"GET {PATH} HTTP/1.1", CLOSE), ["GET"],
         "400 (MUST)", lambda o, d: refused(o, {400}, close_required=False)),
    Case("absolute-form-no-host", "RFC 9112 §3.2", req(f"GET http://h{PATH} HTTP/1.1", CLOSE), ["GET"],
         "400 (MUST: any HTTP/1.1 request without Host)", lambda o, d: refused(o, {400}, close_required=False)),
    Case("duplicate-host", "RFC 9112 §3.2", req(f"GET {PATH} HTTP/1.1", H, H, CLOSE), ["GET"],
         "400 (MUST)", lambda o, d: refused(o, {400}, close_required=False)),
    Case("invalid-host", "RFC 9112 §3.2", req(f"GET {PATH} HTTP/1.1", "Host: a b", CLOSE), ["GET"],
         "400 (MUST)", lambda o, d: refused(o, {400}, close_required=False)),
    Case("space-before-colon", "RFC 9112 §5.1", req(f"GET {PATH} HTTP/1.1", H, "X-Test : 1", CLOSE), ["GET"],
         "400 (MUST)", lambda o, d: refused(o, {400}, close_required=False)),
    Case("obs-fold", "RFC 9112 §5.2", req(f"GET {PATH} HTTP/1.1", H, "X-Test: a", " b", CLOSE), ["GET"],
         "400, or 200 with the fold replaced by SP", lambda o, d: refused(o, {400}, False) or serves(o, d)),
    Case("space-before-first-field", "RFC 9112 §2.2", req(f"GET {PATH} HTTP/1.1", " X-Test: 1", H, CLOSE), ["GET"],
         "400, or 200 ignoring the whitespace-preceded line", lambda o, d: refused(o, {400}, False) or serves(o, d)),
    Case("bare-cr", "RFC 9112 §2.2", req(f"GET {PATH} HTTP/1.1", H, "X-Test: a\rb", CLOSE), ["GET"],
         "400, or 200 with the CR replaced by SP", lambda o, d: refused(o, {400}, False) or serves(o, d)),
    Case("bare-lf", "RFC 9112 §2.2", req(f"GET {PATH} HTTP/1.1", H, CLOSE, eol="\n"), ["GET"],
         "200 (a recipient MAY take LF as line end) or 400", lambda o, d: serves(o, d) or refused(o, {400}, False)),
    Case("leading-empty-line", "RFC 9112 §2.2", b"\r\n" + req(f"GET {PATH} HTTP/1.1", H, CLOSE), ["GET"],
         "200 (SHOULD ignore it) or 400", lambda o, d: serves(o, d) or refused(o, {400}, False)),
    Case("cl-and-te", "RFC 9112 §6.3", req(f"GET {PATH} HTTP/1.1", H, "Content-Length: 5",
                                            "Transfer-Encoding: chunked", CLOSE, body=CL_TE_BODY), ["GET"],
         "400, or a response by Transfer-Encoding alone then close; never framed by Content-Length",
         lambda o, d: o.closed and not o.hung and len(o.responses) == 1 and not o.malformed),
    Case("invalid-content-length", "RFC 9112 §6.3", req(f"GET {PATH} HTTP/1.1", H, "Content-Length: abc"),
         ["GET"], "400 then close (MUST)", lambda o, d: refused(o, {400})),
    Case("get-with-body", "RFC 9110 §9.3.1", req(f"GET {PATH} HTTP/1.1", H, "Content-Length: 5", CLOSE,
                                                 body=b"hello"), ["GET"],
         "200 (body read and ignored), or 4xx and close", lambda o, d: serves(o, d) or refused(o, set(range(400, 500)))),
    Case("lowercase-method", "RFC 9110 §9.1", req(f"get {PATH} HTTP/1.1", H, CLOSE), ["GET"],
         "not a GET: 501 (SHOULD), 405 or 400", lambda o, d: refused(o, {400, 405, 501}, close_required=False),
         lean_501),
    Case("unknown-method", "RFC 9110 §9.1", req(f"BREW {PATH} HTTP/1.1", H, CLOSE), ["GET"],
         "501 (SHOULD), 405 or 400", lambda o, d: refused(o, {400, 405, 501}, close_required=False), lean_501),
    Case("post-with-body", "RFC 9110 §9.3.3, §15.5.6", req(f"POST {PATH} HTTP/1.1", H, "Content-Length: 5", CLOSE,
                                                          body=b"hello"), ["POST"],
         "405 with Allow (MUST), or 501", not_allowed, lean_405),
    Case("delete", "RFC 9110 §9.3.5, §15.5.6", req(f"DELETE {PATH} HTTP/1.1", H, CLOSE), ["DELETE"],
         "405 with Allow (MUST), or 501", not_allowed, lean_405),
    Case("unknown-method-with-body", "RFC 9110 §9.1, §15.6.2", req(f"BREW {PATH} HTTP/1.1", H, "Content-Length: 5",
                                                                   CLOSE, body=b"hello"), ["GET"],
         "501 (SHOULD), 405 or 400", lambda o, d: refused(o, {400, 405, 501}, close_required=False), lean_501),
    Case("http/2.0-line", "RFC 9110 §2.5, §15.6.6", req(f"GET {PATH} HTTP/2.0", H, CLOSE), ["GET"],
         "505 or 400", lambda o, d: refused(o, {400, 505}, close_required=False)),
    Case("http/1.2-line", "RFC 9110 §2.5", req(f"GET {PATH} HTTP/1.2", H, CLOSE), ["GET"],
         "200 as HTTP/1.1 (SHOULD), or 505/400", lambda o, d: serves(o, d) or refused(o, {400, 505}, False)),
    Case("two-versions", "RFC 9112 §3", req(f"GET {PATH} HTTP/1.2 HTTP/1.1", H, CLOSE), ["GET"],
         "400 (malformed request line)", lambda o, d: refused(o, {400}, close_required=False)),
    Case("te-chunked", "RFC 9112 §6.1, §7.1", req(f"GET {PATH} HTTP/1.1", H, "Transfer-Encoding: chunked", CLOSE,
                                                   body=CL_TE_BODY), ["GET"],
         "200 (empty chunked body read), or 400/501 and close",
         lambda o, d: serves(o, d) or refused(o, {400, 501})),
    Case("nul-in-field", "RFC 9110 §5.5", req(f"GET {PATH} HTTP/1.1", H, "X-Test: a\0b", CLOSE), ["GET"],
         "400, or 200 with the NUL replaced by SP", lambda o, d: refused(o, {400}, False) or serves(o, d)),
    Case("options-asterisk", "RFC 9112 §3.2.4", req("OPTIONS * HTTP/1.1", H, CLOSE), ["OPTIONS"],
         "an answer, not a hang: 200/204 (Allow), 405, 501 or 400",
         lambda o, d: refused(o, {200, 204, 400, 405, 501}, close_required=False)),
    Case("long-request-line", "RFC 9112 §3", req(f"GET /{'a' * 10_000} HTTP/1.1", H, CLOSE), ["GET"],
         "414 or another 4xx, or close; not a hang", lambda o, d: refused_or_closed(o, set(range(400, 500)))),
    Case("long-field", "RFC 9110 §5.4", req(f"GET {PATH} HTTP/1.1", H, "X-Long: " + "b" * 10_000, CLOSE),
         ["GET"], "431 or another 4xx, or close; not a hang", lambda o, d: refused_or_closed(o, set(range(400, 500)))),
    Case("many-fields", "RFC 9110 §5.4", req(f"GET {PATH} HTTP/1.1", H, *[f"X-F{i}: 1" for i in range(200)], CLOSE),
         ["GET"], "200, or 431/400 (a server may limit fields)",
         lambda o, d: serves(o, d) or refused_or_closed(o, {400, 431})),
]


def run_cases(addr: str, family: socket.AddressFamily, data: bytes) -> dict[str, Outcome]:
    def net() -> socket.socket:
        return socket.socket(family, socket.SOCK_STREAM)
    return {case.name: converse(addr, case.request, case.methods, net) for case in CASES}


def test_http11_conformance_of_leanweb_against_nginx(tmp_path):
    with tempfile.TemporaryDirectory(prefix="congestlab-http-") as shared:
        docroot = Path(shared) / "www"  # nginx's workers run as nobody: no 0700 pytest dir on the way
        Path(shared).chmod(0o755)
        write_files(docroot, [SIZE_KIB])
        data = (docroot / file_name(SIZE_KIB)).read_bytes()
        started = time.monotonic()
        with LanPair() as lan, lean_server(lan, docroot, tmp_path / "lean.jsonl"):
            nginx = NginxServer(lan.ns_s, tmp_path / "nginx", docroot, tmp_path / "nginx-logs",
                                [(KERNEL4, 80), (KERNEL6, 80)])
            nginx.start()
            try:
                nginx.wait_started()
                for addr in (SERVER4, KERNEL4):
                    lan.exec_c("ping", "-c", "1", "-W", "2", addr)
                for addr in (SERVER6, KERNEL6):
                    lan.exec_c("ping", "-6", "-c", "1", "-W", "2", addr)
                results = {}
                # the client's sockets must live in the client namespace: run there via setns
                with in_netns(lan.ns_c):
                    for server, addr4, addr6 in (("leanweb", SERVER4, SERVER6), ("nginx", KERNEL4, KERNEL6)):
                        results[(server, 4)] = run_cases(addr4, socket.AF_INET, data)
                        results[(server, 6)] = run_cases(addr6, socket.AF_INET6, data)
                    # every case behind it, leanweb still serves (no case took it down)
                    still = converse(SERVER4, CASES[0].request, CASES[0].methods,
                                     lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            finally:
                nginx.stop()
        elapsed_s = time.monotonic() - started

    rows = []
    failures = []
    for case in CASES:
        row = [case.name]
        for server in ("leanweb", "nginx"):
            for fam in (4, 6):
                outcome = results[(server, fam)][case.name]
                ok = case.accept(outcome, data)
                row.append(f"{outcome.summary()}{'' if ok else ' ✗'}")
                if server == "leanweb" and not ok:
                    failures.append(f"{case.name} over IPv{fam}: {outcome.summary()}; accepted: {case.accepted}")
                elif server == "leanweb" and case.lean is not None and not case.lean(outcome):
                    failures.append(f"{case.name} over IPv{fam}: {outcome.summary()}, "
                                    f"Allow {sorted(allowed(outcome))}; not leanweb's answer (docs/leanweb.md)")
        rows.append(row + [case.accepted, case.rule])
    print(f"\nHTTP/1.1 conformance, {len(CASES)} cases x 2 servers x 2 families in {elapsed_s:.1f} s "
          "(✗ = outside what the RFC allows)")
    print("| case | leanweb v4 | leanweb v6 | nginx v4 | nginx v6 | accepted | rule |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    assert serves(still, data), f"leanweb after all cases: {still.summary()}"
    # the reference must really be up: it serves the plain GET on both families
    assert all(serves(results[("nginx", fam)]["get"], data) for fam in (4, 6))
    # every leanweb response carries a Date (RFC 9110 §6.6.1: 2xx-4xx from a server with a clock)
    undated = [(name, fam) for fam in (4, 6) for name, o in results[("leanweb", fam)].items()
               if any(r.status < 500 and len(r.header("date")) != 1 for r in o.responses)]
    assert undated == []
    assert failures == []


CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    """setns(2) for this thread (os.setns needs Python 3.12)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class in_netns:
    """Puts this thread in a named network namespace for the sockets created in the block."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            _setns(target)
        except BaseException:
            os.close(self.home)
            raise
        finally:
            os.close(target)

    def __exit__(self, *exc: object) -> None:
        try:
            _setns(self.home)
        finally:
            os.close(self.home)
