"""The QUIC side of a repetition's analysis (analysis/quic_requests.py): a QUIC capture held to
tcpdump's own count as the TCP one is, and the qlog columns of a GET's row, which never read
as complete from a missing or damaged qlog. On the real gtlsserver fixture (data/quic/)."""

from __future__ import annotations

import shutil
from pathlib import Path

import dpkt
import pytest

from congestlab.analysis.quic_requests import measure_quic_captures, qlog_columns

QUIC = Path(__file__).parent / "data" / "quic"
PORT = 4433


@pytest.fixture
def rep(tmp_path):
    """A repetition's quic/ with the fixture as server `q`'s capture, and its frame count."""
    shutil.copy(QUIC / "gtls-48KiB.pcap", tmp_path / "q.pcap")
    shutil.copy(QUIC / "gtls-48KiB.keys.log", tmp_path / "keys.log")
    with open(tmp_path / "q.pcap", "rb") as fh:
        frames = sum(1 for _ in dpkt.pcap.UniversalReader(fh))
    return tmp_path, frames


def info(captured: int, dropped: int = 0) -> dict:
    return {"quic_captures": {"q": {"tcpdump": {"packets_captured": captured, "packets_dropped_by_kernel": dropped}}}}


def measure(rep_dir: Path, rep_info: dict, pcaps=None):
    return measure_quic_captures(pcaps or [rep_dir / "q.pcap"], rep_dir / "keys.log", {"q": PORT},
                                 lambda path: path.name, rep_info)


def test_a_capture_that_matches_tcpdumps_count_is_measured(rep):
    rep_dir, frames = rep
    got = measure(rep_dir, info(frames))
    assert got.errors == {} and len(got.connections["q"]) == 2
    assert all(c.metrics is not None for c in got.connections["q"])


@pytest.mark.parametrize("captured, dropped, words", [
    (None, 3, "tcpdump's kernel dropped 3 packets"),
    ("more", 0, "frames read, tcpdump wrote"),
])
def test_a_capture_unlike_tcpdumps_account_is_unusable(rep, captured, dropped, words):
    rep_dir, frames = rep
    got = measure(rep_dir, info(frames + 7 if captured == "more" else frames, dropped))
    assert "q" not in got.connections and words in got.errors["q"], got.errors


def test_a_capture_cut_mid_frame_reads_short_of_tcpdumps_count(rep):
    rep_dir, frames = rep
    data = (rep_dir / "q.pcap").read_bytes()
    (rep_dir / "q.pcap").write_bytes(data[:len(data) // 2])
    got = measure(rep_dir, info(frames))
    assert "the file was cut or lost frames" in got.errors["q"], got.errors


def test_a_capture_of_no_server_is_named(rep):
    rep_dir, frames = rep
    shutil.copy(rep_dir / "q.pcap", rep_dir / "other.pcap")
    got = measure(rep_dir, info(frames), [rep_dir / "other.pcap"])
    assert got.errors == {"other": "other.pcap: a QUIC capture of no server of this repetition"}


def test_qlog_columns_say_what_the_qlog_gave(rep, tmp_path):
    rep_dir, frames = rep
    conn = measure(rep_dir, info(frames)).connections["q"][0]
    assert qlog_columns(None, conn) == ({}, None)  # a server that keeps none (quic-go)
    assert qlog_columns(QUIC / "qlog", None)[0] == {"qlog": "no connection in the capture to find it by"}
    assert qlog_columns(tmp_path, conn)[0]["qlog"].startswith("missing: no qlog for server connection ID")
    columns, series = qlog_columns(QUIC / "qlog", conn)
    assert columns["qlog"] == "complete" and columns["qlog_packets_lost"] == 0 and columns["qlog_cwnd_max_bytes"] > 0
    cut = tmp_path / "cut"
    cut.mkdir()
    whole = (QUIC / "qlog" / f"{conn.server_scid}.sqlog").read_bytes()
    (cut / f"{conn.server_scid}.sqlog").write_bytes(whole[:len(whole) * 2 // 3])
    columns, series = qlog_columns(cut, conn)
    assert "truncated after record" in columns["qlog"] and "qlog_packets_lost" not in columns, columns
