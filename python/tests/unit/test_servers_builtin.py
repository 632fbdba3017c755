"""The built-in servers' generated configurations (servers/nginx.py, caddy.py, lighttpd.py,
h2o.py): addresses, port, docroot, TLS files and HTTP versions, without starting anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from congestlab.servers.caddy import CaddyServer
from congestlab.servers.factory import KERNEL_SERVERS
from congestlab.servers.h2o import H2oServer
from congestlab.servers.lighttpd import LighttpdServer
from congestlab.servers.nginx import NginxServer, render_config
from congestlab.servers.process import tool_version
from congestlab.servers.tls import RunCertificates
from congestlab.spec.servers import ServerSpec

WORK, DOCROOT, LOGS = Path("/run/x/servers/web"), Path("/run/x/www"), Path("/run/x/logs/servers/web")
LISTEN = [("10.0.1.2", 8443), ("fd00:1::2", 8443)]
TLS = RunCertificates(Path("/run/x/tls/ca.pem"), Path("/run/x/tls/server.pem"), Path("/run/x/tls/server.key"), "ab")

# nginx's configuration before TLS and HTTP/2: a plain HTTP/1.1 port must render exactly this
NGINX_PLAIN = """daemon off;
worker_processes 1;
pid /w/nginx.pid;
error_log /l/nginx-error.log warn;
events { worker_connections 4096; }
http {
    include /etc/nginx/mime.types;
    # $remote_port ties each log line to its connection in the pcap
    log_format measured '$remote_addr $remote_port "$request" $status $body_bytes_sent $request_time';
    access_log /l/nginx-access.log measured;
    sendfile on;
    keepalive_timeout 5;
    client_body_temp_path /w/temp/body;
    proxy_temp_path /w/temp/proxy;
    fastcgi_temp_path /w/temp/fastcgi;
    uwsgi_temp_path /w/temp/uwsgi;
    scgi_temp_path /w/temp/scgi;
    server {
        listen 10.0.0.1:80;
        listen [fd00::1]:80;
        root /d;
    }
}
"""


def _server(cls, tls=None, http=("1.1",), listen=LISTEN):
    return cls(None, WORK, DOCROOT, LOGS, listen, tls=tls, http=http)


def test_apache_plain_http11_is_unchanged_and_tls_h2_add_their_modules():
    from congestlab.servers.apache import ApacheServer
    plain = _server(ApacheServer).render()
    assert "ssl" not in plain.lower() and "http2" not in plain and "Protocols" not in plain
    # the lines of the configuration Apache had before TLS and HTTP/2 (servers/apache.py, 4314535)
    assert plain.splitlines()[:3] == [f'ServerRoot "{WORK}"', f'DefaultRuntimeDir "{WORK}/run"',
                                      f'PidFile "{WORK}/httpd.pid"']
    assert plain.count("\n") == 24
    both = _server(ApacheServer, TLS, ("1.1", "2")).render()
    assert "Protocols h2 http/1.1" in both and "SSLEngine on" in both and "mod_ssl.so" in both
    assert f'SSLCertificateFile "{TLS.cert}"' in both and f'SSLCertificateKeyFile "{TLS.key}"' in both
    assert "SSLProtocol -all +TLSv1.2 +TLSv1.3" in both
    h2c = _server(ApacheServer, None, ("1.1", "2")).render()
    assert "Protocols h2c http/1.1" in h2c and "H2Direct on" in h2c and "SSLEngine" not in h2c


def test_every_builtin_kind_is_registered():
    assert set(KERNEL_SERVERS) == {"apache", "nginx", "caddy", "lighttpd", "h2o"}


def test_nginx_plain_http11_is_unchanged():
    listen = [("10.0.0.1", 80), ("fd00::1", 80)]
    assert render_config(Path("/w"), Path("/d"), Path("/l"), listen) == NGINX_PLAIN
    assert render_config(Path("/w"), Path("/d"), Path("/l"), listen, None, ("1.1",)) == NGINX_PLAIN


def test_nginx_tls_and_h2c():
    both = _server(NginxServer, TLS, ("1.1", "2")).render()
    assert "listen 10.0.1.2:8443 ssl http2;" in both and "listen [fd00:1::2]:8443 ssl http2;" in both
    assert f"ssl_certificate {TLS.cert};" in both and f"ssl_certificate_key {TLS.key};" in both
    h1 = _server(NginxServer, TLS).render()
    assert "listen 10.0.1.2:8443 ssl;" in h1 and "http2" not in h1
    h2c = _server(NginxServer, None, ("2",)).render()
    assert "listen 10.0.1.2:8443 http2;" in h2c and "ssl" not in h2c


def test_caddy_plain_and_tls():
    plain = _server(CaddyServer).render()
    assert "http://:8443 {" in plain and "\tbind 10.0.1.2 fd00:1::2\n" in plain
    assert "protocols h1\n" in plain and "\ttls " not in plain
    assert f"root * {DOCROOT}" in plain and f"output file {LOGS / 'caddy-access.log'}" in plain
    assert "admin off" in plain and "auto_https off" in plain and f"storage file_system {WORK / 'storage'}" in plain
    assert "protocols h1 h2c\n" in _server(CaddyServer, None, ("1.1", "2")).render()
    tls = _server(CaddyServer, TLS, ("1.1", "2")).render()
    assert "https://:8443 {" in tls and f"\ttls {TLS.cert} {TLS.key}\n" in tls
    # no h3 unless asked: Caddy would open a QUIC listener on UDP
    assert "protocols h1 h2\n" in tls and "h3" not in tls
    assert "protocols h1\n" in _server(CaddyServer, TLS).render()
    assert _server(CaddyServer, TLS).confounds() is None


def test_caddy_with_http3_opens_quic_and_records_its_stack():
    caddy = _server(CaddyServer, TLS, ("1.1", "2", "3"))
    assert "protocols h1 h2 h3\n" in caddy.render()
    assert caddy.confounds()["stack"].startswith("quic-go 0.29")


def test_caddy_runs_with_its_state_in_the_workdir():
    caddy = _server(CaddyServer)
    env = caddy.environment()
    for name in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        assert Path(env[name]).is_relative_to(WORK), name
    assert caddy.command("/usr/bin/caddy") == ["/usr/bin/caddy", "run", "--config", str(WORK / "Caddyfile"),
                                               "--adapter", "caddyfile", "--pidfile", str(WORK / "caddy.pid")]


def test_lighttpd_plain_and_tls():
    plain = _server(LighttpdServer).render()
    assert 'server.bind = "10.0.1.2"' in plain and "server.port = 8443" in plain
    assert '$SERVER["socket"] == "[fd00:1::2]:8443" { }' in plain
    assert f'server.document-root = "{DOCROOT}"' in plain and f'"{WORK / "lighttpd.pid"}"' in plain
    assert '"server.h2proto" => "disable", "server.h2c" => "disable"' in plain
    assert "mod_openssl" not in plain and "ssl." not in plain and "%{remote}p" in plain
    tls = _server(LighttpdServer, TLS, ("1.1", "2")).render()
    assert '"server.h2proto" => "enable", "server.h2c" => "enable"' in tls and '"mod_openssl"' in tls
    assert f'ssl.pemfile = "{TLS.cert}"' in tls and f'ssl.privkey = "{TLS.key}"' in tls
    assert '$SERVER["socket"] == "[fd00:1::2]:8443" { ssl.engine = "enable" }' in tls
    assert tls.count('ssl.engine = "enable"') == 2
    assert _server(LighttpdServer).command("/usr/sbin/lighttpd") == [
        "/usr/sbin/lighttpd", "-D", "-f", str(WORK / "lighttpd.conf")]


def test_lighttpd_binds_a_v6_address_first_in_brackets():
    v6_first = _server(LighttpdServer, listen=list(reversed(LISTEN))).render()
    assert 'server.bind = "[fd00:1::2]"' in v6_first and '$SERVER["socket"] == "10.0.1.2:8443" { }' in v6_first


def _h2o_listens(text: str) -> list[dict]:
    return [json.loads(line.removeprefix("listen: ")) for line in text.splitlines() if line.startswith("listen: ")]


def test_h2o_plain_and_tls():
    plain = _server(H2oServer).render()
    assert _h2o_listens(plain) == [{"host": "10.0.1.2", "port": 8443}, {"host": "fd00:1::2", "port": 8443}]
    assert "http1-upgrade-to-http2: OFF" in plain
    assert f'pid-file: "{WORK / "h2o.pid"}"' in plain and f'file.dir: "{DOCROOT}"' in plain
    assert f'path: "{LOGS / "h2o-access.log"}"' in plain and "%{remote}p" in plain
    tls = _server(H2oServer, TLS, ("1.1", "2")).render()
    assert "http1-upgrade-to-http2: ON" in tls
    for entry in _h2o_listens(tls):
        assert entry["ssl"] == {"certificate-file": str(TLS.cert), "key-file": str(TLS.key),
                                "ocsp-update-interval": 0}
    assert _server(H2oServer).command("/usr/bin/h2o") == ["/usr/bin/h2o", "-c", str(WORK / "h2o.conf")]


@pytest.mark.parametrize("output, pattern, version", [
    ("h2o version 2.2.5\nOpenSSL: OpenSSL 3.0\n", r"h2o version (\S+)", "2.2.5"),
    ("lighttpd/1.4.69 (ssl) - a light and fast webserver\n", r"lighttpd/(\S+)", "1.4.69"),
    ("2.6.2\n", r"v?(\d+\.\d+\.\d+\S*)", "2.6.2"),
    ("v2.7.6 h1:abc=\n", r"v?(\d+\.\d+\.\d+\S*)", "2.7.6"),
])
def test_tool_version(tmp_path, output, pattern, version):
    tool = tmp_path / "tool"
    tool.write_text(f"#!/bin/sh\nprintf '{output}'\n")
    tool.chmod(0o755)
    assert tool_version(str(tool), str(tool), ["-v"], pattern) == version


@pytest.mark.parametrize("kind, tls, http, ok", [
    ("h2o", True, ["1.1"], False),  # h2o 2.2 always offers h2 by ALPN
    ("h2o", True, ["1.1", "2"], True),
    ("nginx", True, ["2"], False),  # nginx answers HTTP/1.1 over TLS too
    ("nginx", False, ["2"], True),
    ("caddy", False, ["2"], False),
    ("lighttpd", True, ["1.1"], True),
    ("apache", True, ["1.1", "2"], True),
    ("apache", False, ["2"], False),  # mod_http2 serves h2c beside HTTP/1.1
])
def test_builtin_serves(kind, tls, http, ok):
    def make():
        return ServerSpec(name="web", kind=kind, node="server", tls=tls, http=http)
    if ok:
        make()
    else:
        with pytest.raises(ValidationError, match="cannot serve"):
            make()
