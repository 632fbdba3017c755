"""A GET record's own columns of its request row (analysis/request_rows.py request_base):
what it asked for and negotiated, curl's TLS handshake and request-to-last-byte times, and
the CPU per GET in ms."""

from __future__ import annotations

from congestlab.analysis.request_rows import request_base
from congestlab.results import DESCRIPTIVE_COLUMNS, KIND_COLUMNS
from record_fixtures import get_record

TLS_H2 = {"url": "https://10.9.1.2:443/141KiB.bin", "http": "2", "tls": True, "http_negotiated": "2",
          "tls_version": "TLSv1.3", "time_connect_s": 0.0101, "time_appconnect_s": 0.0305,
          "time_pretransfer_s": 0.0306, "time_starttransfer_s": 0.0412, "time_total_s": 0.0823}


def test_a_complete_gets_time_after_the_handshakes_and_its_cpu():
    row = request_base(get_record(ok=True, server_cpu_ns=1_234_567, host_softirq_ms=20.0, **TLS_H2))
    assert row["request_to_last_byte_ms"] == round((0.0823 - 0.0306) * 1e3, 3) == 51.7
    assert row["tls_handshake_ms"] == round((0.0305 - 0.0101) * 1e3, 3) == 20.4  # TCP connected -> TLS done
    assert row["curl_time_ms"] == 82.3
    assert row["server_cpu_ms"] == 1.235 and row["host_softirq_ms"] == 20.0
    assert (row["http"], row["tls"], row["http_negotiated"], row["tls_version"]) == ("2", True, "2", "TLSv1.3")


def test_a_failed_get_has_no_request_to_last_byte_time():
    row = request_base(get_record(ok=False, error="negotiated HTTP/1.1, not the requested HTTP/2",
                                  **TLS_H2 | {"http_negotiated": "1.1"}))
    assert row["request_to_last_byte_ms"] is None and row["tls_handshake_ms"] is None
    assert row["http_negotiated"] == "1.1" and row["curl_time_ms"] == 82.3


def test_a_get_without_phase_times_or_cpu_has_none_of_them():
    row = request_base(get_record(ok=True, time_total_s=0.05))  # a format-3 record, or the browser's
    assert row["request_to_last_byte_ms"] is None and row["server_cpu_ms"] is None
    assert row["host_softirq_ms"] is None and row["curl_time_ms"] == 50.0 and row["tls_handshake_ms"] is None


def test_a_zero_cpu_get_is_zero_not_missing():
    assert request_base(get_record(ok=True, server_cpu_ns=0, host_softirq_ms=0.0))["server_cpu_ms"] == 0.0


def test_every_column_of_the_base_is_a_request_column():
    row = request_base(get_record(ok=True, server_cpu_ns=1, **TLS_H2))
    assert set(row) <= set(KIND_COLUMNS["request"])
    new = {"http", "tls", "http_negotiated", "tls_version", "tls_handshake_ms", "request_to_last_byte_ms",
           "server_cpu_ms", "host_softirq_ms"}
    assert new <= set(row)
    assert {"http", "tls"} <= DESCRIPTIVE_COLUMNS  # settings the GET ran with, not measurements
