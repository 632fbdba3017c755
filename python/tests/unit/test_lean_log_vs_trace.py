"""bench/lean_log_vs_trace.py: a lean GET's segment trace checked against leanweb's log, on a
small hand-made go-back-N (three segments sent, the first lost, an RTO, all three again)."""

from congestlab.bench.lean_log_vs_trace import compare

ISN = 4_294_967_000  # wraps: sequence numbers are compared modulo 2**32
T0 = 1_700_000_000_000_000  # µs


def _tx(t_us, seq_off, length, retx=False, syn=False):
    event = {"event": "tx", "conn": 7, "unix_us": T0 + t_us, "seq": (ISN + seq_off) % 2**32, "len": length,
             "syn": syn, "retransmission": retx}
    return event | ({"kind": "go-back-n"} if retx and not syn else {})


def _log():
    return [
        {"event": "open", "conn": 7, "peer": "10.0.0.10:40000", "unix_us": T0},
        {"event": "open", "conn": 8, "peer": "10.0.0.10:40001", "unix_us": T0},  # another connection
        _tx(10, 0, 0, syn=True),
        _tx(1000, 1, 1000), _tx(1001, 1001, 1000), _tx(1002, 2001, 1000),
        {"event": "timeout", "conn": 7, "unix_us": T0 + 1_001_000, "rto_us": 2_000_000, "outstanding_bytes": 3000},
        _tx(1_001_050, 1, 1000, retx=True), _tx(1_001_051, 1001, 1000, retx=True), _tx(1_001_052, 2001, 1000, retx=True),
    ]


def _row(t_us, direction, flags, seq_off, payload, retx=False, ack_off=""):
    return {"ts_ns": str((T0 + t_us) * 1000), "dir": direction, "flags": flags, "seq_off": str(seq_off),
            "payload_bytes": str(payload), "retransmitted": "1" if retx else "0", "ack_off": str(ack_off)}


def _trace(first_retx_off=1):
    return [
        _row(5, "c", "S", 0, 0), _row(8, "s", "SA", 0, 0, ack_off=1), _row(900, "c", "A", 1, 0, ack_off=1),
        _row(995, "s", "A", 1, 1000), _row(996, "s", "A", 1001, 1000), _row(997, "s", "A", 2001, 1000),
        _row(1100, "c", "A", 1, 0, ack_off=1),  # duplicate ACKs: the first segment was lost
        _row(1_001_045, "s", "A", first_retx_off, 1000, retx=True),
        _row(1_001_046, "s", "A", 1001, 1000, retx=True), _row(1_001_047, "s", "A", 2001, 1000, retx=True),
    ]


def test_a_go_back_n_in_the_trace_matches_the_log():
    r = compare(_trace(), _log(), 40000)
    assert r["conn"] == 7
    assert (r["log_data_segments"], r["log_retransmissions"]) == (6, 3)
    assert (r["trace_data_segments"], r["trace_retransmissions"]) == (6, 3)
    assert (r["matched_segments"], r["unmatched_segments"]) == (6, 0)
    assert r["offset_us"] == {"median": -5.0, "min": -5.0, "max": -5.0}
    rto, = r["rtos"]
    assert rto["matched"] and rto["log_first_seq_off"] == rto["trace_first_seq_off"] == rto["ack_off_then"] == 1
    assert (rto["log_retransmissions"], rto["trace_retransmissions"], rto["after_us"]) == (3, 3, 45.0)


def test_a_retransmission_that_does_not_start_at_the_ack_is_not_a_match():
    r = compare(_trace(first_retx_off=3001), _log(), 40000)
    rto, = r["rtos"]
    assert not rto["matched"] and rto["trace_first_seq_off"] == 3001
    assert r["unmatched_segments"] == 1  # the log's retransmission of byte 1 is not in the trace


def test_the_syn_ack_timer_is_matched_with_the_next_syn_ack():
    log = _log()[:3] + [{"event": "timeout", "conn": 7, "unix_us": T0 + 1_000_010, "rto_us": 2_000_000,
                         "outstanding_bytes": 1}, _tx(1_000_020, 0, 0, retx=True, syn=True)]
    trace = _trace()[:2] + [_row(1_000_015, "s", "SA", 0, 0, ack_off=1)]
    rto, = compare(trace, log, 40000)["rtos"]
    assert rto["matched"] and rto["log_first_kind"] is None and rto["after_us"] == 5.0
