"""The one reader of leanweb's event log (servers/lean_events.py)."""

import ipaddress
import json

import pytest

from congestlab.errors import LeanLogError
from congestlab.servers.lean_events import family, numbered_events, peer, peer_port, read_events

EVENTS = [
    {"event": "start", "t_us": 0, "unix_us": 1_000_000},
    {"event": "open", "conn": 1, "peer": "10.0.0.10:43210", "family": "ipv4", "t_us": 5, "unix_us": 1_000_005},
    {"event": "close", "conn": 1, "peer": "10.0.0.10:43210", "t_us": 9, "unix_us": 1_000_009},
    {"event": "open", "conn": 2, "peer": "[fd00::a]:40000", "family": "ipv6", "t_us": 11, "unix_us": 1_000_011},
]


def _log(tmp_path, lines: list[str], tail: str = "") -> object:
    path = tmp_path / "leanweb.jsonl"
    path.write_text("".join(line + "\n" for line in lines) + tail)
    return path


def test_events_in_order_with_their_line_numbers_and_only_the_kinds_asked_for(tmp_path):
    path = _log(tmp_path, [json.dumps(e) for e in EVENTS])
    assert list(read_events(path)) == EVENTS
    assert [n for n, _ in numbered_events(path)] == [1, 2, 3, 4]
    assert list(numbered_events(path, kinds=("close",))) == [(3, EVENTS[2])]


def test_reading_from_an_offset_sees_only_what_was_written_after_it(tmp_path):
    lines = [json.dumps(e) for e in EVENTS]
    path = _log(tmp_path, lines)
    offset = len(lines[0]) + 1 + len(lines[1]) + 1
    assert list(read_events(path, offset_bytes=offset)) == EVENTS[2:]


def test_a_line_that_is_no_event_is_passed_over_or_with_strict_named(tmp_path):
    lines = [json.dumps(EVENTS[0]), "", "garbage", "42", '{"conn": 1}', json.dumps(EVENTS[1])]
    path = _log(tmp_path, lines, tail='{"event": "tx", "co')
    assert list(read_events(path)) == EVENTS[:2]
    with pytest.raises(LeanLogError, match=r"leanweb.jsonl:3: not a leanweb log line: 'garbage'"):
        list(read_events(path, strict=True))


def test_strict_passes_over_only_a_last_line_without_its_newline(tmp_path):
    path = _log(tmp_path, [json.dumps(EVENTS[0])], tail='{"event": "tx", "co')
    assert list(read_events(path, strict=True)) == EVENTS[:1]
    path = _log(tmp_path, [json.dumps(EVENTS[0]), '{"event": "tx", "co'])
    with pytest.raises(LeanLogError, match=":2: not a leanweb log line"):
        list(read_events(path, strict=True))


def test_a_missing_log_raises_oserror_when_read(tmp_path):
    events = read_events(tmp_path / "absent.jsonl")  # nothing opened yet
    with pytest.raises(FileNotFoundError):
        next(events)


def test_peers_and_families_as_the_capture_analysis_names_them():
    assert peer("10.0.0.10:43210") == (ipaddress.ip_address("10.0.0.10"), 43210)
    assert peer("[fd00::a]:40000") == (ipaddress.ip_address("fd00::a"), 40000)
    assert peer("not a peer") is None
    assert peer_port(EVENTS[3]) == 40000
    assert (family("ipv4"), family("ipv6"), family("v4")) == ("v4", "v6", "v4")
