"""ngtcp2's HTTP/3 server as a server under test (servers/ngtcp2.py, spec/servers.py): its
argv (the controller, the initial RTT, the qlog dir, both families), what it records beside
the kernel servers, and the spec's refusals before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from congestlab.errors import TestbedError
from congestlab.runner.host import wanted_cc
from congestlab.runner.quic_cc_probe import verdict
from congestlab.servers.ngtcp2 import DEFAULT_INITIAL_RTT_MS, Ngtcp2Server
from congestlab.servers.tls import RunCertificates
from congestlab.spec.loader import parse_spec
from spec_fixtures import refused
from test_server_spec import study

WORK, DOCROOT, LOGS = Path("/run/x/servers/q"), Path("/run/x/www"), Path("/run/x/logs/servers/q")
LISTEN = [("10.0.1.2", 4433), ("fd00:1::2", 4433)]
TLS = RunCertificates(Path("/run/x/tls/ca.pem"), Path("/run/x/tls/server.pem"), Path("/run/x/tls/server.key"), "ab")
NGTCP2 = 'kind = "ngtcp2"\nport = 4433\ntls = true\nhttp = ["3"]'
H3_GET = 'client = "client", server = "web", tls = true, http = "3"'


def server(**kwargs) -> Ngtcp2Server:
    return Ngtcp2Server(None, WORK, DOCROOT, LOGS, LISTEN, tls=TLS, http=("3",), **kwargs)


def test_its_argv_names_the_controller_docroot_qlog_and_binds_both_families(tmp_path):
    quic = Ngtcp2Server(None, tmp_path, DOCROOT, tmp_path / "logs", LISTEN, tls=TLS, http=("3",), quic_cc="bbr",
                        initial_rtt_ms=1)
    argv = quic.command("/usr/sbin/gtlsserver")
    assert argv[:5] == ["/usr/sbin/gtlsserver", "-q", f"--htdocs={DOCROOT}", "--cc=bbr", "--initial-rtt=1ms"]
    assert f"--qlog-dir={tmp_path / 'logs' / 'qlog'}" in argv and (tmp_path / "logs" / "qlog").is_dir()
    assert argv[-4:] == ["*", "4433", str(TLS.key), str(TLS.cert)]


def test_its_defaults_are_ngtcp2s_own_and_recorded(tmp_path):
    quic = Ngtcp2Server(None, tmp_path, DOCROOT, tmp_path, LISTEN, tls=TLS, http=("3",))
    argv = quic.command("/usr/sbin/gtlsserver")
    assert "--cc=cubic" in argv and not any(a.startswith("--initial-rtt") for a in argv)
    confounds = quic.confounds()
    assert confounds["quic_cc"] == "cubic" and confounds["initial_rtt_ms"] == DEFAULT_INITIAL_RTT_MS
    assert confounds["pacing"].startswith("always") and confounds["qlog"] is True


def test_it_needs_the_run_certificate():
    with pytest.raises(ValueError, match="certificate"):
        Ngtcp2Server(None, WORK, DOCROOT, LOGS, LISTEN, http=("3",))


def test_an_ngtcp2_server_and_an_http3_get_load():
    spec = parse_spec(study(NGTCP2 + '\nquic_cc = "bbr2"\nquic_initial_rtt_ms = 50', H3_GET, "curl-cffi"), "x.toml")
    web = spec.server("web")
    assert web.udp_only and web.serves_quic and web.quic_cc == "bbr2" and web.quic_initial_rtt_ms == 50


@pytest.mark.parametrize("line, words", [
    ('quic_cc = "vegas"', "quic_cc"),  # not one of ngtcp2's controllers
    ('cc = "bbr"', "its congestion control is quic_cc, not cc"),
])
def test_a_wrong_controller_is_a_spec_error_naming_the_field(line, words):
    message = refused(study(f"{NGTCP2}\n{line}", H3_GET, "curl-cffi"))
    assert words in message, message


def test_quic_fields_on_a_kernel_server_are_refused():
    message = refused(study('kind = "nginx"\nquic_cc = "bbr"'))
    assert 'quic_cc is for kind "ngtcp2", not \'nginx\'' in message, message


@pytest.mark.parametrize("server, words", [
    ('kind = "ngtcp2"\nhttp = ["3"]', "always over TLS 1.3: set tls = true"),
    ('kind = "ngtcp2"\ntls = true\nhttp = ["1.1"]', "a ngtcp2 server cannot serve http = ['1.1']"),
])
def test_what_ngtcp2_cannot_serve_is_refused(server, words):
    message = refused(study(server, 'client = "client", server = "web", tls = true', "curl-cffi"))
    assert words in message, message


def test_an_http3_get_needs_the_curl_cffi_client():
    message = refused(study(NGTCP2, H3_GET, "curl"))
    assert 'needs client_kind = "curl-cffi" or "chromium"' in message, message


def test_caddy_serves_http3_beside_http1_and_http2():
    spec = parse_spec(study('kind = "caddy"\ntls = true\nhttp = ["1.1", "2", "3"]', H3_GET, "curl-cffi"), "x.toml")
    assert spec.server("web").serves_quic and not spec.server("web").udp_only


def test_a_quic_server_beside_a_bbr_kernel_server_leaves_the_host_on_bbr():
    """Its transport is its own: its (default) cc neither clashes with nor overrides the host's."""
    text = study('kind = "nginx"\ncc = "bbr"\ntls = true\nport = 8443', 'client = "client", server = "web", tls = true',
                 "curl-cffi") + f"""
[[servers]]
name = "quic"
node = "server"
{NGTCP2}
"""
    spec = parse_spec(text, "x.toml")
    assert wanted_cc(spec)["server"] == "bbr"


# lines of gtlsserver 0.12.1's debug output (without -q) in a probe GET, one per controller
BBR_LOG = "I00000002 0x8af6 rcv bbr update RTprop=1077196\n"
BBR2_LOG = "I00000000 0xbcc8 rcv bbr2 enter Startup\nI00000005 0xbcc8 rcv bbr2 update min_rtt=4073916\n"
CUBIC_LOG = "I00000005 0xb6dd rcv latest_rtt=4 min_rtt=4 smoothed_rtt=4\nI00000005 0xb6dd rcv pkn=0 acked, slow start cwnd=15720\n"


@pytest.mark.parametrize("asked, log", [("bbr", BBR_LOG), ("bbr2", BBR2_LOG), ("cubic", CUBIC_LOG), ("reno", CUBIC_LOG)])
def test_the_probe_confirms_what_the_debug_log_can_say(asked, log):
    effective, source = verdict(asked, log)
    assert effective == f"ngtcp2 --cc {asked}"
    assert ("names " + asked) in source if asked.startswith("bbr") else "names no BBR" in source


@pytest.mark.parametrize("asked, log, named", [
    ("bbr", CUBIC_LOG, "no BBR"), ("bbr", BBR2_LOG, "bbr2"), ("bbr2", BBR_LOG, "bbr"), ("cubic", BBR_LOG, "bbr"),
])
def test_the_probe_refuses_a_controller_the_log_contradicts(asked, log, named):
    with pytest.raises(TestbedError, match=f"--cc={asked} but its debug log names {named}"):
        verdict(asked, log)
