"""leanweb's event log (docs/leanweb.md, "Event log": one JSON object a line), read in one
place for everyone who reads it: the GET workload waiting for a connection's `close`
(workloads/closed.py) and the analyses (analysis/lean_log.py, sender_series.py,
rto_streams.py). It lives with the server that writes the log because workloads sit below
analysis in the import layers (pyproject.toml) and both may import servers.

The log is buffered and flushed every 200 ms and at exit (crates/leanweb/src/main.rs), so
its last line may be cut short: by the server's exit, or because it is still being written.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Iterator
from pathlib import Path

import orjson

from congestlab.errors import LeanLogError

# leanweb's family names -> the capture analysis's
_FAMILIES = {"ipv4": "v4", "ipv6": "v6"}


def read_events(log_path: Path, *, offset_bytes: int = 0, kinds: Collection[str] | None = None,
                strict: bool = False) -> Iterator[dict]:
    """Each event of the log in order, from `offset_bytes` on (numbered_events without the
    line numbers)."""
    for _, event in numbered_events(log_path, offset_bytes=offset_bytes, kinds=kinds, strict=strict):
        yield event


def numbered_events(log_path: Path, *, offset_bytes: int = 0, kinds: Collection[str] | None = None,
                    strict: bool = False) -> Iterator[tuple[int, dict]]:
    """(line number, event) for each event of the log in order, from `offset_bytes` on (lines
    counted from there); `kinds`: only those events (a line that does not name one is not
    even parsed, so polling a growing log stays cheap).

    A line that is not an event (a JSON object with `event`) is passed over; with `strict`
    it raises LeanLogError naming the file and line, unless it is the last line and has no
    newline yet (cut short). Opening or reading the file raises OSError, at the first event
    asked for."""
    wanted = None if kinds is None else [f'"{kind}"'.encode() for kind in kinds]
    with open(log_path, "rb") as log:
        if offset_bytes:
            log.seek(offset_bytes)
        for number, line in enumerate(log, 1):
            if wanted is not None and not any(w in line for w in wanted):
                continue
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)  # ~3.8x json's speed here (docs/leanweb.md, "Event log")
                kind = event["event"]
            except (ValueError, KeyError, TypeError):
                if strict and line.endswith(b"\n"):
                    text = line.decode(errors="replace").rstrip("\n")
                    raise LeanLogError(f"{log_path}:{number}: not a leanweb log line: {text[:60]!r}") from None
                continue
            if kinds is None or kind in kinds:
                yield number, event


def family(name: str) -> str:
    """leanweb's `ipv4`/`ipv6` as the capture analysis names them (`v4`/`v6`)."""
    return _FAMILIES.get(name, name)


def peer_port(event: dict) -> int:
    """The client's port of an `open` or `close` event's `peer` ('10.0.0.10:43210',
    '[fd00::a]:43210': Rust's SocketAddr)."""
    return int(str(event["peer"]).rsplit(":", 1)[1])


def peer(text: str) -> tuple | None:
    """A `peer` as (address, port); None when it is not one."""
    host, _, port = text.rpartition(":")
    try:
        return ipaddress.ip_address(host.strip("[]")), int(port)
    except ValueError:
        return None
