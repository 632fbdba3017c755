"""ngtcp2's congestion controller, checked before its measured instance starts: its qlog never
names the controller, so a short probe instance with the same flags but its debug output on
(no `-q`) serves one HTTP/3 GET, and its log says what ran. ngtcp2 0.12 logs only BBR's
states ("rcv bbr update RTprop", "rcv bbr2 enter Startup"); CUBIC and Reno log nothing of
their own, so for them the probe proves that no BBR ran and the rest is the argv's word
(the manifest's `cc_effective_from` says which)."""

from __future__ import annotations

import re
from pathlib import Path

from congestlab.errors import TestbedError
from congestlab.servers.files import url_path
from congestlab.traffic.cffi_get import cffi_argv, parse_cffi_json
from congestlab.traffic.http_request import url_for

_BBR_LINE = re.compile(r"\brcv (bbr2?) ")
GET_TIMEOUT_S = 5


def named_controller(debug_log: str) -> str | None:
    """The BBR version ngtcp2's debug output names ("bbr", "bbr2"), or None: no BBR ran."""
    match = _BBR_LINE.search(debug_log)
    return match.group(1) if match else None


def verdict(asked: str, debug_log: str) -> tuple[str, str]:
    """(cc_effective, where it comes from) for `asked`; TestbedError when the log contradicts it."""
    named = named_controller(debug_log)
    if asked in ("bbr", "bbr2"):
        if named != asked:
            raise TestbedError(f"ngtcp2 was started with --cc={asked} but its debug log names "
                               f"{named or 'no BBR'}")
        return f"ngtcp2 --cc {asked}", f"its debug log in a probe run names {asked}"
    if named is not None:
        raise TestbedError(f"ngtcp2 was started with --cc={asked} but its debug log names {named}")
    return (f"ngtcp2 --cc {asked}", "the server's argv; a probe run's debug log names no BBR (ngtcp2 0.12 "
            "logs BBR's states only)")


def probe_quic_cc(tb, handle, client: str, family: str, addr: str, port: int, file_kib: int, ca: str) -> tuple[str, str]:
    """Start `handle` (an ngtcp2 instance made for the probe), GET one file over HTTP/3 from
    `client`, stop it and read its debug log."""
    handle.quiet = False
    handle.start()
    try:
        handle.wait_started(families=(family,))
        url = url_for(addr, port, url_path(file_kib), tls=True)
        proc = tb.run(client, cffi_argv(url, family, GET_TIMEOUT_S, "3", ca), check=False,
                      timeout_s=GET_TIMEOUT_S + 10)
        result, _ = parse_cffi_json(family, url, file_kib * 1024, proc, "3")
    finally:
        handle.stop()
    if not result.ok:
        raise TestbedError(f"ngtcp2's controller probe: its HTTP/3 GET failed: {result.error}; "
                           f"{handle.log_tail() or 'its log is empty'}")
    log = Path(handle.stderr_path).read_text(errors="replace") if handle.stderr_path else ""
    return verdict(handle.quic_cc, log)
