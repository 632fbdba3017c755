"""Any program as the server under test: the placeholders of its command, config and
environment (spec/server_template.py) and their values for one instance
(servers/command.py), with no namespace and nothing started."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from congestlab.errors import ToolError
from congestlab.servers.command import CommandServer, placeholder_values
from congestlab.servers.tls import RunCertificates
from congestlab.spec.server_template import PLACEHOLDERS, render, unknown_placeholders
from congestlab.spec.servers import ServerSpec

LISTEN = [("10.9.1.2", 8443), ("fd00:9:0:1::2", 8443)]


def test_render_replaces_every_placeholder_and_keeps_other_braces():
    values = {"port": "8443", "docroot": "/srv/www"}
    assert render("root {docroot}; listen {port};", values) == "root /srv/www; listen 8443;"
    # a config's own braces pass: blocks, a Caddyfile's {http.request.uri}, upper case, spaces
    text = "server { listen {port}; } header {http.request.uri} {PORT} { port }"
    assert render(text, values) == "server { listen 8443; } header {http.request.uri} {PORT} { port }"


def test_a_doubled_brace_renders_as_a_literal_placeholder():
    assert render("{{port}} is {port}", {"port": "80"}) == "{port} is 80"
    assert render("{{upstream}}", {}) == "{upstream}"


def test_render_without_a_value_raises_naming_it():
    with pytest.raises(KeyError) as err:
        render("--cert {cert}", {"port": "80"})
    assert err.value.args[0] == "cert"


def test_unknown_placeholders_are_the_typos_only():
    assert unknown_placeholders("{port} {prot} {docroot} {dcroot} {prot}") == ["dcroot", "prot"]
    assert unknown_placeholders("{{prot}} {http.request.uri} {PORT} server { }") == []
    assert unknown_placeholders(" ".join(f"{{{name}}}" for name in PLACEHOLDERS)) == []


def _certs(tmp_path: Path) -> RunCertificates:
    tls = tmp_path / "tls"
    return RunCertificates(tls / "ca.pem", tls / "server.pem", tls / "server.key", "ab:cd")


def test_placeholder_values_of_one_instance(tmp_path):
    fake = SimpleNamespace(listen=LISTEN, docroot=tmp_path / "docroot", workdir=tmp_path / "work",
                           log_dir=tmp_path / "logs", tls=None)
    values = placeholder_values(fake, "srv.conf")
    assert values == {"port": "8443", "addr4": "10.9.1.2", "addr6": "fd00:9:0:1::2", "listen4": "10.9.1.2:8443",
                      "listen6": "[fd00:9:0:1::2]:8443", "docroot": str(tmp_path / "docroot"),
                      "workdir": str(tmp_path / "work"), "logdir": str(tmp_path / "logs"),
                      "config": str(tmp_path / "work" / "srv.conf")}
    with_tls = placeholder_values(SimpleNamespace(**vars(fake) | {"tls": _certs(tmp_path)}), "srv.conf")
    assert with_tls == values | {"cert": str(tmp_path / "tls" / "server.pem"),
                                 "key": str(tmp_path / "tls" / "server.key"), "ca": str(tmp_path / "tls" / "ca.pem")}
    assert set(with_tls) == set(PLACEHOLDERS)  # every placeholder the spec accepts has a value


def _server(tmp_path: Path, tls: bool = False, **fields) -> CommandServer:
    spec = ServerSpec(name="web", kind="command", node="server", port=8443, tls=tls, **fields)
    return CommandServer(spec, None, tmp_path / "work", tmp_path / "docroot", tmp_path / "logs", LISTEN,
                         tls=_certs(tmp_path) if tls else None)


def test_the_command_config_and_environment_are_filled_in(tmp_path):
    server = _server(tmp_path, command=["srv", "-c", "{config}", "--listen", "{listen6}", "{{literal}}"],
                     config_template="listen {listen4};\nroot {docroot};\nmap { a b }\n", config_name="srv.conf",
                     env={"SRV_LOG": "{logdir}/x.log"})
    assert server.command("/usr/bin/srv") == ["/usr/bin/srv", "-c", str(tmp_path / "work" / "srv.conf"), "--listen",
                                              "[fd00:9:0:1::2]:8443", "{literal}"]
    assert server.config_path == tmp_path / "work" / "srv.conf"
    assert server.render() == f"listen 10.9.1.2:8443;\nroot {tmp_path / 'docroot'};\nmap {{ a b }}\n"
    env = server.environment()
    assert env["SRV_LOG"] == f"{tmp_path / 'logs'}/x.log" and env["PATH"]  # the host's environment, plus its own
    assert _server(tmp_path, command=["srv"]).environment() is None


def test_the_executable_is_the_commands_first_word_found(tmp_path):
    assert _server(tmp_path, command=[sys.executable, "-V"]).executable() == sys.executable
    with pytest.raises(ToolError, match="tool not found: no-such-server-unit45"):
        _server(tmp_path, command=["no-such-server-unit45"]).executable()


@pytest.mark.parametrize("where", ["command", "config_template", "env"])
def test_a_tls_placeholder_without_tls_is_refused_naming_it(tmp_path, where):
    fields = {"command": ["srv", "--cert", "{cert}"] if where == "command" else ["srv"]}
    if where == "config_template":
        fields["config_template"] = "ssl_certificate_key {key};"
    if where == "env":
        fields["env"] = {"SRV_CA": "{ca}"}
    missing = {"command": "cert", "config_template": "key", "env": "ca"}[where]
    with pytest.raises(ValidationError, match=rf"{where}: placeholder \{{{missing}\}} is the run's TLS material"):
        _server(tmp_path, **fields)
    # a server object made without the spec's check still names it when it starts
    spec = ServerSpec.model_construct(**(ServerSpec(name="web", kind="command", node="server", command=["srv"])
                                         .model_dump() | fields))
    server = CommandServer(spec, None, tmp_path / "work", tmp_path / "docroot", tmp_path / "logs", LISTEN)
    with pytest.raises(ToolError, match=rf"placeholder \{{{missing}\}} has no value \(the TLS ones need tls = true\)"):
        {"command": lambda: server.command("srv"), "config_template": server.render,
         "env": server.environment}[where]()


def test_a_tls_placeholder_with_tls_is_the_runs_certificate(tmp_path):
    server = _server(tmp_path, tls=True, command=["srv", "--cert", "{cert}", "--key", "{key}"])
    assert server.command("srv")[1:] == ["--cert", str(tmp_path / "tls" / "server.pem"), "--key",
                                         str(tmp_path / "tls" / "server.key")]


def test_a_literal_version_is_recorded_as_given(tmp_path):
    assert _server(tmp_path, command=["srv"], version="srv 1.2.3").version() == "srv 1.2.3"
    assert _server(tmp_path, command=["srv"]).version() == "unknown (no version given in the spec)"


def test_a_version_command_gives_its_first_output_line(tmp_path):
    server = _server(tmp_path, command=["srv"], version=["python3", "--version"])
    assert server.version().startswith("Python 3.")
    # placeholders are filled in, and a version printed on stderr counts too
    printing = _server(tmp_path, command=["srv"], env={"SRV_NAME": "unit45"},
                       version=[sys.executable, "-c", "import os, sys; print('srv', os.environ['SRV_NAME'], "
                                "sys.argv[1], file=sys.stderr); print('second line', file=sys.stderr)", "{port}"])
    assert printing.version() == "srv unit45 8443"
    silent = _server(tmp_path, command=["srv"], version=["true"])
    assert silent.version() == "unknown (true printed nothing)"


def test_a_version_command_that_cannot_run_raises(tmp_path):
    server = _server(tmp_path, command=["srv"], version=["/nonexistent/unit45-srv", "--version"])
    with pytest.raises(ToolError, match="its version command failed"):
        server.version()
